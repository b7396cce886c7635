"""The run directory of docs/interfaces.md: its layout (file and folder names), the manifest,
the seed folders and their logs, and what ``--overwrite`` may remove. The files themselves are
read and written by ``purehr.run.store.files``, the lock is ``purehr.run.store.lock``. No JAX here:
scripts' ``--help`` and the renderer import it."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from purehr.run.store.columns import CHECKPOINT_INTEGERS, CHECKPOINT_TAIL, UPDATE_INTEGERS
from purehr.run.store.files import (
    RunDirectoryError,
    RunDirectoryNotFound,
    atomic_write_json,
    partial_name,
    read_csv_columns,
    read_json_object,
    read_rows,
)
from purehr.run.store.lock import RunLock, lock_holder, take_lock
from purehr.tracking.settings import RUN_FOLDERS
from purehr.types import Columns

MANIFEST = "manifest.json"
LOCK = ".lock"
RESUME = "RESUME.txt"
"""The command that continues the run, written when a process takes the directory (docs/how-to/resume.md)."""
UPDATES_CSV = "updates.csv"
CHECKPOINTS_CSV = "checkpoints.csv"
FINAL_METRICS_CSV = "final_metrics.csv"
REPORTED_CSV = "reported.csv"
"""A seed's reported checkpoint (``ProtocolSettings.report_candidates`` > 1, ``purehr.run.choose_reported``)."""
FIGURES = "figures"
SEED_DIRECTORY = re.compile(r"^seed_(\d+)$")
STEP_FOLDER = re.compile(r"^\d+$")
ORBAX_ENTRY = re.compile(r"^\d+(\.orbax-checkpoint-tmp.*)?$")
"""In ``checkpoints/``: a completed checkpoint ``<steps>/``; what Orbax writes (those and the
saves it had not finished, ``<steps>.orbax-checkpoint-tmp-<time>``)."""
SHOWCASE_TRACE = re.compile(r"^(\.)?steps_\d+(\.partial)?\.npz$")
"""In ``showcase/``: ``steps_<n>.npz`` and its temporary (``purehr.run.store.files.partial_name``)."""
QUARANTINED = re.compile(r"^\d+(\.orbax-checkpoint-tmp[-\d]*)?-\d{8}T\d{6}(-\d+)?(\.REASON\.txt)?$")
"""In ``quarantine/``: what a resume set aside, ``<name>-<time>`` (``SeedCheckpoints.quarantine_entry``)."""


def is_orbax_entry(name: str) -> bool:
    """A name in ``checkpoints/`` that Orbax writes: a step folder or a save in progress."""
    return bool(ORBAX_ENTRY.match(name))


def completed_checkpoint_steps(folder: Path) -> list[int]:
    """The step folders Orbax completed (``<steps>/``), read from the directory alone."""
    if not folder.is_dir():
        return []
    return sorted(int(entry.name) for entry in folder.iterdir() if entry.is_dir() and STEP_FOLDER.match(entry.name))


def unfinished_save_steps(folder: Path) -> set[int]:
    """The steps whose save Orbax began but never completed (``<steps>.orbax-checkpoint-tmp-*``
    without ``<steps>/``): checkpoints.csv lists a checkpoint once its asynchronous save has
    started, so a run stopped at that moment lists one that is not there to read."""
    if not folder.is_dir():
        return set()
    started = {int(entry.name.partition(".")[0]) for entry in folder.iterdir() if ".orbax-checkpoint-tmp" in entry.name}
    return {steps for steps in started if STEP_FOLDER.match(str(steps))} - set(completed_checkpoint_steps(folder))


def read_checkpoint_rows(path: Path) -> list[dict[str, Any]]:
    """checkpoints.csv as parsed rows, every cell checked (``purehr.run.store.files.read_rows``)."""
    return read_rows(path, CHECKPOINT_TAIL, CHECKPOINT_INTEGERS)


def read_update_rows(path: Path) -> list[dict[str, Any]]:
    """updates.csv as parsed rows, every cell checked (``purehr.run.store.files.read_rows``)."""
    return read_rows(path, (), UPDATE_INTEGERS)


