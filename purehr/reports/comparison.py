"""Two or more recorded runs compared on the tasks they share (``purehr compare``): per task and
metric the IQM of each, the difference of IQMs and the probability of improvement with their
stratified bootstrap intervals, the performance profiles side by side, and a one-line verdict;
the aggregate over tasks on the return normalised between each task's floor and reference
policy. Runs whose held-out episodes differ are refused, naming the difference."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from purehr.reports import bootstrap
from purehr.reports.scores import COMPARED_METRICS, LOWER_IS_BETTER, RunScores, episode_differences, metric_name
from purehr.reports.stats import seeds_needed

NO_DIFFERENCE = "no detectable difference"
PROFILE_POINTS = 5


class ComparisonRefused(ValueError):
    """The runs cannot be compared: no shared task, or held-out episodes that differ (or that
    cannot be checked, unless the caller vouches for them)."""


def shared_tasks(runs: list[RunScores]) -> list[str]:
    """The tasks every run has, in the first run's order."""
    return [task for task in runs[0].tasks if all(task in run.tasks for run in runs[1:])]


def check_episodes(runs: list[RunScores], tasks: list[str], allow_unchecked: bool = False) -> list[str]:
    """Refuses (``ComparisonRefused``) where two runs' held-out episodes differ, naming each
    difference; where they cannot be checked, refuses too unless ``allow_unchecked``, and returns
    what went unchecked (said beside the results)."""
    differ, unchecked = [], []
    for run in runs[1:]:
        for task in tasks:
            known, unknown = episode_differences(runs[0], run, task)
            differ += [f"{task}: {reason}" for reason in known]
            unchecked += [f"{task}: {reason}" for reason in unknown]
    if differ:
        raise ComparisonRefused(
            "the runs' held-out episodes differ, so their scores do not compare: " + "; ".join(differ)
        )
    if unchecked and not allow_unchecked:
        raise ComparisonRefused(
            "cannot check that the runs share their held-out episodes ("
            + "; ".join(unchecked)
            + "); give --unchecked-episodes if you know they do"
        )
    return unchecked


def _values(run: RunScores, task: str, metric: str) -> np.ndarray | None:
    name = metric_name(task, metric)
    values = run.tasks[task].values.get(name) if name is not None else None
    return None if values is None or not np.isfinite(values).any() else values


def compare_pair(a: np.ndarray, b: np.ndarray, lower_is_better: bool, reps: int = bootstrap.REPS) -> dict[str, Any]:
    """IQMs, their difference (a - b) and P(a better than b), each with its interval, and which is
    better: ``a``, ``b`` or None (the difference's interval covers zero)."""
    sign = -1.0 if lower_is_better else 1.0
    diff = bootstrap.difference(a, b, reps=reps)
    better = None
    if math.isfinite(diff.low) and not diff.covers(0.0):
        better = "a" if sign * diff.value > 0 else "b"
    finite_a, finite_b = a[np.isfinite(a)], b[np.isfinite(b)]
    spread = (
        math.sqrt((np.var(finite_a, ddof=1) + np.var(finite_b, ddof=1)) / 2) if min(a.size, b.size) > 1 else math.nan
    )
    return {
        "mean_difference": float(finite_a.mean() - finite_b.mean()),
        "seed_sd": spread,
        "seeds_for_80_percent_power": seeds_needed(float(finite_a.mean() - finite_b.mean()), spread),
        "iqm_a": bootstrap.point_estimate(a, reps=reps).to_dict(),
        "iqm_b": bootstrap.point_estimate(b, reps=reps).to_dict(),
        "difference": diff.to_dict(),
        "improvement_probability": bootstrap.improvement_probability(sign * a, sign * b, reps=reps).to_dict(),
        "better": better,
        "lower_is_better": lower_is_better,
    }


