"""What one compiled group of a sweep yields: the sweep trains it (``sweep.train_group``), the
ranking reads it (``ranking``); its own module so that neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from purehr.algorithms.base import AlgorithmConfig


@dataclass
class GroupResult:
    """One compiled group: ``config`` (its shape choices applied), the settings, and per run
    (leading axis settings x seeds) the evaluation, the training metrics and ``diverged_at``:
    the first update whose losses or parameters were not finite (0: healthy; None: not known).
    A diverged run keeps its last finite parameters, so its evaluation is that frozen policy's.
    ``network``: a user's network (spec, file, source digest, one run's parameter shapes)."""

    name: str
    config: AlgorithmConfig
    settings: list[dict[str, float]]
    seeds: list[int]
    runner: Any  # the algorithm's state, leading run axis
    training_metrics: dict[str, np.ndarray]  # [run, update]
    evaluation: dict[str, np.ndarray]  # [run]
    timing: dict[str, float] = field(default_factory=dict)
    diverged_at: np.ndarray | None = None  # [run], int
    network: dict[str, Any] | None = None  # a user's network as a run records it (user_network.describe)

    def run_diverged_at(self, run: int) -> int:
        return 0 if self.diverged_at is None else int(self.diverged_at[run])

    def diverged_seeds(self, index: int) -> list[int]:
        """The seeds of setting ``index`` whose training diverged."""
        runs = range(self.num_runs)[self.setting_runs(index)]
        return [self.run_seed(run) for run in runs if self.run_diverged_at(run)]

    @property
    def num_runs(self) -> int:
        return len(self.settings) * len(self.seeds)

    def run_setting(self, run: int) -> dict[str, float]:
        return self.settings[run // len(self.seeds)]

    def run_seed(self, run: int) -> int:
        return self.seeds[run % len(self.seeds)]

    def setting_runs(self, index: int) -> slice:
        """The runs of setting ``index``: one per seed, consecutive (setting-major)."""
        return slice(index * len(self.seeds), (index + 1) * len(self.seeds))
