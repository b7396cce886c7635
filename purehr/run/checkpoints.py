"""Orbax checkpoints, one manager per task and seed, with a digest per checkpoint so a
corrupted one is detected even when Orbax would restore it without complaint."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp


class CorruptCheckpointError(RuntimeError):
    """A checkpoint that is missing, half-written, unreadable or whose contents changed."""


def tree_digest(tree: Any) -> str:
    """SHA-256 over every leaf's dtype, shape and bytes, in pytree order."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        array = np.ascontiguousarray(np.asarray(leaf))
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


class SeedCheckpoints:
    """The checkpoints of one task and seed: ``<seed dir>/checkpoints/<env steps>/``."""

    def __init__(self, directory: Path, asynchronous: bool = True):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._manager = ocp.CheckpointManager(
            self.directory.absolute(),
            options=ocp.CheckpointManagerOptions(max_to_keep=None, enable_async_checkpointing=asynchronous,
                                                 create=True))

    def save(self, steps: int, state: Any) -> str:
        """Starts an asynchronous save and returns the state's digest."""
        if steps in self._manager.all_steps():
            raise FileExistsError(f"checkpoint {self.path(steps)} already exists; refusing to overwrite it")
        self._manager.save(steps, args=ocp.args.StandardSave(state))
        return tree_digest(state)

    def steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def path(self, steps: int) -> Path:
        return self.directory / str(steps)

    def restore(self, steps: int, abstract_state: Any, expected_digest: str | None = None) -> Any:
        path = self.path(steps)
        if steps not in self._manager.all_steps():
            raise CorruptCheckpointError(f"checkpoint {path} is missing or was never completed")
        try:
            state = self._manager.restore(steps, args=ocp.args.StandardRestore(abstract_state))
        except Exception as error:  # Orbax raises many kinds for damaged files
            raise CorruptCheckpointError(f"checkpoint {path} cannot be read: {type(error).__name__}: {error}") from None
        if expected_digest is not None and tree_digest(state) != expected_digest:
            raise CorruptCheckpointError(f"checkpoint {path} does not match the digest recorded when it was saved")
        return state

    def unfinished(self) -> list[str]:
        """Names in the folder that are not completed checkpoints: saves a killed process left
        half-written (``<steps>.orbax-checkpoint-tmp-*``) and anything else Orbax would not list."""
        finished = {str(steps) for steps in self._manager.all_steps()}
        return sorted(entry.name for entry in self.directory.iterdir() if entry.name not in finished)

    def quarantine(self, steps: int, reason: str) -> Path:
        """Moves a checkpoint out of Orbax's sight (never deletes it) and says where."""
        return self.quarantine_entry(str(steps), reason)

    def quarantine_entry(self, name: str, reason: str) -> Path:
        """Moves ``<checkpoints>/<name>`` (a checkpoint, a half-written save) to the seed's
        ``quarantine/`` under a name no earlier resume used, with the reason beside it."""
        stamp = time.strftime('%Y%m%dT%H%M%S')
        target = self.directory.parent / "quarantine" / f"{name}-{stamp}"
        number = 1
        while target.exists():
            target = target.with_name(f"{name}-{stamp}-{number}")
            number += 1
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(self.directory / name), str(target))
        note = target / "REASON.txt" if target.is_dir() else target.with_name(target.name + ".REASON.txt")
        note.write_text(reason + "\n")
        self._manager.reload()
        return target

    def finish(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()
