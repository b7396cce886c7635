"""Summarise swing screens against the optimum: the numbers of results/robustness/README.md's
swing screen tables, from each run's final checkpoints.

    python studies/scripts/swing_screen.py RUN_DIR [RUN_DIR ...] [--json OUT.json]

Per run (every seed's final checkpoint, ``restore(..., "latest")``):

- median / mean / worst seed: the seeds' held-out time to rotation (their checkpoint row's
  ``eval_time_to_rotation``, the mean over the starts that rotate; over the seeds that rotate),
  ``min success`` the lowest ``eval_success_rate``, ``faster`` the seeds below the structured
  controller's 13.95 s at success >= 0.95;
- gap per start: the rollouts of ``studies/scripts/limits.py`` (``studies.limits.study._rows_of``
  and ``episode_outcome`` from ``heldout_starts()``): per start the median over the seeds that
  rotate of the time to rotation, over ``results/limits/swing.csv``'s verified fastest rotation
  (``upper_bound_s``) minus 1; the median over starts;
- 10 deg: the median over starts of the per-start median over seeds of the first time
  ``|theta| >= 10`` degrees (the upper bound's: 0.41 s); likewise for every amplitude of
  ``PHASES`` and the top (``reach_s`` in the JSON, the second table): where the time goes.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed

import numpy as np  # noqa: E402

from purehr.cli.arguments import HelpFormatter  # noqa: E402
from purehr.envs.swing.evaluation import heldout_starts  # noqa: E402
from purehr.run.restoring import restore  # noqa: E402
from studies.limits.study import PHASES, _rows_of, episode_outcome, record_seeds  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIMITS_CSV = ROOT / "results" / "limits" / "swing.csv"
CONTROLLER_S = 13.95  # the structured controller's held-out mean time to rotation (results/limits)
LEVELS = {**{f"{level} deg": f"phase_{level}" for level in PHASES}, "180 deg": "top", "360 deg": "time"}


def upper_bounds(path: Path = LIMITS_CSV) -> tuple[np.ndarray, np.ndarray]:
    """(upper_bound_s, upper_phase_10_s) per held-out start, as results/limits recorded them."""
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    return (
        np.array([float(row["upper_bound_s"]) for row in rows]),
        np.array([float(row["upper_phase_10_s"]) for row in rows]),
    )


def screen_summary(per_seed: dict[int, dict], reached: dict[str, np.ndarray], upper: np.ndarray) -> dict:
    """The table row: ``per_seed`` seed -> {success, time}; ``reached`` level name (``LEVELS``)
    -> (seeds, starts) first times from the rollouts (NaN where a start never gets there),
    ``"360 deg"`` the time to rotation; ``upper`` (starts,)."""
    success = np.array([row["success"] for row in per_seed.values()])
    seconds = np.array([row["time"] for row in per_seed.values()])
    rotating = seconds[np.isfinite(seconds)]
    with np.errstate(all="ignore"):
        per_start = np.nanmedian(reached["360 deg"], axis=0)
        gap = per_start / upper - 1.0
        reach = {name: float(np.nanmedian(np.nanmedian(times, axis=0))) for name, times in reached.items()}
    return {
        "seeds": sorted(per_seed),
        "per_seed": {str(seed): row for seed, row in per_seed.items()},
        "median_s": float(np.median(rotating)) if rotating.size else None,
        "mean_s": float(np.mean(rotating)) if rotating.size else None,
        "worst_s": float(np.max(rotating)) if rotating.size else None,
        "min_success": float(np.min(success)),
        "seeds_at_095": int(np.sum(success >= 0.95)),
        "faster_than_controller": int(np.sum((success >= 0.95) & (seconds < CONTROLLER_S))),
        "gap_per_start": float(np.nanmedian(gap)),
        "median_start_s": float(np.nanmedian(per_start)),
        "reach_10deg_s": reach["10 deg"],
        "reach_s": reach,
    }


def screen_run(run_dir: Path, upper: np.ndarray) -> dict:
    """Restore every seed's final checkpoint of ``run_dir`` and roll it out from the held-out starts."""
    theta0, theta_dot0 = heldout_starts()
    per_seed, reached = {}, {name: [] for name in LEVELS}
    for seed in record_seeds(run_dir, "swing", None):
        restored = restore(run_dir, task="swing", seed=seed)
        row = restored.checkpoint_row
        per_seed[seed] = {
            "success": float(row["eval_success_rate"]),
            "time": float(row["eval_time_to_rotation"]),
            "steps": int(restored.steps),
        }
        outcome = episode_outcome(_rows_of(restored.env, restored.env_params, restored.pure_policy, theta0, theta_dot0))
        for name, key in LEVELS.items():
            reached[name].append(outcome[key])
    summary = screen_summary(per_seed, {name: np.stack(times) for name, times in reached.items()}, upper)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary["environment"] = (manifest.get("environments") or {}).get("swing")
    return summary


def format_row(name: str, summary: dict) -> str:
    def seconds(value):
        return "-" if value is None else f"{value:.2f}"

    return (
        f"| {name} | {seconds(summary['median_s'])} | {seconds(summary['mean_s'])} | {seconds(summary['worst_s'])} "
        f"| {summary['min_success']:.2f} | {100 * summary['gap_per_start']:+.1f}% | {summary['reach_10deg_s']:.2f} "
        f"| {summary['faster_than_controller']}/{len(summary['seeds'])} |"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("run_dirs", nargs="+", type=Path, help="run directories of swing screens")
    parser.add_argument("--json", type=Path, default=None, help="write the summaries here (run dir -> summary)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    missing = [str(run) for run in args.run_dirs if not (run / "manifest.json").is_file()]
    if missing:
        raise SystemExit(f"{', '.join(missing)}: no manifest.json, expected a run directory of a swing run")
    upper, _ = upper_bounds()
    summaries = {}
    print("| run | median | mean | worst seed | success (min) | gap per start | 10 deg | faster than 13.95 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for run in args.run_dirs:
        summaries[str(run)] = screen_run(run, upper)
        print(format_row(run.name, summaries[str(run)]), flush=True)
    print("\nfirst time at each amplitude |theta| (s; median over starts of the median over seeds):\n")
    print(f"| run | {' | '.join(LEVELS)} |")
    print(f"|---|{'---:|' * len(LEVELS)}")
    for run, summary in summaries.items():
        cells = " | ".join(f"{summary['reach_s'][name]:.2f}" for name in LEVELS)
        print(f"| {Path(run).name} | {cells} |")
    if args.json is not None:
        args.json.write_text(json.dumps(summaries, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.exit(main())
