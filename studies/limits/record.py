"""The record of the optimal-control study (``studies.limits.study``): results/limits/'s
files, its README and the two-line headline, from the studies' rows and summaries."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from purehr.run.store.files import atomic_write_json, write_csv, write_npz
from studies.limits.figures import plot_hrv_limits, plot_swing_limits

FILES = {
    "swing.csv": "one row per held-out start: the bounds, the controller, each PPO seed, the phases",
    "hrv.csv": "one row per held-out episode: the bound, both optima and their replays, the oracle, each PPO seed",
    "summary.json": "the summaries of both tasks, the settings, the command, the machine, the timing",
    "swing_actions.npz": "the upper bound's action sequences (starts x steps x 2, float32): replay them",
    "hrv_plans.npz": "the optimal plans (episodes x steps x 10 int32 actions), noise-free and realised-noise",
    "swing_limits.png": "time to rotation per start, sorted: PPO, controller, upper and lower bound",
    "hrv_limits.png": "steps per episode, sorted: PPO, oracle, exact optima, lower bound",
}
"""What a limits run writes (``write_results``, then ``write_summary``), file -> what it holds."""


def write_results(out: Path, swing: dict[str, Any], hrv: dict[str, Any]) -> list[Path]:
    """Writes the data files and figures of ``FILES`` into ``out`` (nothing is overwritten
    silently there: studies/scripts/limits.py refuses a non-empty folder without --overwrite). The
    caller writes ``summary.json`` last (``write_summary``), once the whole command's wall time
    is known."""
    out.mkdir(parents=True, exist_ok=True)
    written = [write_csv(out / "swing.csv", None, swing["rows"]), write_csv(out / "hrv.csv", None, hrv["rows"])]
    theta0, theta_dot0 = (np.asarray([row[k] for row in swing["rows"]]) for k in ("theta0_deg", "theta_dot0"))
    written.append(
        write_npz(
            out / "swing_actions.npz",
            {"actions": swing["actions"], "theta0": np.deg2rad(theta0), "theta_dot0": theta_dot0},
        )
    )
    written.append(write_npz(out / "hrv_plans.npz", hrv["plans"]))
    seeds_swing = [name[: -len("_s")] for name in swing["rows"][0] if name.startswith("ppo_seed")]
    seeds_hrv = [name for name in hrv["rows"][0] if name.startswith("ppo_seed")]
    written.append(plot_swing_limits(swing["rows"], out / "swing_limits.png", seeds_swing))
    written.append(plot_hrv_limits(hrv["rows"], out / "hrv_limits.png", seeds_hrv))
    return written


def write_summary(out: Path, swing: dict[str, Any], hrv: dict[str, Any], record: dict[str, Any]) -> Path:
    """``out/summary.json``: both summaries, the record (command, machine, timing), the files."""
    summary = {"swing": swing["summary"], "hrv": hrv["summary"], "record": record, "files": FILES}
    return atomic_write_json(out / "summary.json", summary)


def headline(swing: dict[str, Any], hrv: dict[str, Any]) -> str:
    """Two lines: each task's reference, PPO and the gap at the median and the worst start."""
    s, h = swing, hrv
    return (
        f"swing: time to rotation, median over {s['starts']} starts: lower bound {s['lower_bound_s']['median']:.2f} s, "
        f"upper bound {s['upper_bound_s']['median']:.2f} s, PPO {s['ppo_median_s']['median']:.2f} s, controller "
        f"{s['controller_s']['median']:.2f} s; PPO / upper bound - 1: median {s['ppo_gap']['median']:+.1%}, worst "
        f"{s['ppo_gap']['max']:+.1%} (start {s['ppo_gap']['worst_start']})\n"
        f"hrv: steps, mean over {h['episodes']} episodes: lower bound {h['lower_bound']['mean']:.2f}, optimum "
        f"{h['optimum_realised_noise']['mean']:.2f} (noise-free {h['optimum_noise_free']['mean']:.2f}), PPO "
        f"{h['ppo_median']['mean']:.2f}, oracle {h['oracle']['mean']:.2f}; PPO - optimum: median "
        f"{h['ppo_excess_steps']['median']:+.1f}, worst {h['ppo_excess_steps']['max']:+.1f} steps "
        f"(episode {h['ppo_excess_steps']['worst_episode']})"
    )


