"""What one compiled group of a sweep yields: the sweep trains it (``sweep.train_group``), the
ranking reads it (``ranking``); its own module so that neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from purehr.ppo.algorithm import RunnerState
from purehr.ppo.config import PPOConfig


@dataclass
class GroupResult:
    """One compiled group: ``config`` (its shape choices applied), the settings, and per run
    (leading axis settings x seeds) the evaluation and the training metrics."""

    name: str
    config: PPOConfig
    settings: list[dict[str, float]]
    seeds: list[int]
    runner: RunnerState
    training_metrics: dict[str, np.ndarray]  # [run, update]
    evaluation: dict[str, np.ndarray]  # [run]
    timing: dict[str, float] = field(default_factory=dict)

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