def is_published_record(root: Path, manifest: dict[str, Any]) -> bool:
    """A record ``purehr.reports.publish.publish_run`` wrote: marked ``published`` in its
    manifest, or (records published before the mark) a finished run whose every seed holds at
    most one checkpoint, its last: a run itself always keeps step 0 and its last."""
    if manifest.get("published"):
        return True
    if manifest.get("status") != "finished":
        return False
    tasks = [t for t in manifest.get("tasks", []) if isinstance(t, str)]
    seeds = [s for s in manifest.get("seeds", []) if isinstance(s, int)]
    folders = [Path(root) / task / seed_dir_name(seed) / "checkpoints" for task in tasks for seed in seeds]
    return bool(folders) and all(len(completed_checkpoint_steps(folder)) <= 1 for folder in folders)


def seed_dir_name(seed: int) -> str:
    return f"seed_{seed}"


def seed_directories(task_dir: Path) -> dict[int, Path]:
    """The ``seed_<n>`` folders of a task folder, by seed ascending ({} when there is none)."""
    found = {}
    for child in task_dir.iterdir() if task_dir.is_dir() else ():
        match = SEED_DIRECTORY.match(child.name)
        if match and child.is_dir():
            found[int(match.group(1))] = child
    return dict(sorted(found.items()))


MANIFEST_TEMPORARIES = (partial_name(MANIFEST), f".{MANIFEST}.tmp")
"""A manifest being written (``.<name>.tmp``: as runs before atomic_output wrote it)."""


def read_manifest(root: Path) -> dict[str, Any]:
    """The manifest.json of ``root`` as a JSON object (``RunDirectory.read_manifest`` also
    checks that a purehr run wrote it)."""
    root = Path(root)
    if not root.is_dir():
        raise RunDirectoryNotFound(
            f"{root}: run directory not found (expected {MANIFEST} and <task>/seed_<n>/ logs, see docs/interfaces.md)"
        )
    path = root / MANIFEST
    manifest = read_json_object(
        path,
        missing=lambda: RunDirectoryNotFound(f"{root} is not a purehr run directory: no {MANIFEST}"),
        not_json=lambda error: RunDirectoryError(
            f"{path} is not valid JSON ({error}); {root} does not hold a purehr run"
        ),
        not_object=lambda value: RunDirectoryError(
            f"{path} is not a purehr run manifest (a JSON {type(value).__name__}, "
            f"expected an object); {root} does not hold a purehr run"
        ),
    )
    if isinstance(manifest.get("baselines"), dict):
        manifest["baselines"] = {task: baseline_numbers(entry) for task, entry in manifest["baselines"].items()}
    return manifest


def baseline_numbers(entry: Any) -> Any:
    """One task's baselines (``metrics``, ``floors``) as read from JSON, an undefined number
    (null: written for NaN, e.g. the time to rotation of a policy that never rotates) NaN
    again, as the evaluation returned it and every reader of the numbers takes it."""
    if not isinstance(entry, dict):
        return entry

    def numbers(metrics: Any) -> Any:
        return {name: math.nan if value is None else value for name, value in metrics.items()}

    entry = dict(entry)
    if isinstance(entry.get("metrics"), dict):
        entry["metrics"] = numbers(entry["metrics"])
    if isinstance(entry.get("floors"), dict):
        floors = entry["floors"].items()
        entry["floors"] = {name: numbers(metrics) if isinstance(metrics, dict) else metrics for name, metrics in floors}
    return entry


