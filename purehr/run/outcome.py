"""How a call of ``train_all_seeds`` ends: a ``RunSummary``, or the error that says how the
run stopped, each matching the status the manifest then records ("failed", "diverged",
"interrupted")."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from purehr.run.compiled.train_all import TaskSetup
from purehr.run.store.run_dir import RunDirectory, describe_divergences, environment_advice, nonfinite_before


@dataclass(frozen=True)
class RunSummary:
    run_dir: Path
    wall_time_s: float
    compile_s: float
    resumed_from: dict[str, int]
    seconds_in_checkpoint_callbacks: float
    seconds_in_evaluation: float
    final_runners: dict[str, Any]  # task -> RunnerState with a leading seed axis
    seconds_writing_checkpoints: float = 0.0  # in the writer's thread, while the program trained on
    tracking: Any = None  # the dashboards, still open (``keep_dashboards_open``): the caller closes them


class RunFailed(RuntimeError):
    """Training stopped on an error (a checkpoint that could not be saved); the manifest says
    "failed" with the reason, and the run can be continued with ``resume``."""


class RunDiverged(RuntimeError):
    """Training ran to the end, but some seeds' losses or parameters became NaN or infinite;
    those seeds stopped updating there (frozen), the manifest says "diverged" and lists them
    (``diverged``: task -> seed -> first diverged update and its env steps). Not a finished result."""

    def __init__(self, message: str, diverged: dict[str, dict[str, dict[str, int]]]):
        super().__init__(message)
        self.diverged = diverged


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM stopped the run; the manifest says "interrupted" (or "finished" where
    training had ended) and ``resume`` continues it from ``resumes_from`` (task -> env steps of
    the checkpoint it continues from) bit-identically. A ``KeyboardInterrupt``, so code that
    lets Ctrl-C through lets this through. ``at_once``: a second Ctrl-C, which did not wait
    for the program to stop; it may still be running in this process, so exit it."""

    def __init__(self, message: str, resumes_from: dict[str, int], at_once: bool = False):
        super().__init__(message)
        self.resumes_from = resumes_from
        self.at_once = at_once


_HEARD: list[str] = []  # the stop signals the run in this process heard ("SIGTERM")
_INSTALLED: list[bool] = []  # sigterm_stops_the_run is in force


@contextlib.contextmanager
def sigterm_stops_the_run() -> Iterator[bool]:
    """SIGTERM (``kill``, a scheduler, ``docker stop``) is heard as Ctrl-C is, a
    ``KeyboardInterrupt`` in the main thread: the run stops at its next update, is marked
    "interrupted" and says how to resume, instead of dying with its manifest "running". Yields
    whether it is installed: only in the main thread (Python runs handlers there alone) and
    where SIGTERM has its default action (a caller's own handler is left alone)."""
    _HEARD.clear()
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield False
        return

    def heard(signum, frame) -> None:
        _HEARD.append("SIGTERM")
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, heard)
    _INSTALLED.append(True)
    try:
        yield True
    finally:
        _INSTALLED.pop()
        signal.signal(signal.SIGTERM, previous)


def sigterm_handled() -> bool:
    """Whether SIGTERM stops the run in this process at its next update (``sigterm_stops_the_run``)."""
    return bool(_INSTALLED)


def stop_signal_name() -> str:
    """What stopped the run in this process, in words: "SIGTERM", else "Ctrl-C" (SIGINT)."""
    return _HEARD[-1] if _HEARD else "Ctrl-C"


def sigint_ignored() -> bool:
    """SIGINT is ignored in this process (a job started with ``&`` by a non-interactive shell):
    Ctrl-C cannot stop it, SIGTERM can (``sigterm_stops_the_run``)."""
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def diverged_seeds(setups: list[TaskSetup], seeds: list[int], runners: dict) -> dict[str, dict[str, dict[str, int]]]:
    """task -> seed (a string, as JSON keys are) -> the first update whose losses or parameters
    were not finite and its env steps, read from the final states (a diverged seed's
    optimiser stopped counting there); tasks without a diverged seed are left out."""
    diverged = {}
    for setup in setups:
        first = np.asarray(setup.algorithm.diverged_at_update(runners[setup.name]))
        per_seed = {
            str(seed): {"update": int(update), "env_steps": int(update) * setup.config.batch_size}
            for seed, update in zip(seeds, first)
            if update > 0
        }
        if per_seed:
            diverged[setup.name] = per_seed
    return diverged


