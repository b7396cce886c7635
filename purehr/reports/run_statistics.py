"""A run's robust statistics (issue 67), from its files: per task the IQM and mean of each
held-out metric of the reported checkpoints with stratified bootstrap 95% intervals over seeds,
the held-out return normalised between the task's best floor and its reference policy (0 and 1)
with its performance profile, the aggregate over tasks, and sample-efficiency curves (the IQM of
any checkpoints.csv column over seeds at every checkpoint, with its band). Beside, not instead
of, the mean and t interval of ``results_table``. The recorded runs hold one number per seed and
checkpoint (each the mean of its held-out episodes), so the seed is the one bootstrap level here;
``purehr.reports.bootstrap`` takes ``[seeds, episodes]`` where a caller has episodes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from purehr.reports import bootstrap
from purehr.reports.results_table import GOAL_METRIC, task_family
from purehr.reports.scores import read_scores
from purehr.run.store.run_dir import CHECKPOINTS_CSV, FIGURES, read_checkpoint_rows, read_manifest, seed_dir_name
from purehr.viz.statistics_figures import plot_run_statistics

REPORTED_METRICS = ("success_rate", "return_mean")
"""Held-out metrics every task's row carries, beside its speed metric (``GOAL_METRIC``)."""
CURVE_COLUMNS = ("eval_success_rate", "eval_return_mean")
PROFILE_THRESHOLDS = np.linspace(0.0, 1.2, 61)
"""Normalised-return thresholds of the performance profile: floor (0) to a fifth past the reference (1)."""


def _metrics(task: str) -> tuple[str, ...]:
    speed = (GOAL_METRIC[task_family(task)][0],) if task_family(task) in GOAL_METRIC else ()
    return ("success_rate", *speed, "return_mean")


