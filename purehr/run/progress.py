"""A tqdm bar fed by the in-scan update callbacks: environment steps, steps per second and
the latest mean return of each task."""

from __future__ import annotations

import math
import sys

import numpy as np
from tqdm import tqdm


class Progress:
    def __init__(self, steps_per_update: dict[str, int], total_steps: int, done_steps: int = 0):
        self.steps_per_update = steps_per_update
        self.latest_return = {task: math.nan for task in steps_per_update}
        self.total_steps, self.done_steps = int(total_steps), int(done_steps)
        self.bar = None

    def start(self) -> None:
        """The bar appears once compilation has ended, so its rate is training speed."""
        self.bar = tqdm(total=self.total_steps, initial=self.done_steps, unit="step", unit_scale=True,
                        file=sys.stderr, dynamic_ncols=True, mininterval=1.0)

    def on_update(self, task: str, metrics: dict) -> None:
        returns = np.asarray(metrics["mean_episode_return"], dtype=float)
        if np.isfinite(returns).any():
            self.latest_return[task] = float(np.nanmean(returns))
        self.bar.set_postfix({f"{t} return": f"{r:.3g}" for t, r in self.latest_return.items()}, refresh=False)
        self.bar.update(self.steps_per_update[task])

    def on_checkpoint(self, task: str, evaluation: dict) -> None:
        success = float(np.mean(np.asarray(evaluation["success_rate"])))
        self.bar.write(f"checkpoint {task}: held-out success {success:.2f} (mean over seeds)")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
