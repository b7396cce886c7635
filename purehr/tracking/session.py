"""``Tracking``: the backends of one run, fed from the host callbacks without holding them up.

The callbacks hand each update's rows over and return; a worker thread per backend writes them
in the order they came (off the device's critical path: a compiled program waits for
its io_callbacks, not for TensorBoard or W&B). A backend that fails (a full disk, a bad W&B
entity, no network in online mode) is said once and dropped; the training run and its CSV
files go on untouched."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from purehr.tracking.backend import Backend
from purehr.tracking.naming import SUCCESS_TAGS, heldout_scalars, history, update_scalars
from purehr.tracking.settings import TrackingSettings
from purehr.tracking.tensorboard import TensorBoardBackend
from purehr.tracking.weights_and_biases import WandbBackend


def make_backends(settings: TrackingSettings, run_dir: Path, group: str) -> list[Backend]:
    backends: list[Backend] = []
    for name in settings.backends:
        if name == "tensorboard":
            backends.append(TensorBoardBackend(settings.tensorboard_dir(run_dir)))
        elif name == "wandb":
            mode = settings.resolved_wandb_mode()
            backends.append(WandbBackend(run_dir, mode, settings.wandb_project, settings.wandb_entity, group))
    return backends


def start_tracking(
    settings: TrackingSettings,
    directory: Path,
    group: str,
    runs: dict[tuple[str, int], dict[str, Any]],
    kept: dict[tuple[str, int], tuple[list, list]] | None = None,
    say: Callable[[str], None] | None = None,
) -> Tracking:
    """A ``Tracking`` of ``settings``' backends with ``runs`` opening (``Tracking.open``):
    TensorBoard under ``settings.tensorboard_dir(directory)``, W&B's files in ``directory/wandb``,
    its runs grouped as ``group``."""
    tracking = Tracking(make_backends(settings, directory, group), say)
    tracking.open(runs, kept or {})
    return tracking


class Tracking:
    """Every backend of a run. ``open`` the task x seed runs, then ``update`` / ``checkpoint``
    rows (the CSV rows), ``sync`` before a checkpoint's index is written, ``close`` at the end.

    Each backend has its own worker thread and queue, so one that stalls (W&B online without a
    network waits for its timeout) holds up neither the training nor the other backends."""

    CLOSE_TIMEOUT_S = 180.0

    def __init__(self, backends: Iterable[Backend], say: Callable[[str], None] | None = None):
        self.backends = list(backends)
        self.say = say or (lambda message: print(message, file=sys.stderr, flush=True))
        self.failed: dict[str, str] = {}  # backend -> what stopped it
        self._queues = [queue.Queue() for _ in self.backends]  # one per backend, in order
        self._no_success: set[tuple[str, int]] = set()  # runs whose task defines no success
        self._workers = [
            threading.Thread(target=self._work, args=(backend, jobs), name=f"purehr-{backend.name}", daemon=True)
            for backend, jobs in zip(self.backends, self._queues)
        ]
        for worker in self._workers:
            worker.start()

    # --- what the run calls ----------------------------------------------------------------
    def open(self, runs: dict[tuple[str, int], dict[str, Any]], kept: dict[tuple[str, int], tuple[list, list]]) -> None:
        """Starts every task x seed's run (``runs``: its config, identity, W&B id and resume
        step; ``defines_success`` False: its success tags are never logged) and logs the rows a
        resume kept that a backend does not hold yet (``kept``: (update rows, checkpoint rows)).
        Runs on the workers: it overlaps the compilation."""
        self._no_success.update(key for key, run in runs.items() if not run.get("defines_success", True))
        for (task, seed), run in runs.items():
            self._each("open", lambda backend, t=task, s=seed, r=run: backend.open(t, s, r))
        for (task, seed), (update_rows, checkpoint_rows) in kept.items():
            for step, scalars in history(update_rows, checkpoint_rows):
                self._log(task, seed, step, scalars)

    def update(self, task: str, seed: int, row: dict[str, Any]) -> None:
        self._log(task, seed, int(row["env_steps"]), update_scalars(row))

    def updates(self, task: str, seeds: list[int], metrics: dict[str, Any]) -> None:
        """One update of every seed: ``make_train``'s callback metrics ([seeds] arrays, with
        ``env_steps``), seed ``seeds[i]`` at index i."""
        for index, seed in enumerate(seeds):
            self.update(task, seed, {name: np.asarray(value)[index].item() for name, value in metrics.items()})

    def make_train_callback(self, task: str, seeds: list[int]) -> Callable[[dict[str, Any]], None]:
        """``make_train(..., callback=tracking.make_train_callback("cartpole", [0, 1]))``: every
        update of those seeds logged (``updates``)."""
        return lambda metrics: self.updates(task, seeds, metrics)

    def checkpoint(self, task: str, seed: int, row: dict[str, Any]) -> None:
        self._log(task, seed, int(row["actual_steps"]), heldout_scalars(row))

    def publish(self, task: str, seed: int, step: int, table: str, images: dict[str, Path]) -> None:
        self._each("publish", lambda backend: backend.publish(task, seed, step, table, images))

    def sync(self) -> None:
        """Waits until the backends that must never lag a resume point (``Backend.synced``:
        TensorBoard) have written and flushed every row handed over; the others are read back
        on a resume instead, and never waited for."""
        self._each("flush", lambda backend: backend.flush())
        for backend, jobs in zip(self.backends, self._queues):
            if backend.synced:
                jobs.join()

    def close(self) -> None:
        """Writes what is left, ends every backend's runs and stops the workers (a backend
        still stuck after ``CLOSE_TIMEOUT_S`` is said and left behind)."""
        self._each("close", lambda backend: backend.close())
        for jobs in self._queues:
            jobs.put(None)
        for backend, worker in zip(self.backends, self._workers):
            worker.join(self.CLOSE_TIMEOUT_S)
            if worker.is_alive():
                self.say(f"warning: {backend.name} did not finish within {self.CLOSE_TIMEOUT_S:.0f} s; left behind")

    # --- the workers -----------------------------------------------------------------------
    def _log(self, task: str, seed: int, step: int, scalars: dict[str, float]) -> None:
        if (task, seed) in self._no_success:
            scalars = {tag: value for tag, value in scalars.items() if tag not in SUCCESS_TAGS}
        if scalars:
            self._each("log", lambda backend: backend.log(task, seed, step, scalars))

    def _each(self, what: str, job: Callable[[Backend], None]) -> None:
        for jobs in self._queues:
            jobs.put((what, job))

    def _work(self, backend: Backend, jobs: queue.Queue) -> None:
        while True:
            item = jobs.get()
            try:
                if item is None:
                    return
                if backend.name not in self.failed:
                    self._run(backend, *item)
            finally:
                jobs.task_done()

    def _run(self, backend: Backend, what: str, job: Callable[[Backend], None]) -> None:
        try:
            job(backend)
        except Exception as error:  # a dashboard must never stop or corrupt the training run
            reason = f"{type(error).__name__}: {error}"
            self.failed[backend.name] = reason
            self.say(
                f"warning: {backend.name} logging failed ({what}: {reason}); it is off for the rest of "
                "this run, which goes on (updates.csv and checkpoints.csv hold everything)"
            )
