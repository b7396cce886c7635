"""Generalised advantage estimation with time-limit truncation handled correctly."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def generalized_advantages(rewards: jax.Array, values: jax.Array, next_values: jax.Array,
                           terminated: jax.Array, done: jax.Array, gamma: jax.Array,
                           gae_lambda: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Arrays are [time, ...]. ``next_values[t]`` is V of the observation that followed step t
    in the *same* episode (the final observation when step t ended it): a truncated episode
    bootstraps from it, a terminated one does not, and the recursion stops at every episode end.
    Returns (advantages, value targets)."""
    not_terminated = 1.0 - terminated.astype(rewards.dtype)
    not_done = 1.0 - done.astype(rewards.dtype)
    deltas = rewards + gamma * next_values * not_terminated - values

    def backward(next_advantage, step):
        delta, continues = step
        advantage = delta + gamma * gae_lambda * continues * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(deltas[0]), (deltas, not_done),
                                 reverse=True)
    return advantages, advantages + values