def _normalised_returns(runs: list[RunScores], task: str) -> list[np.ndarray] | None:
    """Each run's held-out return on ``task`` normalised between the floor and reference the
    runs record (the first that has both; the episodes are the same, so are they)."""
    normalisers = [
        (t.floor_return, t.reference_return)
        for t in (run.tasks[task] for run in runs)
        if math.isfinite(t.floor_return) and math.isfinite(t.reference_return)
    ]
    returns = [run.tasks[task].values.get("return_mean") for run in runs]
    if not normalisers or any(r is None or not np.isfinite(r).any() for r in returns):
        return None
    return [bootstrap.normalised(r, *normalisers[0]) for r in returns]


def compare_runs(
    runs: list[RunScores], metrics=COMPARED_METRICS, allow_unchecked: bool = False, reps: int = bootstrap.REPS
) -> dict[str, Any]:
    """The first run against each other: ``{runs, tasks, unchecked, pairs: [{a, b, tasks: {task:
    {metric: compare_pair}}, aggregate, profiles}]}``."""
    if len(runs) < 2:
        raise ComparisonRefused(f"compare needs two or more runs, got {len(runs)}")
    labels = [run.label for run in runs]
    if len(set(labels)) != len(labels):
        raise ComparisonRefused(f"each run needs its own label, got {labels}")
    tasks = shared_tasks(runs)
    if not tasks:
        raise ComparisonRefused(
            "the runs share no task: " + "; ".join(f"{run.label}: {', '.join(run.tasks)}" for run in runs)
        )
    unchecked = check_episodes(runs, tasks, allow_unchecked)
    pairs = []
    for other in runs[1:]:
        pair = {"a": runs[0].label, "b": other.label, "tasks": {}, "aggregate": None, "profiles": {}}
        for task in tasks:
            pair["tasks"][task] = {}
            for metric in metrics:
                a, b = _values(runs[0], task, metric), _values(other, task, metric)
                if a is not None and b is not None:
                    name = metric_name(task, metric)
                    pair["tasks"][task][name] = compare_pair(a, b, name in LOWER_IS_BETTER, reps)
        normalised = {task: _normalised_returns([runs[0], other], task) for task in tasks}
        usable = {task: pair_values for task, pair_values in normalised.items() if pair_values is not None}
        if usable:
            a_all, b_all = [v[0] for v in usable.values()], [v[1] for v in usable.values()]
            pair["aggregate"] = {
                "tasks": list(usable),
                "iqm_a": bootstrap.point_estimate(a_all, reps=reps).to_dict(),
                "iqm_b": bootstrap.point_estimate(b_all, reps=reps).to_dict(),
                "difference": bootstrap.difference(a_all, b_all, reps=reps).to_dict(),
                "improvement_probability": bootstrap.improvement_probability(a_all, b_all, reps=reps).to_dict(),
            }
            diff = pair["aggregate"]["difference"]
            covered = not math.isfinite(diff["low"]) or diff["low"] <= 0.0 <= diff["high"]
            pair["aggregate"]["better"] = None if covered else ("a" if diff["value"] > 0 else "b")
            everything = np.concatenate(a_all + b_all)
            thresholds = np.linspace(everything.min(), everything.max(), PROFILE_POINTS)
            pair["profiles"] = {
                label: {
                    key: np.asarray(value).tolist()
                    for key, value in bootstrap.performance_profile(values, thresholds, reps=reps).items()
                }
                for label, values in ((runs[0].label, a_all), (other.label, b_all))
            }
        pairs.append(pair)
    return {
        "runs": [{"label": r.label, "source": r.source} for r in runs],
        "tasks": tasks,
        "unchecked": unchecked,
        "pairs": pairs,
    }


