"""Policies with memory, in the shape every evaluation loop runs.

A feed-forward policy is ``policy(observation, t, key) -> action`` (``purehr.types.Policy``). A
recurrent one carries a state from step to step within an episode: ``RecurrentPolicy`` holds
the state an episode starts from and ``step(state, observation, t, key) -> (action, state)``.
Every loop that runs episodes (held-out evaluations, showcases, floors) goes through
``as_recurrent``, which gives a feed-forward policy the empty state ``()``: the loop's carry
gains no array, so its compiled program is the one it was (docs/recurrent.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from purehr.envs.base import varying_with
from purehr.types import Policy

PolicyStep = Callable[[Any, Any, jax.Array, jax.Array], tuple[jax.Array, Any]]
"""``step(state, observation, t, key) -> (action, next state)`` for one unbatched observation."""


@dataclass(frozen=True)
class RecurrentPolicy:
    """A policy with memory: each episode starts from ``initial_state`` (a pytree for one
    episode, e.g. a GRU's zero hidden state [width]); ``step`` acts and returns the next state.
    Pure, so it runs under jit and vmap like a feed-forward policy."""

    initial_state: Any
    step: PolicyStep

    def __call__(self, observation, t, key):
        raise TypeError(
            "a recurrent policy acts with its state: action, state = policy.step(state, observation, t, key), "
            "starting each episode from policy.initial_state (purehr.envs.policies.as_recurrent runs any policy so)"
        )


def as_recurrent(policy: Policy | RecurrentPolicy) -> RecurrentPolicy:
    """``policy`` as a ``RecurrentPolicy``: itself when it has memory, else with the empty state
    ``()`` (no leaves, so nothing is added to a loop's carry)."""
    if isinstance(policy, RecurrentPolicy):
        return policy
    return RecurrentPolicy((), lambda state, observation, t, key: (policy(observation, t, key), state))


def batched_from_the_start(carry: Any, policy: RecurrentPolicy, observation: Any) -> Any:
    """``carry``, an episode loop's first carry, unchanged but batched from the start under the
    vmaps around an evaluation (seeds through the policy's parameters, episodes through the
    first observation): one pass of JAX's batching over the episode body instead of three
    (``purehr.envs.base.varying_with``). The first action is only traced: XLA drops it."""
    action, _ = policy.step(policy.initial_state, observation, jnp.int32(0), jax.random.PRNGKey(0))
    return varying_with(carry, (action, observation))