def run_seed_directories(
    root: Path, manifest: dict[str, Any], tasks: Sequence[str] | None = None
) -> dict[str, dict[int, Path]]:
    """task -> seed -> folder for ``tasks`` (default: the manifest's, else every folder holding
    ``seed_<n>`` folders); each task must have at least one seed folder. A seed folder that is
    empty or not one of the manifest's seeds (a user's copy, a stray ``mkdir``) is not the
    run's: it is left out, with a note, rather than refusing an intact run."""
    tasks = list(manifest.get("tasks") or []) if tasks is None else list(tasks)
    if not tasks:
        tasks = sorted(child.name for child in root.iterdir() if seed_directories(child))
    if not tasks:
        raise RunDirectoryError(f"{root}: no <task>/seed_<n>/ directories found")
    recorded = manifest.get("seeds")
    seeds = {s for s in recorded if isinstance(s, int)} if isinstance(recorded, list) else None
    found = {}
    for task in tasks:
        found[task] = {}
        for seed, folder in seed_directories(root / task).items():
            why = _not_a_run_seed(folder, seed, seeds)
            if why:
                print(f"note: {folder} is left out: {why}", file=sys.stderr)
            else:
                found[task][seed] = folder
        if not found[task]:
            raise RunDirectoryNotFound(f"{root / task}: no seed_<n> directories for task {task!r}")
    return found


def _not_a_run_seed(folder: Path, seed: int, seeds: set[int] | None) -> str | None:
    if seeds is not None and seed not in seeds:
        return f"seed {seed} is not one of the run's seeds ({' '.join(map(str, sorted(seeds)))}, manifest.json)"
    if not any(folder.iterdir()):
        return "it is empty"
    return None


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
            f"{directory / UPDATES_CSV}: ends at {logged:,.0f} env steps, before the checkpoint "
            f"at {last_checkpoint:,.0f} steps in {CHECKPOINTS_CSV} (rows lost: truncated copy?)"
        )


def read_seed_logs(
    seed_dir: Path, update_required: Sequence[str], checkpoint_required: Sequence[str], *, numeric: bool = False
) -> tuple[Columns, Columns]:
    """One seed's updates.csv and checkpoints.csv as columns, checked against each other."""
    updates = read_csv_columns(seed_dir / UPDATES_CSV, update_required, numeric=numeric)
    checkpoints = read_csv_columns(seed_dir / CHECKPOINTS_CSV, checkpoint_required, numeric=numeric)
    check_seed_logs_agree(seed_dir, updates, checkpoints)
    return updates, checkpoints


@dataclass(frozen=True)
class RunDirectory:
    root: Path

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def seed_dir(self, task: str, seed: int) -> Path:
        return self.root / task / seed_dir_name(seed)

    def updates_csv(self, task: str, seed: int) -> Path:
        return self.seed_dir(task, seed) / UPDATES_CSV

    def checkpoints_csv(self, task: str, seed: int) -> Path:
        return self.seed_dir(task, seed) / CHECKPOINTS_CSV

    def reported_csv(self, task: str, seed: int) -> Path:
        return self.seed_dir(task, seed) / REPORTED_CSV

    def checkpoint_dir(self, task: str, seed: int) -> Path:
        return self.seed_dir(task, seed) / "checkpoints"

    def showcase_path(self, task: str, seed: int, steps: int) -> Path:
        return self.seed_dir(task, seed) / "showcase" / f"steps_{steps}.npz"

    def read_manifest(self) -> dict[str, Any]:
        """The run's manifest; a manifest.json that is not a purehr run's is refused by name."""
        manifest = read_manifest(self.root)
        missing = run_manifest_problem(manifest)
        if missing:
            raise RunDirectoryError(
                f"{self.manifest_path} is not a purehr run manifest ({missing}); {self.root} does not hold a purehr run"
            )
        return manifest

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        atomic_write_json(self.manifest_path, manifest)

    def holds_run(self) -> bool:
        return self.manifest_path.exists()

    @property
    def lock_path(self) -> Path:
        return self.root / LOCK

    def holder(self) -> str | None:
        """The pid (as text) of a live process training in this directory, else None. The
        kernel drops the lock when its holder dies, SIGKILL included, so a stale file is free."""
        return lock_holder(self.lock_path)

    def lock(self) -> RunLock:
        """Holds the directory for this process until ``release``: a second process training
        into it at the same time would save the same checkpoints twice and mix their rows."""
        return take_lock(self.root, self.lock_path)


