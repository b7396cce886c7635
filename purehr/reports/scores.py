"""The held-out scores of a recorded run, per task and seed, and what defines its held-out
episodes: what the robust statistics and ``purehr compare`` read. Two sources: a run directory
(each seed's reported checkpoint, ``results_table.final_checkpoint_metrics``; its floors and
reference policy from the manifest) and a study's JSON record (``studies/scripts/
robustness_study.py``'s ``per_seed``, ``algorithm_study.py``'s ``heldout``), which hold one
number per seed. No JAX here."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from purehr.reports.results_table import GOAL_METRIC, algorithm_label, final_checkpoint_metrics, task_family
from purehr.run.store.run_dir import read_manifest

COMPARED_METRICS = ("success_rate", "speed", "return_mean")
"""What a comparison reports per task: held-out success, the speed of a success (swing: time to
rotation, hrv: episode length; ``GOAL_METRIC``) and the held-out return."""
LOWER_IS_BETTER = frozenset({"time_to_rotation", "episode_length", "final_distance", "effort"})
"""Metrics where a smaller value is better (a task outside ``GOAL_METRIC`` has no speed metric)."""
NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class TaskScores:
    """One task of a run: ``values`` per metric (``[seeds]``), the seeds, the floor and reference
    returns for normalisation (NaN when not recorded) and ``episodes``: what defines the held-out
    episodes (``episode_identity``)."""

    values: dict[str, np.ndarray]
    seeds: list[int]
    floor_return: float = math.nan
    reference_return: float = math.nan
    episodes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunScores:
    """A recorded run: its label (what to call it), where it was read, its algorithm per task
    and commit, and its ``TaskScores`` by task."""

    label: str
    source: str
    tasks: dict[str, TaskScores]
    algorithms: dict[str, str]
    revision: str | None


def speed_metric(task: str) -> str | None:
    """The metric that says how fast a success is, for swing and hrv (None for other tasks)."""
    return GOAL_METRIC[task_family(task)][0] if task_family(task) in GOAL_METRIC else None


def metric_name(task: str, metric: str) -> str | None:
    """``speed`` resolved to the task's own metric; every other name as given."""
    return speed_metric(task) if metric == "speed" else metric


def read_scores(path: str | Path, label: str | None = None) -> RunScores:
    """A run directory (one holding manifest.json) or a study's JSON record; anything else is
    refused naming what was expected."""
    path = Path(path)
    if path.is_dir():
        return _run_directory_scores(path, label or path.name)
    if path.is_file() and path.suffix == ".json":
        return _study_scores(path, label or path.stem)
    state = "does not exist" if not path.exists() else "is neither a directory nor a .json file"
    raise ValueError(
        f"{path} {state}; expected a run directory (manifest.json, <task>/seed_<n>/) or a study's JSON record "
        "(studies/scripts/robustness_study.py or algorithm_study.py)"
    )


def _run_directory_scores(run_dir: Path, label: str) -> RunScores:
    manifest = read_manifest(run_dir)
    if manifest.get("pbt") is not None:
        raise ValueError(
            f"{run_dir} is a PBT run: its members copy each other's weights, so they are not independent seeds "
            "to resample or compare (docs/pbt.md)"
        )
    seeds = list(manifest["seeds"])
    tasks = {}
    for task in manifest["tasks"]:
        metrics = final_checkpoint_metrics(run_dir, task, seeds)
        entry = (manifest.get("baselines") or {}).get(task) or {}
        floor, reference = _normalisers(entry)
        settings = (manifest.get("protocol_settings") or {}).get(task) or {}
        episodes = {
            "task arguments": (manifest.get("environments") or {}).get(task, NOT_RECORDED),
            "held-out episodes": settings.get("eval_episodes", NOT_RECORDED),
            "curriculum": (manifest.get("curricula") or {}).get(task),
            "baseline returns": _baseline_returns(entry),
        }
        tasks[task] = TaskScores(
            {name: metrics[name] for name in metrics if name != "steps"}, seeds, floor, reference, episodes
        )
    algorithms = {task: algorithm_label(manifest, task) for task in manifest["tasks"]}
    return RunScores(label, str(run_dir), tasks, algorithms, manifest.get("git_revision"))


def _normalisers(entry: dict) -> tuple[float, float]:
    """(the best floor's held-out return, the reference policy's), NaN where not recorded."""
    floors = [
        metrics.get("return_mean")
        for metrics in (entry.get("floors") or {}).values()
        if isinstance(metrics, dict) and isinstance(metrics.get("return_mean"), (int, float))
    ]
    reference = (entry.get("metrics") or {}).get("return_mean")
    floor = max(floors) if floors else math.nan
    return float(floor), float(reference) if isinstance(reference, (int, float)) else math.nan


