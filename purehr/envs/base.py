"""The functional environment interface every purehr task implements.

Environments hold no state: ``reset`` and ``step`` are pure functions of a key, a state and
a params pytree, so they can be jitted, vmapped over seeds and scanned over time, and the
params (difficulty, physics constants) can change inside a training scan.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import jax

StateT = TypeVar("StateT")
ParamsT = TypeVar("ParamsT")

# (observation, state, reward, terminated, truncated, info)
StepResult = tuple[Any, Any, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]


class Environment(Generic[StateT, ParamsT]):
    """Base class. ``info`` always holds the same keys with the same shapes (scan needs it);
    it includes ``success`` (bool) for every task."""

    name: str = "environment"

    @property
    def default_params(self) -> ParamsT:
        raise NotImplementedError

    def reset(self, key: jax.Array, params: ParamsT | None = None) -> tuple[Any, StateT]:
        raise NotImplementedError

    def step(self, key: jax.Array, state: StateT, action: jax.Array,
             params: ParamsT | None = None) -> StepResult:
        raise NotImplementedError

    def observation_space(self, params: ParamsT | None = None):
        raise NotImplementedError

    def action_space(self, params: ParamsT | None = None):
        raise NotImplementedError

    def max_episode_steps(self, params: ParamsT | None = None) -> int:
        raise NotImplementedError

    def diagnostics(self, info: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """Task-specific per-step scalars to average into the training log (see docs/protocol.md)."""
        return {}
