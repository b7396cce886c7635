"""The headline table of a finished run: held-out metrics of the trained policy's reported
checkpoint (by default its last) per task, mean and two-sided 95% t interval over seeds, next
to the baseline and the floor policies recorded in the manifest (structured controller /
oracle; zero action, no-op, random).

It reads only files (``manifest.json`` and each seed's ``checkpoints.csv``), so it works on
a run copied from elsewhere and never compiles anything.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from purehr.algorithms.registry import split_entry
from purehr.reports.stats import UNINFORMATIVE_NOTE, mean_confidence_interval, metric_range
from purehr.run.store.columns import ANALYSED_CHECKPOINT_COLUMNS
from purehr.run.store.files import read_csv_columns
from purehr.run.store.record import recorded_algorithm
from purehr.run.store.reported import missing_reported_choice, reported_rows
from purehr.run.store.run_dir import CHECKPOINTS_CSV, describe_divergences, read_manifest, seed_dir_name

GOAL_METRIC = {
    "swing": ("time_to_rotation", "time to rotation (s)", 2),
    "hrv": ("episode_length", "episode length (steps)", 1),
}
"""Per task: the held-out metric that says how fast a success is, its label and digits."""
GENERIC_GOAL = ("return_mean", "held-out return", 2)
"""The goal metric of every other task (a suite's, a user's): the held-out return, higher is
better, judged against the best floor (and the reference policy where the task has one)."""
EPISODE_LENGTH = ("episode_length", "episode length (steps)", 1)
"""The table's second column for a task whose goal metric is its return (shown beside it)."""
HEADER = "| task | policy | held-out success | speed of a success | held-out return | per seed: success (speed) |"
GENERIC_HEADER = (
    "| task | policy | held-out success | speed of a success, or episode length | held-out return | "
    "per seed: success (speed), or return |"
)
"""The header of a run with a task outside ``GOAL_METRIC`` (swing and hrv alone keep ``HEADER``)."""


def counted(count: int, noun: str) -> str:
    """``1 seed``, ``2 seeds``: a count with its noun in the right number."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def task_family(entry: str) -> str:
    """The task a run entry trains (``swing@sac`` -> ``swing``): its goal is the task's, whatever
    the algorithm."""
    return split_entry(entry)[0]


def algorithm_label(manifest: dict, entry: str) -> str:
    """The algorithm that trained ``entry``, as the tables name it (``PPO``)."""
    return recorded_algorithm(manifest, entry).upper()


def goal_metric(task: str) -> tuple[str, str, int]:
    """(metric, label, digits) of the number a task is judged by."""
    return GOAL_METRIC.get(task_family(task), GENERIC_GOAL)


def _column_metric(task: str, recorded) -> tuple[str, str, int]:
    """The table's second column: the goal metric; for a variant of swing or hrv (swing-angles,
    hrv-flicker: judged on the return, but evaluated as its family is) its family's speed, the
    first of ``GOAL_METRIC``'s that the run ``recorded``; else the episode length (the next
    column already holds the return)."""
    if task_family(task) in GOAL_METRIC:
        return GOAL_METRIC[task_family(task)]
    return next((speed for speed in GOAL_METRIC.values() if speed[0] in recorded), EPISODE_LENGTH)


def final_checkpoint_metrics(run_dir: Path, task: str, seeds: list[int]) -> dict[str, np.ndarray]:
    """The reported checkpoint of every seed, one array per ``eval_*`` column (seed order): its
    last checkpoint's row, or the reported.csv of a run that chose one on validation episodes
    (``ProtocolSettings.report_candidates``, ``purehr.run.choose_reported``)."""
    rows = reported_rows(run_dir, task, seeds) or [_last_checkpoint_row(run_dir, task, seed) for seed in seeds]
    per_seed = [
        {name[len("eval_") :]: value for name, value in row.items() if name.startswith("eval_")}
        | {"steps": row["actual_steps"]}
        for row in rows
    ]
    return {name: np.asarray([row[name] for row in per_seed], np.float64) for name in per_seed[0]}


def _last_checkpoint_row(run_dir: Path, task: str, seed: int) -> dict[str, float]:
    """A seed's last checkpoints.csv row, as numbers (its columns checked as the analysis reads them)."""
    path = run_dir / task / seed_dir_name(seed) / CHECKPOINTS_CSV
    columns = read_csv_columns(path, ANALYSED_CHECKPOINT_COLUMNS, numeric=True)
    return {name: column[-1] for name, column in columns.items()}