def population_divergences(setups: list[TaskSetup], seeds: list[int], update_rows: dict, checkpoint_rows: dict) -> dict:
    """A PBT run's ``diverged``: task -> seed -> its first divergence (``update``, ``env_steps``,
    as ``diverged_seeds`` says it) and ``divergences``, every one: a member frozen at a
    divergence is later given another member's weights by the PBT step, which ends it (the
    final state no longer shows it), and may diverge again. Read from the rows the run logged
    (``update_rows``: updates.csv's ``diverged_at_update``; ``checkpoint_rows``: the first
    checkpoint at or after it where ``pbt_parent`` is another seed replaced it; None: frozen to
    the end). Each task -> seed -> rows; tasks without a diverged member are left out."""
    diverged = {}
    for setup in setups:
        batch, per_seed = setup.config.batch_size, {}
        for seed in seeds:
            updates = sorted({int(row.get("diverged_at_update", 0)) for row in update_rows[setup.name][seed]} - {0})
            if not updates:
                continue
            checkpoints = sorted(checkpoint_rows[setup.name][seed], key=lambda row: row["update"])
            events = [_divergence(update, seed, checkpoints, batch) for update in updates]
            per_seed[str(seed)] = {"update": updates[0], "env_steps": updates[0] * batch, "divergences": events}
        if per_seed:
            diverged[setup.name] = per_seed
    return diverged


def _divergence(update: int, seed: int, checkpoints: list[dict], batch: int) -> dict[str, int | None]:
    """One divergence of ``seed`` at ``update`` and the PBT step that replaced it (None: none)."""
    replaced = next(
        (row for row in checkpoints if row["update"] >= update and int(row.get("pbt_parent", seed)) != seed), None
    )
    return {
        "update": update,
        "env_steps": update * batch,
        "replaced_at_update": None if replaced is None else int(replaced["update"]),
        "replaced_at_steps": None if replaced is None else int(replaced["actual_steps"]),
        "replaced_by_seed": None if replaced is None else int(replaced["pbt_parent"]),
    }


def diverged_error(
    run_dir: RunDirectory, diverged: dict[str, dict[str, dict]], pbt: bool = False, update_rows: dict | None = None
) -> RunDiverged:
    """The error of a run that trained to its end with some seeds diverged (not a result); a
    PBT run's also where the PBT step replaced every diverged member (docs/pbt.md). Where the
    environment produced non-finite rewards or observations before (``update_rows``: task ->
    seed -> updates.csv's rows), it says so first: the environment, not the learning rate, is
    then the first suspect."""
    environment = [
        f"{task} seed {seed}: {environment_advice(nonfinite_before(update_rows[task][int(seed)], first['update']))}"
        for task, per_seed in diverged.items()
        for seed, first in per_seed.items()
        if update_rows and nonfinite_before(update_rows[task][int(seed)], first["update"])
    ]
    start = f"{'; '.join(environment)}; then start" if environment else "Start"
    if pbt:
        what = (
            "a loss or parameter became NaN or infinite, and each of those members kept its last finite "
            "parameters until a PBT step gave it another member's weights (or to the end). "
            f"{run_dir.root} is marked diverged in manifest.json (and updates.csv, column diverged_at_update; "
            "checkpoints.csv, column pbt_diverged_at_update); it is not a finished result, even where every "
            f"member ended healthy. {start} a new run with narrower --pbt-bounds or other settings"
        )
    else:
        what = (
            "a loss or parameter became NaN or infinite, and those seeds kept their last finite parameters "
            f"from then on. {run_dir.root} is marked diverged in manifest.json (and updates.csv, column "
            f"diverged_at_update); it is not a finished result. {start} a new run with a smaller learning rate "
            "or other settings"
        )
    return RunDiverged(f"training diverged: {describe_divergences(diverged)}: {what}", diverged)
