"""Reading a finished (or partial) run directory for rendering.

Rendering runs in a fresh process, long after training, possibly on another machine: it
only trusts the files of the run directory (``docs/interfaces.md``), and says which file is
missing or malformed instead of failing deep inside matplotlib.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

Columns = dict[str, np.ndarray]

SEED_DIRECTORY = re.compile(r"^seed_(\d+)$")
REQUIRED_CHECKPOINT_COLUMNS = ("target_steps", "actual_steps", "elapsed_s", "showcase_path")
REQUIRED_UPDATE_COLUMNS = ("env_steps", "mean_episode_return")


class RunDirectoryError(ValueError):
    """A run directory, or a file inside it, is missing or not in the documented format."""


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
        if not entry or "metrics" not in entry:
            return None
        name = entry.get("name") or str(entry.get("definition", "baseline")).split(" (")[0]
        return str(name), dict(entry["metrics"])

    def floors(self, task: str) -> dict[str, dict[str, float]]:
        """The levels of doing nothing useful, ``baselines[task]["floors"]`` in the manifest
        (swing: zero action, random; hrv: no-op, random), name -> metrics; {} when absent."""
        entry = (self.manifest.get("baselines") or {}).get(task) or {}
        floors = entry.get("floors") or {}
        return {str(name): dict(metrics) for name, metrics in floors.items() if isinstance(metrics, dict)}


def _parse_cell(text: str) -> float | None:
    if text.strip() == "":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        return None


def read_csv_columns(path: Path, required: tuple[str, ...] = ()) -> Columns:
    """Columns of a CSV as arrays: float64 where every cell is a number (empty -> NaN),
    str otherwise (paths)."""
    if not path.is_file():
        raise RunDirectoryError(f"{path}: file not found (expected a CSV log of the run)")
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        rows = [row for row in reader if row]
    if not header:
        raise RunDirectoryError(f"{path}: empty file (expected a header row)")
    missing = [name for name in required if name not in header]
    if missing:
        raise RunDirectoryError(f"{path}: missing column(s) {missing}; has {header}")
    ragged = [number for number, row in enumerate(rows, start=2) if len(row) != len(header)]
    if ragged:
        raise RunDirectoryError(
            f"{path}: line(s) {ragged[:5]} do not have {len(header)} fields (truncated write?)")
    columns: Columns = {}
    for index, name in enumerate(header):
        cells = [row[index] for row in rows]
        numbers = [_parse_cell(cell) for cell in cells]
        if all(number is not None for number in numbers):
            columns[name] = np.asarray(numbers, dtype=np.float64)
        else:
            columns[name] = np.asarray(cells, dtype=str)
    return columns


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest.json, with the run directory checked first."""
    if not run_dir.is_dir():
        raise RunDirectoryError(
            f"{run_dir}: run directory not found (expected manifest.json and "
            "<task>/seed_<n>/ logs, see docs/interfaces.md)")
    path = run_dir / "manifest.json"
    if not path.is_file():
        raise RunDirectoryError(f"{path}: not found (expected the run's manifest)")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise RunDirectoryError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(manifest, dict):
        raise RunDirectoryError(f"{path}: expected a JSON object at the top level")
    return manifest


def _seed_directories(task_dir: Path) -> list[tuple[int, Path]]:
    found = []
    for child in task_dir.iterdir() if task_dir.is_dir() else []:
        match = SEED_DIRECTORY.match(child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), child))
    return sorted(found)


def check_seed_logs_agree(directory: Path, updates: Columns, checkpoints: Columns) -> None:
    """The recorder writes a seed's updates.csv together with its checkpoints.csv, and a
    checkpoint's update is logged before it is saved, so updates.csv always reaches the last
    checkpoint; a log that ends before it has lost rows (a copy cut at a row boundary, which
    no field count can show)."""
    steps, saved = updates.get("env_steps"), checkpoints.get("actual_steps")
    if steps is None or saved is None or not len(steps) or not len(saved):
        return
    logged, last_checkpoint = float(np.nanmax(steps)), float(np.nanmax(saved))
    if logged < last_checkpoint:
        raise RunDirectoryError(
            f"{directory / 'updates.csv'}: ends at {logged:,.0f} env steps, before the checkpoint "
            f"at {last_checkpoint:,.0f} steps in checkpoints.csv (rows lost: truncated copy?)")


def load_seed_log(run_dir: Path, task: str, seed: int) -> SeedLog:
    directory = run_dir / task / f"seed_{seed}"
    updates = read_csv_columns(directory / "updates.csv", REQUIRED_UPDATE_COLUMNS)
    checkpoints = read_csv_columns(directory / "checkpoints.csv", REQUIRED_CHECKPOINT_COLUMNS)
    check_seed_logs_agree(directory, updates, checkpoints)
    if len(checkpoints["target_steps"]) == 0:
        raise RunDirectoryError(f"{directory / 'checkpoints.csv'}: no checkpoint rows")
    order = np.argsort(checkpoints["target_steps"], kind="stable")
    checkpoints = {name: values[order] for name, values in checkpoints.items()}
    return SeedLog(task, seed, directory, updates, checkpoints)


def load_run(run_dir: str | Path, tasks: list[str] | None = None) -> RunData:
    """Load the manifest and the logs of ``tasks`` (default: the manifest's tasks, else every
    task directory), every ``seed_<n>`` directory of each."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    if tasks is None:
        tasks = list(manifest.get("tasks") or [])
    if not tasks:
        tasks = sorted(child.name for child in run_dir.iterdir()
                       if child.is_dir() and _seed_directories(child))
    if not tasks:
        raise RunDirectoryError(f"{run_dir}: no <task>/seed_<n>/ directories found")
    logs: dict[str, dict[int, SeedLog]] = {}
    for task in tasks:
        seeds = _seed_directories(run_dir / task)
        if not seeds:
            raise RunDirectoryError(f"{run_dir / task}: no seed_<n> directories for task {task!r}")
        logs[task] = {seed: load_seed_log(run_dir, task, seed) for seed, _ in seeds}
    return RunData(run_dir, manifest, logs)


def load_showcase(run_dir: str | Path, relative_path: str) -> dict[str, np.ndarray]:
    """One recorded showcase episode (arrays, one row per control step); no pickle."""
    path = Path(run_dir) / relative_path
    if not path.is_file():
        raise RunDirectoryError(f"{path}: showcase trace not found (named in checkpoints.csv)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (ValueError, OSError) as error:
        raise RunDirectoryError(f"{path}: not a readable .npz trace ({error})") from error


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` (same suffix, so writers pick the right format)
    and move it onto ``path`` only once it is complete: a killed render never leaves a
    half-written figure, video or CSV that looks finished."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.partial{path.suffix}")
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str) -> Path:
    with atomic_output(path) as partial:
        partial.write_text(text, encoding="utf-8")
    return path