def _interval(values: np.ndarray, metric: str, digits: int) -> str:
    """``mean [low, high]`` clipped to the metric's range, ``*`` when it says little (few seeds)."""
    stats = mean_confidence_interval(values, bounds=metric_range(metric))
    if not math.isfinite(stats["mean"]):
        return "-"
    text = f"{stats['mean']:.{digits}f}"
    if math.isfinite(stats["ci_low"]):
        text += f" [{stats['ci_low']:.{digits}f}, {stats['ci_high']:.{digits}f}]"
    return text + ("*" if stats["uninformative"] else "")


def _single(metrics: dict[str, Any], name: str, digits: int) -> str:
    value = metrics.get(name, math.nan)
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def results_table(run_dir: str | Path) -> str:
    """A Markdown table, one block of rows per task: PPO (mean [95% t interval] over seeds,
    per-seed success) and each reference policy's held-out metrics: the task's reference
    (where it has one) and its floors. ``-`` marks a value that is undefined (no successful
    episode; no success at all where the environment defines none)."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    seeds = list(manifest["seeds"])
    generic = [task for task in manifest["tasks"] if task_family(task) not in GOAL_METRIC]
    lines = [GENERIC_HEADER if generic else HEADER, "|---|---|---|---|---|---|"]
    no_success, no_reference = [], []
    for task in manifest["tasks"]:
        ppo = final_checkpoint_metrics(run_dir, task, seeds)
        if not np.isfinite(ppo["success_rate"]).any():
            no_success.append(task)
        population = manifest.get("pbt") is not None
        lines.append(_ppo_row(task, ppo, len(seeds), population, algorithm_label(manifest, task)))
        entry = (manifest.get("baselines") or {}).get(task) or {}
        references = {} if entry.get("metrics") is None else {entry.get("name") or "baseline": entry["metrics"]}
        if not references:
            no_reference.append(task)
        references.update(entry.get("floors") or {})
        metric, label, digits = _column_metric(task, ppo)
        for name, metrics in references.items():
            metrics = metrics or {}
            lines.append(
                f"| {task} | {name} | {_single(metrics, 'success_rate', 2)} | "
                f"{label}: {_single(metrics, metric, digits)} | {_single(metrics, 'return_mean', 2)} | |"
            )
    notes = []
    if no_reference:
        trained = " and ".join(dict.fromkeys(algorithm_label(manifest, task) for task in no_reference))
        notes.append(f"no reference policy for {', '.join(no_reference)}: {trained} against the floors only")
    if no_success:
        notes.append(f"success -: {', '.join(no_success)} defines no success (success_rate NaN); judged on the return")
    if manifest.get("pbt") is not None:
        notes.append(
            "PBT: the members of a population copy each other's weights, so they are not independent seeds: "
            "their mean and range, no confidence interval"
        )
    if any("*" in line for line in lines):
        notes.append(UNINFORMATIVE_NOTE)
    for task in manifest["tasks"]:  # a choice expected but not made: said, not passed off as the reported one
        missing = missing_reported_choice(run_dir, task, seeds)
        if missing is not None:
            notes.append(f"{task}: its rows are each seed's last checkpoint, not the reported one: {missing}")
    if manifest.get("diverged"):  # a PBT member replaced after it diverged ends healthy: only this says so
        notes.append(
            "diverged (a loss or parameter became NaN or infinite; not a finished result): "
            + describe_divergences(manifest["diverged"])
        )
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def _ppo_row(
    task: str, ppo: dict[str, np.ndarray], num_seeds: int, population: bool = False, algorithm: str = "PPO"
) -> str:
    """The trained policy's row (the entry's ``algorithm``): mean [t interval] over independent
    seeds; a PBT population's members (which copy each other's weights) get their mean and range
    instead."""
    metric, label, digits = _column_metric(task, ppo)
    low, high = int(ppo["steps"].min()), int(ppo["steps"].max())  # reported checkpoints may differ by seed
    steps = f"{high:,} steps" if low == high else f"checkpoints at {low:,} to {high:,} steps"
    summary = _members_range if population else _interval
    success = summary(ppo["success_rate"], "success_rate", 2)
    if np.isfinite(ppo["success_rate"]).any():
        pairs = zip(ppo["success_rate"], ppo[metric])
        per_seed = ", ".join(f"{_number(success, 2)} ({_number(speed, digits)})" for success, speed in pairs)
    else:
        per_seed = "returns " + ", ".join(_number(value, 2) for value in ppo["return_mean"])
    policy = (
        f"PBT population of {counted(num_seeds, 'member')}"
        if population
        else f"{algorithm}, {counted(num_seeds, 'seed')}"
    )
    return (
        f"| {task} | {policy}, {steps} | {success} | "
        f"{label}: {summary(ppo[metric], metric, digits)} | {summary(ppo['return_mean'], 'return_mean', 2)} | "
        f"{per_seed} |"
    )


def _members_range(values: np.ndarray, metric: str, digits: int) -> str:
    """``mean (members low to high)`` of a PBT population: no interval over members that are not independent."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return "-"
    return f"{finite.mean():.{digits}f} (members {finite.min():.{digits}f} to {finite.max():.{digits}f})"


