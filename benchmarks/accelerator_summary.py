"""Collects the parts of ``benchmarks/accelerator_check.sh`` into one JSON with the goals.

    python benchmarks/accelerator_summary.py OUT_DIR --json OUT_DIR/accelerator_check.json

Parts (each may be missing when its step failed or ran out of time; the summary says so):
``device.json`` (device report), ``throughput.json`` (benchmarks/throughput.py),
``host_loop.json`` (benchmarks/host_loop_ppo.py), ``protocol/manifest.json`` (the default
protocol run) and ``steps.json`` (each step's exit status and seconds).

Goals (issue 12, for an H200): the hrv task trains at >= 10M environment steps per second
at 32 seeds x 2,048 environments; 5 seeds take <= 1.2x one seed's wall time (training, same
environments per seed); the one-scan trainer is >= 3x the host-loop PPO (warm run time).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HRV_STEPS_PER_S_GOAL = 10_000_000
FIVE_OVER_ONE_SEED_GOAL = 1.2
SCAN_OVER_HOST_LOOP_GOAL = 3.0


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
    summary = summarize(
        _read(out / "device.json"),
        _read(out / "throughput.json"),
        _read(out / "host_loop.json"),
        _read(out / "protocol" / "manifest.json"),
        _read(out / "steps.json"),
    )
    args.json.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary["goals"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
