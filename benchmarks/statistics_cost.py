"""What a run's robust statistics cost (issue 67): 20 seeds x 100 held-out episodes per task, two
tasks x three metrics (success, speed, return) each with its IQM and mean and their two-level
bootstrap intervals, each task's performance profile (61 thresholds) and the aggregate IQM; then a
comparison of two such runs (IQM difference and probability of improvement per task and metric).
Prints wall and CPU seconds of each, per repeat (the first includes SciPy's imports).

    python benchmarks/statistics_cost.py --repeats 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from purehr.cli.arguments import HelpFormatter, positive_int
from purehr.reports import bootstrap

METRICS = ("success_rate", "speed", "return_mean")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed repeats")
    parser.add_argument("--seeds", type=positive_int, default=20, help="seeds per run")
    parser.add_argument("--episodes", type=positive_int, default=100, help="held-out episodes per seed")
    return parser


def run_statistics(tasks: dict[str, dict[str, np.ndarray]]) -> None:
    for metrics in tasks.values():
        for values in metrics.values():
            bootstrap.point_estimate(values, "iqm")
            bootstrap.point_estimate(values, "mean")
        bootstrap.performance_profile(metrics["return_mean"], np.linspace(-2.0, 2.0, 61))
    bootstrap.point_estimate([metrics["return_mean"] for metrics in tasks.values()], "iqm")


def comparison(tasks, other) -> None:
    for name, metrics in tasks.items():
        for metric, values in metrics.items():
            bootstrap.difference(values, other[name][metric])
            bootstrap.improvement_probability(values, other[name][metric])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rng = np.random.default_rng(0)
    shape = (args.seeds, args.episodes)
    tasks = {task: {m: rng.normal(0.0, 1.0, shape) for m in METRICS} for task in ("swing", "hrv")}
    other = {task: {m: rng.normal(0.1, 1.0, shape) for m in METRICS} for task in ("swing", "hrv")}
    for repeat in range(args.repeats):
        for label, work in (
            ("run statistics", lambda: run_statistics(tasks)),
            ("comparison", lambda: comparison(tasks, other)),
        ):
            wall, cpu = time.perf_counter(), time.process_time()
            work()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"repeat {repeat}: {label}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