RUN_MANIFEST_KEYS = {"tasks": list, "seeds": list, "configs": dict, "protocol": str, "status": str}


def run_manifest_problem(manifest: Any) -> str | None:
    """None for a manifest a purehr run wrote, else what is wrong with it (in words)."""
    if not isinstance(manifest, dict):
        return f"a JSON {type(manifest).__name__}, expected an object"
    missing = [key for key in RUN_MANIFEST_KEYS if key not in manifest]
    if missing:
        return f"it lacks {', '.join(map(repr, missing))}"
    wrong = [key for key, kind in RUN_MANIFEST_KEYS.items() if not isinstance(manifest[key], kind)]
    if wrong:
        return f"{', '.join(map(repr, wrong))} of the wrong type"
    if not manifest["protocol"].startswith("PPO per docs/protocol.md"):
        return "its 'protocol' is not purehr's"
    tasks = manifest["tasks"]
    if not all(isinstance(t, str) and isinstance(manifest["configs"].get(t), dict) for t in tasks):
        return "its 'configs' do not cover its 'tasks'"
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in manifest["seeds"]):
        return "its 'seeds' are not integers"
    return None


def enclosing_run_directory(path: Path, own: Path) -> Path | None:
    """The directory of another purehr run that ``path`` lies in (itself or a parent holding
    a run's manifest), else None; the search stops at ``own``, the caller's run directory."""
    path, own = Path(os.path.abspath(path)), Path(os.path.abspath(own))
    for directory in (path, *path.parents):
        if directory == own:
            return None
        try:
            manifest = read_manifest(directory)
        except (OSError, ValueError):  # no run there (RunDirectoryError is a ValueError)
            continue
        if run_manifest_problem(manifest) is None:
            return directory
    return None


