"""Collects the parts of ``benchmarks/accelerator_check.sh`` into one JSON with the goals.

    python benchmarks/accelerator_summary.py OUT_DIR --json OUT_DIR/accelerator_check.json

Parts (each may be missing when its step failed or ran out of time; the summary says so):
``device.json`` (device report), ``throughput.json`` (benchmarks/throughput.py),
``host_loop.json`` (benchmarks/host_loop_ppo.py), ``main_cold/`` and ``main_warm/`` (the
default main job on an empty and on a filled compilation cache; ``protocol/`` in older
folders), ``checkpoint_cost.json`` (benchmarks/checkpoint_cost.py), ``peers_narrow.json`` and
``peers_wide.json`` (benchmarks/peers.py, PureJaxRL's CartPole at 5 and 256 seeds),
``evaluation_steps.json`` (benchmarks/evaluation_steps.py) and ``steps.json`` (each step's
exit status and seconds).

Goals (issue 12, for an H200): the hrv task trains at >= 10M environment steps per second
at 32 seeds x 2,048 environments; 5 seeds take <= 1.2x one seed's wall time (training, same
environments per seed); the one-scan trainer is >= 3x the host-loop PPO (warm run time).
Goals (issue 49, for an H200): the default main job in <= 20 s wall with an empty cache and
both goals met; purehr >= 1.2x PureJaxRL's steps/s at 5 and at 256 seeds, its first call no
slower and its returns no worse (``issue49_goals``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HRV_STEPS_PER_S_GOAL = 10_000_000
FIVE_OVER_ONE_SEED_GOAL = 1.2
SCAN_OVER_HOST_LOOP_GOAL = 3.0
MAIN_JOB_WALL_GOAL_S = 20.0
OVER_PUREJAXRL_GOAL = 1.2


def _read(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def summarize(
    device: dict | None, throughput: dict | None, host_loop: dict | None, protocol: dict | None, steps: dict | None
) -> dict:
    """The goals from whatever parts exist; a goal with no measurement is ``None`` (not met,
    not failed: not measured)."""
    records = (throughput or {}).get("records", [])

    def training(task: str, seeds: int) -> dict | None:
        matching = [
            r for r in records if r.get("mode") == "training" and r.get("task") == task and r.get("seeds") == seeds
        ]
        return max(matching, key=lambda r: r["envs"]) if matching else None

    hrv_32 = training("hrv", 32)
    hrv_steps = hrv_32["steps_per_s"] if hrv_32 else None
    five_over_one = {}
    for task in ("swing", "hrv"):
        one, five = training(task, 1), training(task, 5)
        if one and five and one["envs"] == five["envs"]:
            five_over_one[task] = round(five["run_s"] / one["run_s"], 3)
    speedup = (host_loop or {}).get("speedup_run")
    goals = {
        "hrv_training_steps_per_s_at_32_seeds": hrv_steps,
        "hrv_training_envs": hrv_32["envs"] if hrv_32 else None,
        "hrv_at_least_10M_steps_per_s": None if hrv_steps is None else hrv_steps >= HRV_STEPS_PER_S_GOAL,
        "five_seeds_over_one_seed_wall": five_over_one,
        "five_seeds_at_most_1.2x_one_seed": (
            None if not five_over_one else all(v <= FIVE_OVER_ONE_SEED_GOAL for v in five_over_one.values())
        ),
        "one_scan_over_host_loop": speedup,
        "one_scan_at_least_3x_host_loop": None if speedup is None else speedup >= SCAN_OVER_HOST_LOOP_GOAL,
    }
    protocol_summary = None
    if protocol is not None:
        protocol_summary = {
            key: protocol.get(key)
            for key in ("status", "wall_time_s", "compile_s", "tasks", "seeds", "peak_memory_bytes", "mesh")
        }
    return {
        "device": device,
        "goals": goals,
        "protocol": protocol_summary,
        "steps": steps,
        "throughput_records": records,
        "host_loop": host_loop,
    }


def issue49_goals(
    cold: dict | None,
    warm: dict | None,
    goals_met: dict | None,
    checkpoint_cost: dict | None,
    peers: dict[str, dict | None],
) -> dict:
    """Issue 49's goals from its parts (``None``: not measured). ``cold`` / ``warm``: the main
    job's manifests; ``goals_met``: ``purehr.reports.results_table.goals_met`` of the cold run;
    ``peers``: "narrow" / "wide" -> benchmarks/peers.py's record."""

    def wall(manifest):
        return None if manifest is None else manifest.get("wall_time_s")

    cold_wall = wall(cold)
    both_met = None if not goals_met else all(verdict["met"] for verdict in goals_met.values())
    ratios = (checkpoint_cost or {}).get("ratio_sparse_over_default", {})
    cost = ratios.get("program_s", ratios.get("training_s"))  # the program's own time where recorded
    comparisons = {}
    for width, record in peers.items():
        found = [r for r in (record or {}).get("records", []) if r.get("config", "").startswith("purejaxrl:")]
        if found:
            r = found[0]
            comparisons[width] = {
                "seeds": r.get("seeds"),
                "ratio_steps_per_s": r["ratio_purehr_over_peer"]["steps_per_s"],
                "ratio_compile_s": r["ratio_purehr_over_peer"]["compile_s"],
                "returns_no_worse": r["purehr_returns_no_worse"],
            }
    ahead = [c["ratio_steps_per_s"] >= OVER_PUREJAXRL_GOAL for c in comparisons.values()]
    return {
        "main_job_cold_wall_s": cold_wall,
        "main_job_cold_compile_s": None if cold is None else cold.get("compile_s"),
        "main_job_warm_wall_s": wall(warm),
        "main_job_warm_compile_s": None if warm is None else warm.get("compile_s"),
        "both_goals_met": both_met,
        "goals_met": goals_met,
        "main_job_at_most_20s_with_goals": (
            None if cold_wall is None or both_met is None else cold_wall <= MAIN_JOB_WALL_GOAL_S and both_met
        ),
        "checkpoint_share_of_training": None if cost is None else round(1.0 - cost, 3),
        "purejaxrl": comparisons,
        "purehr_1.2x_purejaxrl_at_5_and_256": None if len(ahead) < 2 else all(ahead),
        "first_call_no_slower_returns_no_worse": (
            None
            if len(comparisons) < 2
            else all(c["ratio_compile_s"] <= 1.0 and c["returns_no_worse"] for c in comparisons.values())
        ),
    }


