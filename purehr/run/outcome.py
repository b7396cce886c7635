"""How a call of ``train_all_seeds`` ends: a ``RunSummary``, or the error that says how the
run stopped, each matching the status the manifest then records ("failed", "diverged",
"interrupted")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from purehr.run.compiled.train_all import TaskSetup


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
    """Ctrl-C (SIGINT) stopped the run; the manifest says "interrupted" (or "finished" where
    training had ended) and ``resume`` continues it from ``resumes_from`` (task -> env steps of
    the checkpoint it continues from) bit-identically. A ``KeyboardInterrupt``, so code that
    lets Ctrl-C through lets this through. ``at_once``: a second Ctrl-C, which did not wait
    for the program to stop; it may still be running in this process, so exit it."""

    def __init__(self, message: str, resumes_from: dict[str, int], at_once: bool = False):
        super().__init__(message)
        self.resumes_from = resumes_from
        self.at_once = at_once


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
