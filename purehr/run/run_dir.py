"""The run directory of docs/interfaces.md, and the one place that reads and writes it: the
layout (file and folder names), the column lists, the readers (manifest, CSV rows, CSV
columns, showcase traces) with one error type, and the writers, all atomic (write a
temporary sibling, then rename) so a kill never leaves half a file behind. No JAX here:
scripts' ``--help`` and the renderer import it."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one process per run directory is on the user
    fcntl = None

# --- layout ------------------------------------------------------------------------------------

MANIFEST = "manifest.json"
LOCK = ".lock"
UPDATES_CSV = "updates.csv"
CHECKPOINTS_CSV = "checkpoints.csv"
FINAL_METRICS_CSV = "final_metrics.csv"
FIGURES = "figures"
SEED_DIRECTORY = re.compile(r"^seed_(\d+)$")
PACKAGES = (
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "distrax",
    "chex",
    "orbax-checkpoint",
    "numpy",
    "matplotlib",
    "imageio",
    "imageio-ffmpeg",
)


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


# --- columns -----------------------------------------------------------------------------------

UPDATE_COLUMNS = [
    "update",
    "env_steps",
    "elapsed_s",
    "mean_step_reward",
    "mean_episode_return",
    "episodes_completed",
    "train_success_rate",
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "grad_norm",
]
"""The fixed columns of every updates.csv (docs/protocol.md); a task's diagnostics follow."""
CHECKPOINT_HEAD = ["target_steps", "actual_steps", "update", "elapsed_s"]
CHECKPOINT_TAIL = ["checkpoint_path", "showcase_path", "state_digest"]
"""checkpoints.csv: the head, then ``eval_<metric>`` per held-out metric, then the tail (text)."""

RENDERED_UPDATE_COLUMNS = ("env_steps", "mean_episode_return")
RENDERED_CHECKPOINT_COLUMNS = ("target_steps", "actual_steps", "elapsed_s", "showcase_path")
"""What the figures and the replay read: a run lacking one cannot be rendered."""
ANALYSED_UPDATE_COLUMNS = ("env_steps", "elapsed_s", "mean_episode_return", "train_success_rate")
ANALYSED_CHECKPOINT_COLUMNS = ("actual_steps", "eval_success_rate")
"""What the analysis and the results table compute from: each must hold numbers."""


def update_columns(metric_names: Iterable[str]) -> list[str]:
    """The fixed columns of docs/protocol.md, then the task's own diagnostics."""
    return UPDATE_COLUMNS + sorted(set(metric_names) - set(UPDATE_COLUMNS))


def checkpoint_columns(evaluation_names: Iterable[str]) -> list[str]:
    return CHECKPOINT_HEAD + [f"eval_{name}" for name in evaluation_names] + CHECKPOINT_TAIL


# --- errors ------------------------------------------------------------------------------------


class RunDirectoryError(ValueError):
    """A run directory, or a file inside it, is not one a purehr run wrote, or not in the
    documented format."""


class RunDirectoryNotFound(RunDirectoryError, FileNotFoundError):
    """The run directory, or a file a run writes, is missing."""


# --- writers -----------------------------------------------------------------------------------


def partial_name(name: str) -> str:
    """The temporary sibling a file is written to before it is renamed onto ``name``; it keeps
    the suffix, so writers that go by the suffix (matplotlib, ffmpeg) pick the right format."""
    path = Path(name)
    return f".{path.stem}.partial{path.suffix}"