def verdict(a: str, b: str, result: dict[str, Any], what: str) -> str:
    """One line: which run is better on ``what`` and by how much, or "no detectable difference"."""
    diff, chance = result["difference"], result["improvement_probability"]
    interval = f"IQM difference {_number(diff['value'])} [{_number(diff['low'])}, {_number(diff['high'])}]"
    odds = f"P({a} better) {chance['value']:.2f} [{_number(chance['low'], 2)}, {_number(chance['high'], 2)}]"
    needed = result.get("seeds_for_80_percent_power")
    if result.get("mean_difference") and result.get("seed_sd"):  # both nonzero: a difference to detect
        odds += "; a t test would need " + (
            f"{needed} seeds a run to detect this mean difference 80% of the time"
            if needed is not None
            else "more seeds than any run has to detect this mean difference"
        )
    if result["better"] is None:
        return f"{what}: {NO_DIFFERENCE} ({interval}; {odds})"
    winner = a if result["better"] == "a" else b
    return f"{what}: {winner} better ({interval}; {odds})"


def _number(value: float | None, decimals: int | None = None) -> str:
    """Three significant digits, or ``decimals`` fixed ones; ``-`` for no value."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.3g}" if decimals is None else f"{value:.{decimals}f}"


def _estimate(estimate: dict) -> str:
    if not math.isfinite(estimate["low"]):
        return f"{_number(estimate['value'])} (one seed: no interval)"
    return f"{_number(estimate['value'])} [{_number(estimate['low'])}, {_number(estimate['high'])}]"


def comparison_text(comparison: dict[str, Any]) -> str:
    """The comparison as Markdown: per pair a table (task, metric, each run's IQM [95% CI], the
    difference, P(improvement)), the verdicts, and the profiles of the normalised return."""
    lines = []
    for pair in comparison["pairs"]:
        a, b = pair["a"], pair["b"]
        lines += [
            f"## {a} against {b}",
            "",
            f"| task | metric | {a} IQM | {b} IQM | difference ({a} - {b}) | P({a} better) |",
            "|---|---|---|---|---|---|",
        ]
        verdicts = []
        for task, metrics in pair["tasks"].items():
            for metric, result in metrics.items():
                direction = " (lower is better)" if result["lower_is_better"] else ""
                lines.append(
                    f"| {task} | {metric}{direction} | {_estimate(result['iqm_a'])} | {_estimate(result['iqm_b'])} | "
                    f"{_estimate(result['difference'])} | {_estimate(result['improvement_probability'])} |"
                )
                verdicts.append(verdict(a, b, result, f"{task} {metric}"))
        aggregate = pair["aggregate"]
        if aggregate is not None:
            what = f"aggregate normalised return ({', '.join(aggregate['tasks'])}; 0 = best floor, 1 = reference)"
            lines.append(
                f"| {', '.join(aggregate['tasks'])} | normalised return | {_estimate(aggregate['iqm_a'])} | "
                f"{_estimate(aggregate['iqm_b'])} | {_estimate(aggregate['difference'])} | "
                f"{_estimate(aggregate['improvement_probability'])} |"
            )
            verdicts.append(verdict(a, b, aggregate, what))
        else:
            verdicts.append("aggregate: not computed (no floor and reference return recorded for a shared task)")
        lines += ["", *(f"- {line}" for line in verdicts)]
        if pair["profiles"]:
            lines += [
                "",
                "performance profile of the normalised return (fraction of seeds above each threshold, 95% band):",
                "",
            ]
            thresholds = next(iter(pair["profiles"].values()))["thresholds"]
            lines.append("| run | " + " | ".join(f"> {t:.4g}" for t in thresholds) + " |")
            lines.append("|---|" + "---|" * len(thresholds))
            for label, profile in pair["profiles"].items():
                cells = [
                    f"{f:.2f} [{_number(lo, 2)}, {_number(hi, 2)}]"
                    for f, lo, hi in zip(profile["fraction"], profile["low"], profile["high"])
                ]
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    if comparison["unchecked"]:
        lines.append("held-out episodes not checked (--unchecked-episodes): " + "; ".join(comparison["unchecked"]))
    lines.append(
        "IQM: mean of the middle 50% of seeds; intervals: 95% percentile bootstrap over seeds, "
        f"{bootstrap.REPS} replicates (docs/analysis.md)"
    )
    return "\n".join(lines) + "\n"