def _stats_row(name: str, stats: dict[str, float], digits: int) -> str:
    cells = [f"{stats.get(k, math.nan):.{digits}f}" for k in ("median", "mean", "min", "q1", "q3", "max")]
    return f"| {name} | " + " | ".join(cells) + " |"


def _usage_row(name: str, usage: dict[str, list[float]]) -> str:
    ops, styles, nudged = usage["content_ops"], usage["styles"], usage["nudged_fraction"]
    cells = [*ops, styles[0], sum(styles[1:]), nudged[0]]
    return f"| {name} | " + " | ".join(f"{v:.2f}" for v in cells) + " |"


STATS_HEADER = "| | median | mean | min | q1 | q3 | max |\n|---|---:|---:|---:|---:|---:|---:|"


def readme_text(swing: dict[str, Any], hrv: dict[str, Any], record: dict[str, Any]) -> str:
    """results/limits/README.md: how the numbers were made, and the numbers."""
    lines = [
        *_intro_lines(swing, hrv, record),
        *_swing_lines(swing),
        *_hrv_lines(hrv),
        "## Files",
        "",
        *[f"- `{name}`: {what}" for name, what in FILES.items()],
        "- `README.md`: this page",
        "",
    ]
    return "\n".join(lines)


def _intro_lines(swing: dict[str, Any], hrv: dict[str, Any], record: dict[str, Any]) -> list[str]:
    """The title, the command and the machine."""
    machine = record["machine"]
    platform = machine.get("platform", {})
    load = record.get("load_average_before")
    # a 1-minute load above half the cores before the start: another job shared them
    busy = " (another job shared the cores)" if load and load[0] > 0.5 * (platform.get("cpu_count") or 1) else ""
    return [
        "# Optimal-control references (issue 28)",
        "",
        "How far PPO's final checkpoints are from the best any policy can do, on the held-out starts and",
        "episodes of the protocol. The method, the lower-bound argument and what each number means:",
        "`results/limits/README.md`. Written by `studies/scripts/limits.py` (do not edit by hand).",
        "",
        "```bash",
        " ".join(record["command"]),
        "```",
        "",
        f"Machine: {platform.get('cpu_count')}-core {platform.get('machine')}, JAX backend "
        f"{platform.get('jax_backend')}, jax {machine.get('versions', {}).get('jax')}, git "
        f"{machine.get('git_revision')}; load average before {load}, after {record.get('load_average_after')}"
        f"{busy}. Wall time "
        f"**{record['wall_s'] / 60:.1f} min** (swing {swing['seconds']:.0f} s, hrv {hrv['seconds']:.0f} s).",
        "",
    ]


