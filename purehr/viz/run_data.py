"""Reading a finished (or partial) run directory for rendering.

Rendering runs in a fresh process, long after training, possibly on another machine: it
only trusts the files of the run directory (``docs/interfaces.md``), and says which file is
missing or malformed instead of failing deep inside matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from purehr.run.store.columns import RENDERED_CHECKPOINT_COLUMNS, RENDERED_UPDATE_COLUMNS
from purehr.run.store.files import RunDirectoryError
from purehr.run.store.run_dir import CHECKPOINTS_CSV, read_manifest, read_seed_logs, run_seed_directories, seed_dir_name
from purehr.types import Columns


@dataclass(frozen=True)
class SeedLog:
    """The logs of one task and seed: the columns of updates.csv and checkpoints.csv."""

    task: str
    seed: int
    directory: Path
    updates: Columns
    checkpoints: Columns

    @property
    def num_checkpoints(self) -> int:
        return len(self.checkpoints["target_steps"])


@dataclass(frozen=True)
class RunData:
    """Everything the figures need: the manifest and every task's per-seed logs."""

    run_dir: Path
    manifest: dict[str, Any]
    logs: dict[str, dict[int, SeedLog]]  # task -> seed -> log, seeds ascending

    @property
    def tasks(self) -> list[str]:
        return list(self.logs)

    def seeds(self, task: str) -> list[int]:
        return list(self.logs[task])

    def baseline(self, task: str) -> tuple[str, dict[str, float]] | None:
        """(name, metrics) of the task's reference controller, if the manifest has one; the
        name is the manifest's short ``name`` (else its ``definition``, whose module paths the
        figures leave to the manifest)."""
        entry = (self.manifest.get("baselines") or {}).get(task)
        if not entry or not isinstance(entry.get("metrics"), dict):  # None: a task without a reference
            return None
        name = entry.get("name") or str(entry.get("definition", "baseline")).split(" (")[0]
        return str(name), dict(entry["metrics"])

    def floors(self, task: str) -> dict[str, dict[str, float]]:
        """The levels of doing nothing useful, ``baselines[task]["floors"]`` in the manifest
        (swing: zero action, random; hrv: no-op, random), name -> metrics; {} when absent."""
        entry = (self.manifest.get("baselines") or {}).get(task) or {}
        floors = entry.get("floors") or {}
        return {str(name): dict(metrics) for name, metrics in floors.items() if isinstance(metrics, dict)}


def load_seed_log(run_dir: Path, task: str, seed: int) -> SeedLog:
    directory = run_dir / task / seed_dir_name(seed)
    updates, checkpoints = read_seed_logs(directory, RENDERED_UPDATE_COLUMNS, RENDERED_CHECKPOINT_COLUMNS)
    if len(checkpoints["target_steps"]) == 0:
        raise RunDirectoryError(f"{directory / CHECKPOINTS_CSV}: no checkpoint rows")
    order = np.argsort(checkpoints["target_steps"], kind="stable")
    checkpoints = {name: values[order] for name, values in checkpoints.items()}
    return SeedLog(task, seed, directory, updates, checkpoints)


def load_run(run_dir: str | Path, tasks: list[str] | None = None) -> RunData:
    """Load the manifest and the logs of ``tasks`` (default: the manifest's tasks, else every
    task directory), every ``seed_<n>`` directory of each."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    logs = {
        task: {seed: load_seed_log(run_dir, task, seed) for seed in seeds}
        for task, seeds in run_seed_directories(run_dir, manifest, tasks).items()
    }
    return RunData(run_dir, manifest, logs)
