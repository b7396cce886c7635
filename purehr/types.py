"""The type aliases several layers share, in one place. A leaf: it imports nothing of purehr,
and neither JAX nor numpy at run time (JAX-free modules such as ``purehr.run.store.files`` import
it), so the array types are written as strings a type checker resolves."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import jax
    import numpy as np

StepResult: TypeAlias = tuple[Any, Any, "jax.Array", "jax.Array", "jax.Array", dict[str, "jax.Array"]]
"""What ``Environment.step`` returns: (observation, state, reward, terminated, truncated, info)."""

Policy: TypeAlias = Callable[[Any, "jax.Array", "jax.Array"], "jax.Array"]
"""``policy(observation, t, key) -> action`` for one unbatched observation: ``t`` is the step
index in the episode (int32), ``key`` a PRNG key for a stochastic policy (a deterministic one
ignores it). Every baseline takes this shape, and ``PPO.policy(network_params)`` of a
feed-forward network returns it; a pure function, so it runs under jit and vmap.
A policy with memory is a ``purehr.envs.policies.RecurrentPolicy`` (``initial_state`` and
``step(state, observation, t, key) -> (action, state)``): every held-out evaluation and
showcase recorder takes either, running a feed-forward one through ``as_recurrent`` (the
empty state ``()``, so its compiled program is unchanged)."""

EnvParamsSchedule: TypeAlias = Callable[[Any, "jax.Array"], Any]
"""``schedule(env_params, update_index) -> env_params`` for that update (a curriculum); the
update index is int32 and 0-based, traced inside the scan over updates."""

Evaluation: TypeAlias = Callable[..., dict[str, "jax.Array"]]
"""``evaluation(env, env_params, policy, num_episodes=..., seed=...) -> metrics`` (pure, jittable)."""

HostCallback: TypeAlias = Callable[[dict[str, "np.ndarray"]], Any]
"""``callback(metrics)`` on the host with an update's metrics (NumPy, [seeds], plus
``env_steps``) while training runs; returning ``False`` stops training at the next update."""

Columns: TypeAlias = dict[str, "np.ndarray"]
"""A CSV log read as columns: {column name: array over the rows}."""
