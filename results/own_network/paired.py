"""Paired comparison of two networks over the same seeds, from the runs' directories: per seed
and measure (held-out return at the last checkpoint, its mean over the checkpoints after step 0,
the training return over the last 10 updates) A minus B, the mean difference, its paired
bootstrap 95% interval (scipy.stats.bootstrap, percentile, 10,000 resamples, seed 0) and the
two-sided Wilcoxon signed-rank p (scipy.stats.wilcoxon). Seeds are pooled over the runs given
for each side (e.g. seeds 0-4 in one run, 5-9 in another) and paired by seed.

    python results/own_network/paired.py --a CNN_RUN [CNN_RUN ...] --b MLP_RUN [MLP_RUN ...]
"""

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats
from table import rows

TRAIN_UPDATES = 10
RESAMPLES = 10_000
SEED = 0
MEASURES = ("held-out, last checkpoint", "held-out, over checkpoints", "training return, last 10 updates")


def seed_measures(run: Path, task: str, seed: int) -> tuple[list[float], tuple[float, float, float]]:
    """The held-out curve ``[checkpoints]`` and the three measures of one seed."""
    curve = [float(r["eval_return_mean"]) for r in rows(run, task, seed)]
    with open(run / task / f"seed_{seed}" / "updates.csv") as file:
        updates = [float(r["mean_episode_return"]) for r in csv.DictReader(file)]
    if len(curve) < 2 or len(updates) < TRAIN_UPDATES:
        raise ValueError(
            f"{run} seed {seed}: {len(curve)} checkpoints and {len(updates)} updates; "
            f"expected at least 2 and {TRAIN_UPDATES} (an unfinished run?)"
        )
    return curve, (curve[-1], float(np.mean(curve[1:])), float(np.mean(updates[-TRAIN_UPDATES:])))


def side(runs: list[str]) -> tuple[str, dict[int, tuple[list[float], tuple[float, float, float]]]]:
    """The task and ``{seed: (curve, measures)}`` pooled over ``runs``."""
    tasks, per_seed = set(), {}
    for run in map(Path, runs):
        manifest = json.loads((run / "manifest.json").read_text())
        (task,) = manifest["tasks"]
        tasks.add(task)
        for seed in manifest["seeds"]:
            if seed in per_seed:
                raise ValueError(f"seed {seed} is in more than one run of {runs}; expected each seed once")
            per_seed[seed] = seed_measures(run, task, seed)
    if len(tasks) != 1:
        raise ValueError(f"runs {runs} hold tasks {sorted(tasks)}; expected one task")
    return tasks.pop(), per_seed


def paired(a: np.ndarray, b: np.ndarray) -> dict:
    """Mean of ``a - b`` ``[seeds]``, its paired percentile bootstrap interval and the Wilcoxon p."""
    difference = a - b
    if np.ptp(difference) == 0:  # every resample is the data
        low = high = float(difference[0])
    else:
        interval = stats.bootstrap(
            (a, b),
            lambda x, y, axis=-1: np.mean(x - y, axis=axis),
            paired=True,
            vectorized=True,
            n_resamples=RESAMPLES,
            confidence_level=0.95,
            method="percentile",
            rng=np.random.default_rng(SEED),
        ).confidence_interval
        low, high = float(interval.low), float(interval.high)
    wilcoxon = float(stats.wilcoxon(difference).pvalue) if np.any(difference != 0) else float("nan")
    return {
        "mean_difference": float(difference.mean()),
        "low": low,
        "high": high,
        "wilcoxon_p": wilcoxon,
        "ahead_tied_behind": (int((difference > 0).sum()), int((difference == 0).sum()), int((difference < 0).sum())),
        "per_seed": difference.tolist(),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", nargs="+", required=True, help="run directories of network A (the minuend)")
    parser.add_argument("--b", nargs="+", required=True, help="run directories of network B")
    args = parser.parse_args(argv)
    (task_a, a), (task_b, b) = side(args.a), side(args.b)
    if task_a != task_b or sorted(a) != sorted(b):
        raise ValueError(f"A has {task_a} seeds {sorted(a)}, B has {task_b} seeds {sorted(b)}; expected the same")
    seeds = sorted(a)
    print(f"{task_a}, seeds {seeds}, A = {args.a}, B = {args.b}")
    for name, group in (("A", a), ("B", b)):
        for seed in seeds:
            curve, measures = group[seed]
            held_out = "/".join(f"{v:g}" for v in curve)
            print(f"  {name} seed {seed}: {held_out}  over {measures[1]:.2f}  train {measures[2]:.2f}")
        means = np.mean([group[s][1] for s in seeds], axis=0)
        curve_means = np.mean([group[s][0] for s in seeds], axis=0)
        print(
            f"  {name} mean: last {means[0]:.2f}  over {means[1]:.2f}  train {means[2]:.2f}  per checkpoint "
            f"{' / '.join(f'{v:.2f}' for v in curve_means)}"
        )
    print("| measure | A - B per seed | ahead / tied / behind | mean difference | paired bootstrap 95% | Wilcoxon p |")
    print("|---|---|---|---:|---|---:|")
    for index, measure in enumerate(MEASURES):
        result = paired(np.array([a[s][1][index] for s in seeds]), np.array([b[s][1][index] for s in seeds]))
        per_seed = ", ".join(f"{d:+.2f}" if d else "0" for d in result["per_seed"])
        counts = " / ".join(map(str, result["ahead_tied_behind"]))
        interval = f"[{result['low']:+.2f}, {result['high']:+.2f}]"
        print(
            f"| {measure} | {per_seed} | {counts} | {result['mean_difference']:+.2f} | {interval} | "
            f"{result['wilcoxon_p']:.3g} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