def _baseline_returns(entry: dict) -> dict[str, float] | str:
    """The floors' and the reference policy's held-out returns: evaluated on the run's held-out
    episodes, so they differ when the episodes do."""
    returns = {name: (metrics or {}).get("return_mean") for name, metrics in (entry.get("floors") or {}).items()}
    if isinstance(entry.get("metrics"), dict):
        returns[entry.get("name") or "reference"] = entry["metrics"].get("return_mean")
    returns = {name: float(value) for name, value in returns.items() if isinstance(value, (int, float))}
    return returns or NOT_RECORDED


def _study_scores(path: Path, label: str) -> RunScores:
    record = json.loads(path.read_text())
    if not isinstance(record, dict) or "task" not in record:
        raise ValueError(f"{path} is not a study record (expected a JSON object with 'task')")
    task, revision = record["task"], record.get("git_revision")
    if "per_seed" in record:  # robustness_study.py: success, speed, return per seed
        rows = record["per_seed"]
        values = {
            "success_rate": [row["success"] for row in rows],
            speed_metric(task) or "speed": [row["speed"] for row in rows],
            "return_mean": [row.get("return_mean", math.nan) for row in rows],
        }
        seeds = [row["seed"] for row in rows]
        command = record.get("run_command") or []
        arguments = _env_args_of(command, task)
        episodes = {"task arguments": arguments, "held-out episodes": NOT_RECORDED}
        algorithm = "PPO" if "--algorithm" not in command else command[command.index("--algorithm") + 1].upper()
    elif "heldout" in record:  # algorithm_study.py: every held-out metric per seed
        values, seeds = record["heldout"], list(record["seeds"])
        episodes = {
            "task arguments": record.get("env_kwargs", NOT_RECORDED),
            "held-out episodes": record.get("heldout_episodes", NOT_RECORDED),
        }
        algorithm = str(record.get("algorithm", "ppo")).upper()
    else:
        raise ValueError(
            f"{path}: a study record holds 'per_seed' (robustness_study.py) or 'heldout' (algorithm_study.py)"
        )
    values = {
        name: np.asarray([math.nan if v is None else v for v in column], np.float64) for name, column in values.items()
    }
    return RunScores(
        label, str(path), {task: TaskScores(values, seeds, episodes=episodes)}, {task: algorithm}, revision
    )


def _env_args_of(command: list[str], task: str) -> dict[str, Any] | str:
    """The task arguments a recorded command line gave (``--env-arg TASK key=value``), beside the
    task's defaults of its commit: only those it gave are known."""
    given = {}
    for index, word in enumerate(command[:-2]):
        if word == "--env-arg" and command[index + 1] == task and "=" in command[index + 2]:
            key, _, value = command[index + 2].partition("=")
            given[key] = value
    return {"defaults, and": given} if given else NOT_RECORDED


def episode_differences(a: RunScores, b: RunScores, task: str) -> tuple[list[str], list[str]]:
    """Why two runs' held-out episodes of ``task`` differ (``differ``: recorded in both and not
    equal) and what could not be checked (``unchecked``: recorded in one only, or not at all and
    the commits differ). Baseline returns count as equal within 1e-3 relative (float rounding)."""
    differ, unchecked = [], []
    left, right = a.tasks[task].episodes, b.tasks[task].episodes
    for key in sorted(set(left) | set(right)):
        one, other = left.get(key, NOT_RECORDED), right.get(key, NOT_RECORDED)
        if key in ("curriculum", "baseline returns") and NOT_RECORDED in (one, other):
            continue  # extra evidence where both have it; not required
        if one == NOT_RECORDED or other == NOT_RECORDED or _partial(one) or _partial(other):
            same_commit = a.revision is not None and a.revision == b.revision
            if one == other and same_commit:
                continue  # the same command's defaults at the same commit
            if _partial(one) and _partial(other) and same_commit:
                differ.append(f"{key}: {a.label} {_shown(one)}, {b.label} {_shown(other)}")
                continue
            unchecked.append(
                f"{key}: {a.label} {_shown(one)}, {b.label} {_shown(other)} (commits {a.revision}, {b.revision})"
            )
        elif key == "baseline returns":
            for name in sorted(set(one) & set(other)):
                if not math.isclose(one[name], other[name], rel_tol=1e-3, abs_tol=1e-6):
                    differ.append(
                        f"{name} held-out return {one[name]:.4g} on {a.label}'s episodes, "
                        f"{other[name]:.4g} on {b.label}'s"
                    )
        elif one != other:
            differ.append(f"{key}: {a.label} {_shown(one)}, {b.label} {_shown(other)}")
    return differ, unchecked


def _partial(value: Any) -> bool:
    return isinstance(value, dict) and "defaults, and" in value


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
