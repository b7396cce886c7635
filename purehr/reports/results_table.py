"""The headline table of a finished run: held-out metrics of PPO's last checkpoint per task,
mean and two-sided 95% t interval over seeds, next to the baseline and the floor policies
recorded in the manifest (structured controller / oracle; zero action, no-op, random).

It reads only files (``manifest.json`` and each seed's ``checkpoints.csv``), so it works on
a run copied from elsewhere and never compiles anything.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from purehr.reports.stats import UNINFORMATIVE_NOTE, mean_confidence_interval, metric_range
from purehr.run.columns import ANALYSED_CHECKPOINT_COLUMNS
from purehr.run.files import read_csv_columns
from purehr.run.run_dir import CHECKPOINTS_CSV, read_manifest, seed_dir_name

GOAL_METRIC = {
    "swing": ("time_to_rotation", "time to rotation (s)", 2),
    "hrv": ("episode_length", "episode length (steps)", 1),
}
"""Per task: the held-out metric that says how fast a success is, its label and digits."""


def final_checkpoint_metrics(run_dir: Path, task: str, seeds: list[int]) -> dict[str, np.ndarray]:
    """The last checkpoint row of every seed, one array per ``eval_*`` column (seed order)."""
    per_seed = []
    for seed in seeds:
        columns = read_csv_columns(
            run_dir / task / seed_dir_name(seed) / CHECKPOINTS_CSV, ANALYSED_CHECKPOINT_COLUMNS, numeric=True
        )
        per_seed.append(
            {name[len("eval_") :]: column[-1] for name, column in columns.items() if name.startswith("eval_")}
            | {"steps": columns["actual_steps"][-1]}
        )
    return {name: np.asarray([row[name] for row in per_seed], np.float64) for name in per_seed[0]}


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
    per-seed success) and each reference policy's held-out metrics."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    seeds = list(manifest["seeds"])
    lines = [
        "| task | policy | held-out success | speed of a success | held-out return | per seed: success (speed) |",
        "|---|---|---|---|---|---|",
    ]
    for task in manifest["tasks"]:
        metric, label, digits = GOAL_METRIC.get(task, ("return_mean", "return", 2))
        ppo = final_checkpoint_metrics(run_dir, task, seeds)
        steps = int(ppo["steps"][0])
        success = _interval(ppo["success_rate"], "success_rate", 2)
        lines.append(
            f"| {task} | PPO, {len(seeds)} seeds, {steps:,} steps | {success} | "
            f"{label}: {_interval(ppo[metric], metric, digits)} | {_interval(ppo['return_mean'], 'return_mean', 2)} | "
            f"{', '.join(f'{v:.2f} ({p:.{digits}f})' for v, p in zip(ppo['success_rate'], ppo[metric]))} |"
        )
        baseline = manifest.get("baselines", {}).get(task, {})
        references = {baseline.get("name", "baseline"): baseline.get("metrics", {})}
        references.update(baseline.get("floors", {}))
        for name, metrics in references.items():
            lines.append(
                f"| {task} | {name} | {_single(metrics, 'success_rate', 2)} | "
                f"{label}: {_single(metrics, metric, digits)} | {_single(metrics, 'return_mean', 2)} | |"
            )
    if any("*" in line for line in lines):
        lines += ["", UNINFORMATIVE_NOTE]
    return "\n".join(lines) + "\n"


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
        if task == "swing":
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
        elif task == "hrv":
            length = float(np.mean(ppo["episode_length"]))
            oracle = baseline.get("episode_length", math.nan)
            verdicts[task] = {
                "seeds_at_0.95": int(successful.sum()),
                "mean_episode_length": length,
                "oracle_episode_length": oracle,
                "met": bool(successful.all() and length <= 1.2 * oracle),
            }
    return verdicts
