"""What a protocol run tells its user after it ends: wall time with rendering, the held-out
results against the baselines, the figures and the next commands. Pure text: it reads the
run directory's files and returns a string, so the command line and the tests use the same words.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
from pathlib import Path

from purehr.reports.results_table import GOAL_METRIC, counted, floor_comparisons, goals_met, results_table
from purehr.reports.run_statistics import robust_table
from purehr.run.host.progress import spelled_duration
from purehr.run.store.run_dir import FIGURES, RunDirectory
from purehr.tracking.settings import RUN_FOLDERS, TrackingSettings


def final_summary(
    run_dir: str | Path, scripts_dir: str | Path | None = None, cwd: str | Path | None = None, console: bool = False
) -> str:
    """The end of a run, from its files: wall time (training, compilation, rendering), the
    held-out table of the reported (by default the last) checkpoints against the baselines and
    floors, the goals, the figures and ``replay.html``, and the commands to go on with this run's
    directory: the scripts in ``scripts_dir``, or with ``console`` the ``purehr`` command's (a run
    started as ``purehr train``, perhaps from an install without a checkout)."""
    run_dir = Path(run_dir)
    manifest = RunDirectory(run_dir).read_manifest()
    against = (
        "baseline and the floor policies"
        if all(task in GOAL_METRIC for task in manifest["tasks"])
        else "baseline (where the task has one) and the floor policies"
    )
    lines = [
        _timing_line(run_dir, manifest),
        "",
        f"held-out metrics of the {_reported_what(manifest)} (mean [95% t interval] over seeds), "
        f"against the {against}:",
        "",
        results_table(run_dir).rstrip("\n"),
        "",
    ]
    if manifest.get("pbt") is None:  # PBT members copy each other's weights: no bootstrap over them
        lines += [
            "the same checkpoints, robust statistics (interquartile mean and mean over seeds, 95% bootstrap CIs):",
            "",
            robust_table(run_dir).rstrip("\n"),
            "",
        ]
    for task, verdict in goals_met(run_dir).items():
        lines.append(
            f"{task} goal {'met' if verdict['met'] else 'NOT met'}: "
            + ", ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in verdict.items() if k != "met"
            )
        )
    lines += [_floor_comparison_line(task, comparison) for task, comparison in floor_comparisons(run_dir).items()]
    figures = run_dir / FIGURES
    drawn = sorted(figures.glob("*.png")) if figures.is_dir() else []
    replay = figures / "replay.html"
    lines.append("")
    if drawn:
        lines.append("figures:")
        lines += [f"  {_shown(path, cwd)}" for path in drawn if path.name != "replay_poster.png"]
        if replay.exists():
            lines.append(f"  {_shown(replay, cwd)}   (the replay: open it in a browser)")
    else:
        lines.append(
            f"figures: not drawn yet; {_script(scripts_dir, 'render.py', cwd, console)} "
            f"--run-dir {_quoted(run_dir, cwd)} draws them"
        )
    task, seed = manifest["tasks"][0], manifest["seeds"][0]
    shown = _quoted(run_dir, cwd)
    lines += [
        "",
        "next:",
        f"  {_script(scripts_dir, 'analyze_run.py', cwd, console)} --run-dir {shown}",
        "      training performance of every task and seed",
        f"  {_script(scripts_dir, 'evaluate.py', cwd, console)} --checkpoint {shown} --task {task} --seed {seed} "
        "--step latest",
        "      held-out evaluation of one checkpoint (any --task, --seed, --step)",
        f"  from purehr.run import restore; r = restore({str(_shown(run_dir, cwd))!r}, task={task!r}, "
        f"seed={seed}, step='latest')",
        "      in Python: r.params, r.policy(observation), r.checkpoint_row",
    ]
    lines += _dashboard_lines(run_dir, manifest, cwd)
    return "\n".join(lines) + "\n"


def _dashboard_lines(run_dir: Path, manifest: dict, cwd) -> list[str]:
    """How to look at the dashboards the run logged to (``--log``)."""
    tracking, lines = TrackingSettings.from_json(manifest.get("tracking")), []
    if "tensorboard" in tracking.backends:
        folder = tracking.tensorboard_dir(run_dir)
        lines += [f"  tensorboard --logdir {_quoted(folder, cwd)}", "      the run on TensorBoard (every task x seed)"]
    if "wandb" in tracking.backends and tracking.resolved_wandb_mode() == "offline":
        pieces = run_dir / RUN_FOLDERS["wandb"] / "offline-run-*"
        lines += [
            f"  wandb sync {_shown(pieces, cwd)}",
            "      uploads the offline W&B runs (their resumed pieces in order)",
        ]
    return lines


def _floor_comparison_line(task: str, comparison: dict) -> str:
    """A task without a protocol goal: PPO's held-out return against the best floor (and the
    reference policy where the task has one), in words."""
    algorithm = comparison.get("algorithm", "PPO")
    ppo = (
        f"{algorithm} held-out return {comparison['ppo_mean']:.4g} (mean of {counted(comparison['num_seeds'], 'seed')})"
    )
    if comparison["reference"] is None:
        line = f"{task} (no reference policy, no protocol goal): {ppo}"
    else:
        line = (
            f"{task} (no protocol goal): {ppo}; reference {comparison['reference']} {comparison['reference_value']:.4g}"
        )
    if comparison["best_floor"] is None:
        return line + "; no floor recorded"
    return (
        f"{line}; best floor {comparison['best_floor']} {comparison['best_floor_value']:.4g}: {algorithm} above it on "
        f"{comparison['seeds_above_best_floor']} of {counted(comparison['num_seeds'], 'seed')}"
    )


def _reported_what(manifest: dict) -> str:
    """Which checkpoint the table holds: the last, or the one chosen on validation episodes."""
    reported = manifest.get("reported_checkpoints") or {}
    if not reported:
        return "last checkpoint"
    chosen = "; ".join(
        f"{task}: the best of each seed's last {entry['candidates']} on "
        f"{entry['validation_episodes']} validation episodes"
        for task, entry in reported.items()
    )
    others = "; the other tasks: the last" if set(manifest["tasks"]) - set(reported) else ""
    return f"reported checkpoint ({chosen}{others})"


def _timing_line(run_dir: Path, manifest: dict) -> str:
    training = manifest.get("wall_time_s")
    total = manifest.get("wall_time_with_render_s") or training
    parts = []
    for label, key in (("compilation", "compile_s"), ("rendering", "render_s")):
        value = manifest.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            parts.append(f"{label} {spelled_duration(value)}")
    if not isinstance(total, (int, float)):
        return f"{run_dir}: {manifest.get('status', 'unknown')} run"
    detail = f" (of which {', '.join(parts)})" if parts else ""
    what = "including rendering" if manifest.get("wall_time_with_render_s") else "training only"
    return f"finished {run_dir} in {spelled_duration(total)} wall time, {what}{detail}"


def _shown(path: Path, cwd: str | Path | None) -> Path:
    """``path`` relative to the working directory when it lies inside it, else as given."""
    base = Path.cwd() if cwd is None else Path(cwd)
    try:
        return Path(path).resolve().relative_to(base.resolve())
    except ValueError:
        return Path(path)


def _quoted(path: Path, cwd) -> str:
    return shlex.quote(str(_shown(path, cwd)))


CONSOLE_COMMANDS = {"render.py": "render", "analyze_run.py": "analyze", "evaluate.py": "evaluate"}
"""The ``purehr`` command of each script the summary names (``purehr.cli.main``)."""


def _script(scripts_dir, name: str, cwd, console: bool = False) -> str:
    if console:
        return f"purehr {CONSOLE_COMMANDS[name]}"
    scripts = Path(scripts_dir) if scripts_dir is not None else Path(__file__).resolve().parents[2] / "scripts"
    return f"{interpreter(cwd)} {_quoted(scripts / name, cwd)}"


def interpreter(cwd: str | Path | None = None, executable: str | None = None) -> str:
    """The Python that runs this (``sys.executable``), as a command: relative to the working
    directory when inside it (``.venv/bin/python``), else absolute. Bare ``python`` fails outside
    an activated virtual environment. Symlinks are kept: a venv's python is a link out of it."""
    executable = executable or sys.executable
    if not executable:  # an embedded interpreter that cannot say
        return "python"
    path = os.path.abspath(executable)
    base = os.path.abspath(Path.cwd() if cwd is None else cwd)
    relative = os.path.relpath(path, base)
    shown = path if relative.startswith(os.pardir) else relative
    return shlex.quote(shown if os.sep in shown else os.path.join(os.curdir, shown))