def _number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "-"


def goals_met(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The protocol's goals per task (docs/protocol.md), measured on the last checkpoints:
    swing >= 0.95 success on at least 4 of 5 seeds and a median time to rotation at or below
    the structured controller's; hrv >= 0.95 on every seed with mean episode length <= 1.2x
    the oracle's."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    seeds = list(manifest["seeds"])
    verdicts = {}
    for task in manifest["tasks"]:
        ppo = final_checkpoint_metrics(run_dir, task, seeds)
        baseline = manifest.get("baselines", {}).get(task, {}).get("metrics", {})
        successful = ppo["success_rate"] >= 0.95
        if task_family(task) == "swing":
            median_time = (
                float(np.nanmedian(ppo["time_to_rotation"]))
                if np.any(np.isfinite(ppo["time_to_rotation"]))
                else math.nan
            )
            controller = baseline.get("time_to_rotation", math.nan)
            verdicts[task] = {
                "seeds_at_0.95": int(successful.sum()),
                "median_time_to_rotation": median_time,
                "controller_time_to_rotation": controller,
                "met": bool(successful.sum() >= math.ceil(0.8 * len(seeds)) and median_time <= controller),
            }
        elif task_family(task) == "hrv":
            length = float(np.mean(ppo["episode_length"]))
            oracle = baseline.get("episode_length", math.nan)
            verdicts[task] = {
                "seeds_at_0.95": int(successful.sum()),
                "mean_episode_length": length,
                "oracle_episode_length": oracle,
                "met": bool(successful.all() and length <= 1.2 * oracle),
            }
    return verdicts


def floor_comparisons(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """For each task without a protocol goal (not in ``GOAL_METRIC``: a suite's or a user's), PPO's
    held-out return on the last checkpoints against the best floor recorded in the manifest
    (the highest ``return_mean``) and the reference policy where the task has one:
    ``{metric, ppo_mean, per_seed, best_floor, best_floor_value, seeds_above_best_floor,
    num_seeds, reference, reference_value}`` (``best_floor`` None when no floor is recorded)."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    seeds = list(manifest["seeds"])
    metric = GENERIC_GOAL[0]
    comparisons = {}
    for task in manifest["tasks"]:
        if task_family(task) in GOAL_METRIC:
            continue
        per_seed = final_checkpoint_metrics(run_dir, task, seeds)[metric]
        entry = (manifest.get("baselines") or {}).get(task) or {}
        floors = {
            name: float(metrics[metric])
            for name, metrics in (entry.get("floors") or {}).items()
            if isinstance(metrics, dict)
            and isinstance(metrics.get(metric), (int, float))
            and math.isfinite(metrics[metric])
        }
        best = max(floors, key=floors.get) if floors else None
        reference = entry.get("metrics") if isinstance(entry.get("metrics"), dict) else None
        comparisons[task] = {
            "metric": metric,
            "ppo_mean": float(np.nanmean(per_seed)) if np.isfinite(per_seed).any() else math.nan,
            "algorithm": algorithm_label(manifest, task),
            "per_seed": [float(value) for value in per_seed],
            "best_floor": best,
            "best_floor_value": floors[best] if best is not None else math.nan,
            "seeds_above_best_floor": int(np.sum(per_seed > floors[best])) if best is not None else 0,
            "num_seeds": len(seeds),
            "reference": (entry.get("name") or "baseline") if reference is not None else None,
            "reference_value": float(reference.get(metric, math.nan)) if reference is not None else math.nan,
        }
    return comparisons
