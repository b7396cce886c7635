"""The lock of a run directory: one live process trains in it at a time. The kernel drops an
advisory lock when its holder dies, SIGKILL included, so a stale lock file is free."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one process per run directory is on the user
    fcntl = None


class RunDirectoryBusy(FileExistsError):
    """Another live process is training in the run directory."""


@dataclass(frozen=True)
class RunLock:
    handle: Any

    def release(self) -> None:
        if fcntl is not None:
            fcntl.flock(self.handle.fileno(), fcntl.LOCK_UN)
        self.handle.close()


def _flock_or_holder(handle) -> str | None:
    """Takes the exclusive lock on ``handle`` without waiting; None when taken, else the pid
    (as text) the live holder wrote into the file."""
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        return handle.read().strip() or "unknown"
    return None


def lock_holder(lock_path: Path) -> str | None:
    """The pid (as text) of a live process holding ``lock_path``, else None."""
    if fcntl is None or not lock_path.exists():
        return None
    with open(lock_path, "a+") as handle:
        holder = _flock_or_holder(handle)
        if holder is None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return holder


def take_lock(root: Path, lock_path: Path) -> RunLock:
    """Holds ``root`` for this process until ``release``, writing its pid into ``lock_path``."""
    root.mkdir(parents=True, exist_ok=True)
    handle = open(lock_path, "a+")
    if fcntl is not None:
        holder = _flock_or_holder(handle)
        if holder is not None:
            handle.close()
            raise RunDirectoryBusy(
                f"{root} is in use by another running process (pid {holder}); wait for it to end "
                "or stop it, then --resume"
            )
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return RunLock(handle)
