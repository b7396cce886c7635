"""Orbax checkpoints, one manager per task and seed, with a digest per checkpoint so a
corrupted one is detected even when Orbax would restore it without complaint."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import re
import shutil
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from purehr.run.store.run_dir import is_orbax_entry

CHECKPOINT_OVERHEAD_BYTES = 16_000  # Orbax's metadata files and OCDBT's manifest, per checkpoint

DIGEST = re.compile(r"^[0-9a-f]{64}$")
"""A ``state_digest`` cell: the SHA-256 of ``tree_digest``, in hex."""


class CorruptCheckpointError(RuntimeError):
    """A checkpoint that is missing, half-written, unreadable, unverifiable or whose contents changed."""


class CheckpointNotShipped(CorruptCheckpointError):
    """A published record lists the checkpoint (with its metrics) but does not ship it: nothing
    is damaged, the record keeps each seed's last checkpoint only."""


def tree_digest(tree: Any) -> str:
    """SHA-256 over every leaf's dtype, shape and bytes, in pytree order."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        array = np.ascontiguousarray(np.asarray(leaf))
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def verify_readable(path: Path) -> None:
    """Reads every array of an OCDBT checkpoint synchronously, before Orbax does.

    Why: Orbax restores all arrays concurrently in a fresh asyncio loop that it closes as soon
    as one read fails; the reads still in flight then complete into the closed loop and
    TensorStore prints an "Event loop is closed" traceback for each (about 100 lines after
    the one useful error). Read here with blocking TensorStore calls, damage (a checksum
    failure, a truncated or missing file) surfaces as one clear error and Orbax only ever
    reads a checkpoint that reads. A checkpoint in another layout is left to Orbax."""
    try:
        for array in _ocdbt_arrays(path).values():
            array.read().result()
    except Exception as error:  # TensorStore raises ValueError, OSError and others for damaged files
        raise CorruptCheckpointError(
            f"checkpoint {path} cannot be read: {type(error).__name__}: {str(error).splitlines()[0][:400]}"
        ) from None


def check_free_space(directory: Path, pending: int, state_bytes: int) -> None:
    """Raises OSError(ENOSPC), one line naming the folder and the space, when the disk cannot
    hold ``pending`` checkpoints of ``state_bytes`` (twice that, plus Orbax's metadata).

    Why: an Orbax save that runs out of space mid-write fails in its asyncio threads, and the
    writes still in flight then report into the closed loop: about 100 "Event loop is closed"
    tracebacks before the run's own one-line error (issue 48). Refused before Orbax writes,
    the run stops with that line alone, its earlier checkpoints intact for --resume."""
    needed = pending * (2 * state_bytes + CHECKPOINT_OVERHEAD_BYTES)
    free = shutil.disk_usage(directory).free
    if free < needed:
        what = "this checkpoint needs" if pending == 1 else f"{pending} checkpoints of this event need"
        raise OSError(
            errno.ENOSPC,
            f"No space left on device for a checkpoint: {directory} has {free / 1e6:.1f} MB free, "
            f"{what} about {needed / 1e6:.1f} MB",
        )


def _ocdbt_arrays(path: Path) -> dict[str, Any]:
    """Every array of an OCDBT checkpoint, opened (not read) with TensorStore, by the name
    Orbax gave it (the dotted path of the leaf: ``params.params.actor.Dense_0.kernel``); {}
    for a checkpoint in another layout."""
    import tensorstore as ts

    root = Path(path).absolute() / "default"
    if not (root / "manifest.ocdbt").is_file():
        return {}
    base = {"driver": "ocdbt", "base": f"file://{root}/"}
    keys = ts.KvStore.open(base).result().list().result()
    names = sorted(
        {key.decode().rsplit("/", 1)[0] for key in keys if key.endswith(b"/.zarray") or key.endswith(b"/zarr.json")}
    )
    arrays = {}
    for name in names:
        driver = "zarr" if f"{name}/.zarray".encode() in keys else "zarr3"
        arrays[name] = ts.open({"driver": driver, "kvstore": dict(base, path=f"{name}/")}, open=True).result()
    return arrays


def stored_form(state: Any) -> Any:
    """What a checkpoint holds of ``state``: an algorithm state's fields as a mapping, without
    the fields that hold nothing (PPO's recurrent carry for a feed-forward policy, ``()``).
    Checkpoints written before that carry existed hold exactly these names, so they restore
    unchanged; a digest is over leaves, which an empty field has none of."""
    if not dataclasses.is_dataclass(state):
        return state
    fields = {field.name: getattr(state, field.name) for field in dataclasses.fields(state)}
    return {name: value for name, value in fields.items() if jax.tree.leaves(value)}


def from_stored_form(stored: Any, like: Any) -> Any:
    """The inverse of ``stored_form`` for a state shaped like ``like``."""
    if not dataclasses.is_dataclass(like):
        return stored
    return like.replace(**stored)


def leaf_name(path: tuple) -> str:
    """A leaf's pytree path as Orbax names its array (attribute, key or index, joined by dots)."""
    return ".".join(str(getattr(key, "name", getattr(key, "key", getattr(key, "idx", key)))) for key in path)


def shape_mismatches(path: Path, abstract_state: Any) -> list[str] | None:
    """How the arrays saved in checkpoint ``path`` differ from ``abstract_state`` (the state the
    manifest's settings build), in words ([] when they agree), read from the checkpoint's
    metadata alone; None when that cannot be read (damage is for ``restore`` to report)."""
    try:
        saved = {name: tuple(array.shape) for name, array in _ocdbt_arrays(path).items()}
    except Exception:  # damaged metadata: not a disagreement
        return None
    if not saved:
        return None
    expected = {leaf_name(p): tuple(leaf.shape) for p, leaf in jax.tree_util.tree_flatten_with_path(abstract_state)[0]}
    problems = [f"{name} has no array in the checkpoint" for name in expected if name not in saved]
    problems += [
        f"the checkpoint holds {name}, which these settings do not build" for name in saved if name not in expected
    ]
    problems += [
        f"{name} is saved with shape {saved[name]}, these settings build {expected[name]}"
        for name in expected
        if name in saved and saved[name] != expected[name]
    ]
    return problems


class SeedCheckpoints:
    """The checkpoints of one task and seed: ``<seed dir>/checkpoints/<env steps>/``.
    ``read_only`` opens them for reading only: nothing is created, saved or cleaned up, and a
    missing folder is an error (a read never writes)."""

    def __init__(self, directory: Path, asynchronous: bool = True, read_only: bool = False):
        self.directory = Path(directory)
        if read_only:
            if not self.directory.is_dir():
                raise CorruptCheckpointError(f"checkpoint folder {self.directory} is missing")
            # not Orbax's read_only option: that logs a warning on every open
            options = ocp.CheckpointManagerOptions(
                max_to_keep=None,
                enable_async_checkpointing=False,
                create=False,
                multiprocessing_options=self._only_this_process(),
            )
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            options = ocp.CheckpointManagerOptions(
                max_to_keep=None,
                enable_async_checkpointing=asynchronous,
                create=jax.process_count() == 1,  # made above
                multiprocessing_options=self._only_this_process(),
            )
        self._manager = ocp.CheckpointManager(self.directory.absolute(), options=options)

    def _only_this_process(self) -> ocp.options.MultiprocessingOptions:
        """Under ``jax.distributed`` only process 0 saves (the callbacks that carry every
        seed's state run there): its managers are its own primary host and wait at no barrier
        for the other processes, which never call them (Orbax's default would hang)."""
        if jax.process_count() == 1:
            return ocp.options.MultiprocessingOptions()
        me = jax.process_index()
        return ocp.options.MultiprocessingOptions(
            primary_host=me,
            active_processes={me},
            barrier_sync_key_prefix=hashlib.sha256(str(self.directory.absolute()).encode()).hexdigest()[:16],
        )

    def save(self, steps: int, state: Any, pending: int = 1) -> str:
        """Starts an asynchronous save and returns the state's digest. ``pending``: the
        checkpoints of this event still to save, this one included (``check_free_space``)."""
        if steps in self._manager.all_steps():
            raise FileExistsError(f"checkpoint {self.path(steps)} already exists; refusing to overwrite it")
        check_free_space(self.directory, pending, sum(np.asarray(leaf).nbytes for leaf in jax.tree.leaves(state)))
        self._manager.save(steps, args=ocp.args.StandardSave(stored_form(state)))
        return tree_digest(state)

    def steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def path(self, steps: int) -> Path:
        return self.directory / str(steps)

    def restore(self, steps: int, abstract_state: Any, expected_digest: str) -> Any:
        """The state saved at ``steps``, verified against ``expected_digest`` (checkpoints.csv's
        ``state_digest``): a checkpoint without a valid digest cannot be verified, so it is
        refused as damaged rather than trusted."""
        path = self.path(steps)
        if steps not in self._manager.all_steps():
            raise CorruptCheckpointError(f"checkpoint {path} is missing or was never completed")
        if not isinstance(expected_digest, str) or not DIGEST.match(expected_digest):
            raise CorruptCheckpointError(
                f"checkpoint {path} has no valid state digest in checkpoints.csv ({expected_digest!r}; expected "
                "64 hex digits): it cannot be verified, so it is not restored"
            )
        verify_readable(path)
        if jax.process_count() > 1:  # host arrays: a jax.Array target would ask every process to join
            abstract_state = jax.tree.map(lambda leaf: np.zeros(leaf.shape, leaf.dtype), abstract_state)
        try:
            stored = self._manager.restore(steps, args=ocp.args.StandardRestore(stored_form(abstract_state)))
            state = from_stored_form(stored, abstract_state)
        except Exception as error:  # Orbax raises many kinds for damaged files
            raise CorruptCheckpointError(f"checkpoint {path} cannot be read: {type(error).__name__}: {error}") from None
        if tree_digest(state) != expected_digest:
            raise CorruptCheckpointError(f"checkpoint {path} does not match the digest recorded when it was saved")
        return state

    def unfinished(self) -> list[str]:
        """Orbax's names in the folder that are not completed checkpoints: saves a killed
        process left half-written (``<steps>.orbax-checkpoint-tmp-*``)."""
        finished = {str(steps) for steps in self._manager.all_steps()}
        return sorted(
            entry.name
            for entry in self.directory.iterdir()
            if entry.name not in finished and is_orbax_entry(entry.name)
        )

    def foreign(self) -> list[str]:
        """Names in the folder that Orbax never writes (a user's notes, a copy): left alone."""
        return sorted(entry.name for entry in self.directory.iterdir() if not is_orbax_entry(entry.name))

    def quarantine(self, steps: int, reason: str) -> Path:
        """Moves a checkpoint out of Orbax's sight (never deletes it) and says where."""
        return self.quarantine_entry(str(steps), reason)

    def quarantine_entry(self, name: str, reason: str) -> Path:
        """Moves ``<checkpoints>/<name>`` (a checkpoint, a half-written save) to the seed's
        ``quarantine/`` under a name no earlier resume used, with the reason beside it."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
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