def _swing_lines(swing: dict[str, Any]) -> list[str]:
    """The swing's times to rotation against the bounds, and where PPO falls behind."""
    header = STATS_HEADER
    seeds = "\n".join(_stats_row(f"PPO {n}", v, 2) for n, v in swing["ppo_per_seed_s"].items())
    phases = "\n".join(
        f"| {name} | {v['upper']:.2f} | {v['ppo']:.2f} | {v['ppo_minus_upper']:+.2f} | "
        f"{v['ppo_minus_upper_mean']:+.2f} |"
        for name, v in swing["phases_s"].items()
    )
    return [
        f"## Swing: time to the first full rotation (s), {swing['starts']} held-out starts",
        "",
        header,
        _stats_row("lower bound (physics)", swing["lower_bound_s"], 2),
        _stats_row("upper bound (verified in SwingEnv)", swing["upper_bound_s"], 2),
        _stats_row("PPO, median over seeds per start", swing["ppo_median_s"], 2),
        seeds,
        _stats_row("structured controller", swing["controller_s"], 2),
        "",
        f"PPO / upper bound - 1 per start: median {swing['ppo_gap']['median']:+.1%}, worst "
        f"{swing['ppo_gap']['max']:+.1%} (start {swing['ppo_gap']['worst_start']}); the controller's median "
        f"{swing['controller_gap']['median']:+.1%}. The upper bound rotates from {swing['rotating']['upper_bound']} "
        f"of {swing['starts']} starts, sooner than every PPO seed from "
        f"{swing['upper_bound_beats_every_ppo_seed']}; the optimiser's own crossing equals the replay's step on "
        f"{swing['optimiser_matches_replay']}. The lower bound is below every trajectory (PPO, controller, upper "
        f"bound): {swing['lower_bound_below_every_trajectory']}.",
        "",
        "Where PPO falls behind: the first time at each swing amplitude |theta| (s; median over starts; PPO's",
        "per start is the median over seeds), and PPO's lag behind the upper bound's trajectory there (per start):",
        "",
        "| amplitude first reached | upper bound | PPO | PPO - upper, median | PPO - upper, mean |",
        "|---|---:|---:|---:|---:|",
        phases,
        "",
    ]


def _hrv_lines(hrv: dict[str, Any]) -> list[str]:
    """HRV's steps against the bound and the exact optimum, per dimension and per operation."""
    header = STATS_HEADER
    hrv_seeds = "\n".join(_stats_row(f"PPO {n}", v, 2) for n, v in hrv["ppo_per_seed"].items())
    dims = hrv["per_dimension"]
    return [
        f"## HRV: steps to the target, {hrv['episodes']} held-out episodes",
        "",
        header,
        _stats_row("lower bound (per dimension, noise aside)", hrv["lower_bound"], 2),
        _stats_row("exact optimum, noise-free", hrv["optimum_noise_free"], 2),
        _stats_row("exact optimum, the evaluation's realised noise", hrv["optimum_realised_noise"], 2),
        _stats_row("PPO, median over seeds per episode", hrv["ppo_median"], 2),
        hrv_seeds,
        _stats_row("greedy oracle", hrv["oracle"], 2),
        "",
        f"PPO - optimum (realised noise) per episode: median {hrv['ppo_excess_steps']['median']:+.1f}, mean "
        f"{hrv['ppo_excess_steps']['mean']:+.2f}, worst {hrv['ppo_excess_steps']['max']:+.1f} steps (episode "
        f"{hrv['ppo_excess_steps']['worst_episode']}); PPO at the optimum on {hrv['ppo_at_optimum']} episodes. "
        f"Replays in HRWritingEnv at the searched length: noise-free {hrv['replays_match']['noise_free']}, realised "
        f"noise {hrv['replays_match']['realised_noise']} of {hrv['episodes']}; the noise-free plan, open loop under "
        f"the evaluation's noise, still succeeds within its steps on "
        f"{hrv['noise_free_plan_under_noise']['success_within_plan']}. Bound = optimum on "
        f"{hrv['bound_equals_optimum']}; borderline windows {hrv['borderline']}, clipped steps {hrv['clipped']}.",
        "",
        "Per dimension (0-7): PPO's settle step minus that dimension's own bound, mean "
        + ", ".join(f"{v:.2f}" for v in dims["ppo_settle_minus_bound_mean"])
        + "; the dimension PPO settles last, count "
        + ", ".join(str(v) for v in dims["ppo_last_settled_count"])
        + "; the binding dimension of the bound, count "
        + ", ".join(str(v) for v in dims["binding_dim_count"])
        + f"; correlation of the lateness with the dimension's gain {dims['late_vs_gain_correlation']:+.2f}.",
        "",
        "How the steps are spent (fractions of the steps taken):",
        "",
        "| | condense | keep | expand | style 0 (none) | styles 1-4 | dims nudged per step |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *[
            _usage_row(name, hrv["action_usage"][key])
            for name, key in (("PPO", "ppo"), ("optimum", "optimum_realised_noise"))
        ],
        "",
    ]