MANIFEST_TEMPORARIES = (partial_name(MANIFEST), f".{MANIFEST}.tmp")
"""A manifest being written (``.<name>.tmp``: as runs before atomic_output wrote it)."""


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` and move it onto ``path`` only once it is
    complete: a killed writer never leaves a half-written file that looks finished."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(partial_name(path.name))
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    with atomic_output(path) as partial, open(partial, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def json_default(value: Any) -> Any:
    """Arrays and NumPy scalars as lists and numbers, configs by their ``to_dict``."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def json_values(data: Any) -> Any:
    """``data`` as it reads back from JSON (what two descriptions are compared by)."""
    return json.loads(json.dumps(data, default=json_default))


def atomic_write_json(path: Path, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=json_default) + "\n")


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Arrays as an uncompressed .npz (read back without pickle)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return atomic_write_bytes(path, buffer.getvalue())


def format_cell(value: Any) -> str:
    """The one CSV cell format: floats exactly (``repr``; whole numbers as integers, so a
    step count read back as a float stays ``2048``), NaN as ``nan``, an absent value (None)
    as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            return "nan"
        if value.is_integer() and abs(value) < 2**53 and math.copysign(1.0, value) > 0:
            return str(int(value))
        return repr(value)
    return str(value)


def csv_text(columns: Sequence[str] | None, rows: Iterable[dict[str, Any]]) -> str:
    """Rows as CSV text; ``columns`` None: every key of the rows, in first-seen order. A key a
    row lacks is an empty cell. No rows and no columns: the empty text."""
    rows = list(rows)
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    if not columns:
        return ""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([format_cell(row.get(column)) for column in columns])
    return buffer.getvalue()


def write_csv(path: Path, columns: Sequence[str] | None, rows: Iterable[dict[str, Any]]) -> Path:
    return atomic_write_text(path, csv_text(columns, rows))


# --- readers -----------------------------------------------------------------------------------

Columns = dict[str, np.ndarray]


def read_manifest(root: Path) -> dict[str, Any]:
    """The manifest.json of ``root`` as a JSON object (``RunDirectory.read_manifest`` also
    checks that a purehr run wrote it)."""
    root = Path(root)
    if not root.is_dir():
        raise RunDirectoryNotFound(
            f"{root}: run directory not found (expected {MANIFEST} and <task>/seed_<n>/ logs, see docs/interfaces.md)"
        )
    path = root / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunDirectoryNotFound(f"{root} is not a purehr run directory: no {MANIFEST}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RunDirectoryError(f"{path} is not valid JSON ({error}); {root} does not hold a purehr run") from None
    if not isinstance(manifest, dict):
        raise RunDirectoryError(
            f"{path} is not a purehr run manifest (a JSON {type(manifest).__name__}, "
            f"expected an object); {root} does not hold a purehr run"
        )
    return manifest


def run_seed_directories(
    root: Path, manifest: dict[str, Any], tasks: Sequence[str] | None = None
) -> dict[str, dict[int, Path]]:
    """task -> seed -> folder for ``tasks`` (default: the manifest's, else every folder holding
    ``seed_<n>`` folders); each task must have at least one seed folder."""
    tasks = list(manifest.get("tasks") or []) if tasks is None else list(tasks)
    if not tasks:
        tasks = sorted(child.name for child in root.iterdir() if seed_directories(child))
    if not tasks:
        raise RunDirectoryError(f"{root}: no <task>/seed_<n>/ directories found")
    found = {}
    for task in tasks:
        found[task] = seed_directories(root / task)
        if not found[task]:
            raise RunDirectoryNotFound(f"{root / task}: no seed_<n> directories for task {task!r}")
    return found


def read_csv(path: Path) -> list[dict[str, str]]:
    """A CSV's rows as text ([] when the file does not exist)."""
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def parse_row(row: dict[str, str], text_columns: Sequence[str] = CHECKPOINT_TAIL) -> dict[str, Any]:
    """A CSV row back to numbers (ints stay ints); ``text_columns`` (paths, digests) stay text."""
    parsed: dict[str, Any] = {}
    for name, text in row.items():
        if name in text_columns:
            parsed[name] = text
            continue
        try:
            parsed[name] = int(text)
        except ValueError:
            parsed[name] = float(text)
    return parsed


def _parse_cell(text: str) -> float | None:
    if text.strip() == "":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        return None


def read_csv_columns(path: Path, required: Sequence[str] = (), *, numeric: bool = False) -> Columns:
    """Columns of a CSV as arrays: float64 where every cell is a number (empty -> NaN), str
    otherwise (paths). A row cut short (a truncated copy) is refused with its line number.
    ``numeric``: the file must also have a data row and numbers in every ``required`` column
    (what a metric is computed from)."""
    if not path.is_file():
        raise RunDirectoryNotFound(f"{path}: file not found (expected a CSV log of the run)")
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
        raise RunDirectoryError(f"{path}: line(s) {ragged[:5]} do not have {len(header)} fields (truncated write?)")
    columns: Columns = {}
    for index, name in enumerate(header):
        cells = [row[index] for row in rows]
        numbers = [_parse_cell(cell) for cell in cells]
        if all(number is not None for number in numbers):
            columns[name] = np.asarray(numbers, dtype=np.float64)
        else:
            columns[name] = np.asarray(cells, dtype=str)
    if numeric:
        if not rows:
            raise RunDirectoryError(f"{path}: no data rows; expected at least one row")
        for name in required:
            if columns[name].dtype.kind != "f":
                raise RunDirectoryError(f"{path}: column {name!r} holds a non-number")
    return columns


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


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz written by ``write_npz``; no pickle."""
    if not path.is_file():
        raise RunDirectoryNotFound(f"{path}: showcase trace not found (named in {CHECKPOINTS_CSV})")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (ValueError, OSError) as error:
        raise RunDirectoryError(f"{path}: not a readable .npz trace ({error})") from error


# --- the run directory -------------------------------------------------------------------------


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
        if fcntl is None or not self.lock_path.exists():
            return None
        with open(self.lock_path, "a+") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                return handle.read().strip() or "unknown"
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return None

    def lock(self) -> RunLock:
        """Holds the directory for this process until ``release``: a second process training
        into it at the same time would save the same checkpoints twice and mix their rows."""
        self.root.mkdir(parents=True, exist_ok=True)
        handle = open(self.lock_path, "a+")
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                pid = handle.read().strip() or "unknown"
                handle.close()
                raise RunDirectoryBusy(
                    f"{self.root} is in use by another running process (pid {pid}); wait for it to end "
                    "or stop it, then --resume"
                ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return RunLock(handle)


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
    first may be removed by --overwrite; the second belongs to the user."""
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
    seed_entries = {UPDATES_CSV, CHECKPOINTS_CSV}
    # and their temporaries; ".<name>.tmp" are those of runs written before atomic_output
    top |= {partial_name(name) for name in top} | {LOCK, *MANIFEST_TEMPORARIES}
    seed_entries |= {partial_name(name) for name in seed_entries} | {f".{name}.tmp" for name in seed_entries}
    seed_entries |= {"checkpoints", "showcase", "quarantine"}
    ours: list[Path] = []
    others: list[Path] = []

    def sort(directory: Path, allowed: set[str], descend: dict[str, Any]) -> None:
        for entry in sorted(directory.iterdir()):
            if entry.name in descend and entry.is_dir() and not entry.is_symlink():
                descend[entry.name](entry)
            elif entry.name in allowed:
                ours.append(entry)
            else:
                others.append(entry)

    def seed_dir(path: Path) -> None:
        sort(path, seed_entries, {})

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
    created = [root / task / seed_dir_name(seed) for task in tasks for seed in manifest["seeds"]]
    created += [root / task for task in tasks] + [root / FIGURES]
    for directory in created:  # the folders a run made, once emptied; never the user's
        if directory.is_dir() and not directory.is_symlink() and not any(directory.iterdir()):
            directory.rmdir()
    return others


class RunDirectoryBusy(FileExistsError):
    """Another live process is training in the run directory."""


@dataclass(frozen=True)
class RunLock:
    handle: Any

    def release(self) -> None:
        if fcntl is not None:
            fcntl.flock(self.handle.fileno(), fcntl.LOCK_UN)
        self.handle.close()


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages now (None where the platform has none): recorded
    beside a timing, since a busy machine explains a slow number."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment_description() -> dict[str, Any]:
    """Versions, platform and devices: what a reader needs to reproduce or judge a number."""
    import jax

    versions = {"python": sys.version.split()[0]}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "versions": versions,
        "git_revision": git_revision(),
        "platform": {
            "system": platform.platform(),
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpu_count": os.cpu_count(),
            "jax_backend": jax.default_backend(),
        },
        "devices": [str(device) for device in jax.devices()],
    }


def git_revision() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        revision = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if revision.returncode != 0:
        return None
    return revision.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