def checkpoint_curve(run_dir: str | Path, task: str, column: str, statistic: str = "iqm") -> dict[str, Any]:
    """The sample-efficiency curve of one checkpoints.csv ``column``: ``{steps, value, low, high}``
    (each ``[checkpoints]``) over the checkpoints every seed logged (target steps)."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    rows = [read_checkpoint_rows(run_dir / task / seed_dir_name(seed) / CHECKPOINTS_CSV) for seed in manifest["seeds"]]
    if column not in rows[0][0]:
        raise ValueError(f"{task}: checkpoints.csv has no column {column!r} (it has {', '.join(rows[0][0])})")
    shared = min(len(seed_rows) for seed_rows in rows)
    values = np.array([[float(row[column]) for row in seed_rows[:shared]] for seed_rows in rows])
    estimate = bootstrap.curve(values, statistic)
    return {"steps": [int(row["target_steps"]) for row in rows[0][:shared]], **estimate}


def run_statistics(run_dir: str | Path, reps: int = bootstrap.REPS, curves: bool = True) -> dict[str, Any]:
    """``{tasks: {task: {metrics: {name: {iqm, mean}} (every held-out column of the reported
    checkpoints), normalised_return: {iqm, mean, profile},
    curves: {column: checkpoint_curve}}}, aggregate: {tasks, iqm, mean} | None}`` (each estimate
    ``bootstrap.Estimate.to_dict``; the profile ``bootstrap.performance_profile`` as lists)."""
    scores = read_scores(run_dir)
    result: dict[str, Any] = {"tasks": {}, "aggregate": None}
    normalised_all = {}
    for task, task_scores in scores.tasks.items():
        entry: dict[str, Any] = {"metrics": {}, "normalised_return": None, "curves": {}}
        shown = _metrics(task)  # first, in the table's order; then every other held-out column (the JSON)
        for name in [*shown, *(other for other in task_scores.values if other not in shown and other != "episodes")]:
            values = task_scores.values.get(name)
            if values is None or not np.isfinite(values).any():
                continue
            entry["metrics"][name] = {
                statistic: bootstrap.point_estimate(values, statistic, reps).to_dict() for statistic in ("iqm", "mean")
            }
        if math.isfinite(task_scores.floor_return) and math.isfinite(task_scores.reference_return):
            normalised = bootstrap.normalised(
                task_scores.values["return_mean"], task_scores.floor_return, task_scores.reference_return
            )
            normalised_all[task] = normalised
            profile = bootstrap.performance_profile(normalised, PROFILE_THRESHOLDS, reps)
            entry["normalised_return"] = {
                "floor": task_scores.floor_return,
                "reference": task_scores.reference_return,
                "iqm": bootstrap.point_estimate(normalised, "iqm", reps).to_dict(),
                "mean": bootstrap.point_estimate(normalised, "mean", reps).to_dict(),
                "profile": {key: np.asarray(value).tolist() for key, value in profile.items()},
            }
        for column in CURVE_COLUMNS if curves else ():
            curve = checkpoint_curve(run_dir, task, column)
            entry["curves"][column] = {key: np.asarray(value).tolist() for key, value in curve.items()}
        result["tasks"][task] = entry
    if normalised_all:
        samples = list(normalised_all.values())
        result["aggregate"] = {
            "tasks": list(normalised_all),
            "iqm": bootstrap.point_estimate(samples, "iqm", reps).to_dict(),
            "mean": bootstrap.point_estimate(samples, "mean", reps).to_dict(),
        }
    return result


def _interval(estimate: dict, digits: int) -> str:
    if not math.isfinite(estimate["value"]):
        return "-"
    if not math.isfinite(estimate["low"]):
        return f"{estimate['value']:.{digits}f} (one seed)"
    return f"{estimate['value']:.{digits}f} [{estimate['low']:.{digits}f}, {estimate['high']:.{digits}f}]"


def robust_table(run_dir: str | Path, statistics: dict[str, Any] | None = None) -> str:
    """A Markdown table beside the results table: per task and held-out metric the IQM and the
    mean over seeds, each with its 95% stratified bootstrap interval, then the normalised return
    and the aggregate over tasks."""
    statistics = run_statistics(run_dir, curves=False) if statistics is None else statistics
    digits = {"success_rate": 2, "return_mean": 2, "time_to_rotation": 2, "episode_length": 2}
    lines = [
        "| task | held-out metric | IQM [95% bootstrap CI] | mean [95% bootstrap CI] |",
        "|---|---|---|---|",
    ]
    for task, entry in statistics["tasks"].items():
        for name, estimates in ((n, e) for n, e in entry["metrics"].items() if n in _metrics(task)):
            places = digits.get(name, 3)
            lines.append(
                f"| {task} | {name} | {_interval(estimates['iqm'], places)} | {_interval(estimates['mean'], places)} |"
            )
        normalised = entry["normalised_return"]
        if normalised is not None:
            lines.append(
                f"| {task} | normalised return (0 = best floor, 1 = reference) | {_interval(normalised['iqm'], 3)} | "
                f"{_interval(normalised['mean'], 3)} |"
            )
    aggregate = statistics["aggregate"]
    if aggregate is not None and len(aggregate["tasks"]) > 1:
        lines.append(
            f"| all ({', '.join(aggregate['tasks'])}) | normalised return | {_interval(aggregate['iqm'], 3)} | "
            f"{_interval(aggregate['mean'], 3)} |"
        )
    note = (
        "IQM: the mean of the middle 50% of seeds; intervals: percentile bootstrap over seeds "
        f"({bootstrap.REPS} replicates, stratified by task), docs/analysis.md"
    )
    return "\n".join([*lines, "", note]) + "\n"


def draw_statistics(run_dir: str | Path) -> list[Path]:
    """``figures/statistics.{pdf,png}``: the curves and profiles of ``run_statistics``
    (``purehr.viz.statistics_figures``); none for a PBT run, whose members are not independent."""
    run_dir = Path(run_dir)
    if read_manifest(run_dir).get("pbt") is not None:
        return []
    (run_dir / FIGURES).mkdir(exist_ok=True)
    return plot_run_statistics(run_statistics(run_dir), run_dir / FIGURES)