def check_run_directory_path(root: Path) -> None:
    """Before any work: ``root`` must be a directory (or not exist yet) that this process can
    write in. A probe file is created and removed at once, so nothing stays behind."""
    import tempfile

    if root.exists() and not root.is_dir():
        raise NotADirectoryError(
            f"run directory {root} is a file, not a directory; expected a new directory or one holding a purehr run"
        )
    existing = root
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(f"run directory {root}: {existing} is a file, not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".purehr-write-probe-"):
            pass
    except OSError as error:
        raise PermissionError(
            f"run directory {root} cannot be written ({existing}: "
            f"{error.strerror or error}); choose a directory you can write to"
        ) from None


def run_written_paths(root: Path, manifest: dict[str, Any]) -> tuple[list[Path], list[Path]]:
    """(the paths a purehr run writes that exist in ``root``, everything else in it). Only the
    first may be removed by --overwrite; the second belongs to the user. Inside ``checkpoints/``,
    ``showcase/`` and ``quarantine/`` only the names a run gives (step folders and Orbax's
    temporaries, ``steps_<n>.npz``, what a resume set aside) are the run's."""
    tasks = [t for t in manifest.get("tasks", []) if isinstance(t, str)]
    seeds = [s for s in manifest.get("seeds", []) if isinstance(s, int)]
    figure_names = {"replay.mp4", "replay_poster.png", "replay_timeline.json", "replay.html"}
    figure_names |= {
        f"{task}_{kind}.{suffix}"
        for task in tasks
        for kind in ("learning", "training_log")
        for suffix in ("png", "pdf")
    }
    figure_names |= {partial_name(name) for name in figure_names}
    top = {MANIFEST, FINAL_METRICS_CSV}
    logged_to = (manifest.get("tracking") or {}).get("backends", [])
    top |= {RUN_FOLDERS[name] for name in logged_to if name in RUN_FOLDERS}
    seed_entries = {UPDATES_CSV, CHECKPOINTS_CSV, REPORTED_CSV}
    # and their temporaries; ".<name>.tmp" are those of runs written before atomic_output
    top |= {partial_name(name) for name in top} | {LOCK, RESUME, partial_name(RESUME), *MANIFEST_TEMPORARIES}
    seed_entries |= {partial_name(name) for name in seed_entries} | {f".{name}.tmp" for name in seed_entries}
    ours: list[Path] = []
    others: list[Path] = []

    def sort(directory: Path, allowed: set[str], descend: dict[str, Any], pattern: re.Pattern | None = None) -> None:
        for entry in sorted(directory.iterdir()):
            if entry.name in descend and entry.is_dir() and not entry.is_symlink():
                descend[entry.name](entry)
            elif entry.name in allowed or (pattern is not None and pattern.match(entry.name)):
                ours.append(entry)
            else:
                others.append(entry)

    def written_by_name(pattern: re.Pattern) -> Any:
        return lambda path: sort(path, set(), {}, pattern)

    seed_folders = {
        "checkpoints": written_by_name(ORBAX_ENTRY),
        "showcase": written_by_name(SHOWCASE_TRACE),
        "quarantine": written_by_name(QUARANTINED),
    }

    def seed_dir(path: Path) -> None:
        sort(path, seed_entries, seed_folders)

    def task_dir(path: Path) -> None:
        sort(path, set(), {seed_dir_name(seed): seed_dir for seed in seeds})

    def figures_dir(path: Path) -> None:
        sort(path, figure_names, {})

    sort(root, top, {**{task: task_dir for task in tasks}, FIGURES: figures_dir})
    return ours, others


def remove_run_files(root: Path, manifest: dict[str, Any]) -> list[Path]:
    """Removes what a run wrote (its manifest last, so an interruption leaves a directory
    still recognisable as a run) and the folders this empties; returns what was kept."""
    import shutil

    ours, others = run_written_paths(root, manifest)
    for path in sorted(ours, key=lambda p: p.name == MANIFEST):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    tasks = [t for t in manifest["tasks"] if isinstance(t, str)]
    seed_dirs = [root / task / seed_dir_name(seed) for task in tasks for seed in manifest["seeds"]]
    created = [seed_dir / name for seed_dir in seed_dirs for name in ("checkpoints", "showcase", "quarantine")]
    created += seed_dirs + [root / task for task in tasks] + [root / FIGURES]
    for directory in created:  # the folders a run made, once emptied; never the user's
        if directory.is_dir() and not directory.is_symlink() and not any(directory.iterdir()):
            directory.rmdir()
    return others


def describe_divergences(diverged: dict[str, dict[str, dict]]) -> str:
    """``diverged`` (the manifest's) in words: each seed's divergences, and for a PBT member
    what became of each (another member's weights given at an update, or frozen to the end)."""
    said = []
    for task, per_seed in diverged.items():
        for seed, first in per_seed.items():
            pbt = "divergences" in first
            events = " and ".join(_divergence_text(event, pbt) for event in first.get("divergences") or [first])
            said.append(f"{task} seed {seed} {events}")
    return "; ".join(said)


def nonfinite_before(rows: list[dict], update: int) -> int:
    """How many non-finite rewards or observations the environment produced in the updates up
    to ``update`` (updates.csv's ``nonfinite_states``; rows of a resume's earlier part included)."""
    return int(sum(row.get("nonfinite_states", 0) or 0 for row in rows if row["update"] <= update))


def environment_advice(nonfinite: int) -> str:
    """What a divergence says when the environment produced non-finite rewards or observations
    before it: the environment is the first suspect, not the learning rate ("" when none)."""
    if nonfinite <= 0:
        return ""
    return (
        f"the environment produced {nonfinite:,} non-finite rewards or observations by then (each ended "
        "its episode with reward 0; updates.csv, column nonfinite_states): check the environment's step "
        "for NaN or infinite values first"
    )


def _divergence_text(event: dict, pbt: bool) -> str:
    text = f"at update {event['update']} ({event['env_steps']:,} env steps"
    if pbt and event.get("replaced_by_seed") is None:
        text += "; frozen to the end"
    elif pbt:
        text += f"; PBT gave it seed {event['replaced_by_seed']}'s weights at update {event['replaced_at_update']}"
    return text + ")"
