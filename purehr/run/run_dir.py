"""The run directory of docs/protocol.md: paths, the manifest, and CSV/JSON written atomically
(write a temporary file, then rename) so a kill never leaves half a file behind."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Sequence

try:
    import fcntl
except ImportError:     # Windows: no advisory locks; one process per run directory is on the user
    fcntl = None

MANIFEST = "manifest.json"
LOCK = ".lock"
PACKAGES = ("jax", "jaxlib", "flax", "optax", "distrax", "chex", "orbax-checkpoint", "numpy",
            "matplotlib", "imageio", "imageio-ffmpeg")


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def format_value(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([format_value(row[column]) for column in columns])
    atomic_write_text(path, buffer.getvalue())


def read_csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@dataclass(frozen=True)
class RunDirectory:
    root: Path

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def seed_dir(self, task: str, seed: int) -> Path:
        return self.root / task / f"seed_{seed}"

    def updates_csv(self, task: str, seed: int) -> Path:
        return self.seed_dir(task, seed) / "updates.csv"

    def checkpoints_csv(self, task: str, seed: int) -> Path:
        return self.seed_dir(task, seed) / "checkpoints.csv"

    def checkpoint_dir(self, task: str, seed: int) -> Path:
        return self.seed_dir(task, seed) / "checkpoints"

    def showcase_path(self, task: str, seed: int, steps: int) -> Path:
        return self.seed_dir(task, seed) / "showcase" / f"steps_{steps}.npz"

    def read_manifest(self) -> dict[str, Any]:
        """The run's manifest; a manifest.json that is not a purehr run's is refused by name."""
        try:
            manifest = json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.root} is not a purehr run directory: no {MANIFEST}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise NotARunDirectory(f"{self.manifest_path} is not valid JSON ({error}); {self.root} does "
                                   "not hold a purehr run") from None
        missing = run_manifest_problem(manifest)
        if missing:
            raise NotARunDirectory(f"{self.manifest_path} is not a purehr run manifest ({missing}); "
                                   f"{self.root} does not hold a purehr run")
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

    def lock(self) -> "RunLock":
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
                    "or stop it, then --resume") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return RunLock(handle)


class NotARunDirectory(ValueError):
    """The directory (or its manifest.json) is not one a purehr run wrote."""


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
        raise NotADirectoryError(f"run directory {root} is a file, not a directory; expected a new "
                                 "directory or one holding a purehr run")
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
        raise PermissionError(f"run directory {root} cannot be written ({existing}: "
                              f"{error.strerror or error}); choose a directory you can write to") from None


def run_written_paths(root: Path, manifest: dict[str, Any]) -> tuple[list[Path], list[Path]]:
    """(the paths a purehr run writes that exist in ``root``, everything else in it). Only the
    first may be removed by --overwrite; the second belongs to the user."""
    tasks = [t for t in manifest.get("tasks", []) if isinstance(t, str)]
    seeds = [s for s in manifest.get("seeds", []) if isinstance(s, int)]
    figure_names = {"replay.mp4", "replay_poster.png", "replay_timeline.json", "replay.html"}
    figure_names |= {f"{task}_{kind}.{suffix}" for task in tasks for kind in ("learning", "training_log")
                     for suffix in ("png", "pdf")}
    figure_names |= {f".{Path(name).stem}.partial{Path(name).suffix}" for name in figure_names}
    top = {MANIFEST, LOCK, f".{MANIFEST}.tmp", "final_metrics.csv", ".final_metrics.partial.csv"}
    seed_entries = {"updates.csv", "checkpoints.csv", ".updates.csv.tmp", ".checkpoints.csv.tmp",
                    "checkpoints", "showcase", "quarantine"}
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
        sort(path, set(), {f"seed_{seed}": seed_dir for seed in seeds})

    def figures_dir(path: Path) -> None:
        sort(path, figure_names, {})

    sort(root, top, {**{task: task_dir for task in tasks}, "figures": figures_dir})
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
    created = [root / task / f"seed_{seed}" for task in tasks for seed in manifest["seeds"]]
    created += [root / task for task in tasks] + [root / "figures"]
    for directory in created:       # the folders a run made, once emptied; never the user's
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
        "platform": {"system": platform.platform(), "machine": platform.machine(),
                     "processor": platform.processor(), "cpu_count": os.cpu_count(),
                     "jax_backend": jax.default_backend()},
        "devices": [str(device) for device in jax.devices()],
    }


def git_revision() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        revision = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                  text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if revision.returncode != 0:
        return None
    return revision.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