def _goals_met(run_dir: Path) -> dict | None:
    try:
        from purehr.reports.results_table import goals_met

        return goals_met(run_dir)
    except Exception:  # the run failed or left no checkpoints: not measured
        return None


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("out_dir", type=Path, help="the folder accelerator_check.sh wrote its parts to")
    parser.add_argument("--json", type=Path, required=True, help="where the one JSON goes")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.out_dir.is_dir():
        parser.exit(2, f"error: {args.out_dir} is not a folder; expected accelerator_check.sh's output folder\n")
    out = args.out_dir
    main_dir = out / "main_cold" if (out / "main_cold").is_dir() else out / "protocol"
    cold = _read(main_dir / "manifest.json")
    summary = summarize(
        _read(out / "device.json"),
        _read(out / "throughput.json"),
        _read(out / "host_loop.json"),
        cold,
        _read(out / "steps.json"),
    )
    summary["issue49"] = issue49_goals(
        cold,
        _read(out / "main_warm" / "manifest.json"),
        _goals_met(main_dir) if cold is not None else None,
        _read(out / "checkpoint_cost.json"),
        {"narrow": _read(out / "peers_narrow.json"), "wide": _read(out / "peers_wide.json")},
    )
    summary["evaluation_steps"] = _read(out / "evaluation_steps.json")
    args.json.write_text(json.dumps(summary, indent=1))
    print(json.dumps({"issue12": summary["goals"], "issue49": summary["issue49"]}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
