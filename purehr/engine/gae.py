"""Generalised advantage estimation with time-limit truncation handled correctly."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def generalized_advantages(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: jax.Array,
    gae_lambda: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """GAE(lambda) by a reverse scan over time; a truncated episode bootstraps, a terminated
    one does not, and the recursion stops at every episode end.

    Args:
      rewards, values: [T, E] float32: reward of step t, V of the observation step t acted on.
      next_values: [T, E] V of the observation that followed step t in the *same* episode
        (the final observation when step t ended it, before any auto-reset).
      terminated: [T, E] bool: step t ended its episode in a terminal state (no bootstrap).
      done: [T, E] bool: step t ended its episode (terminated or truncated).
      gamma, gae_lambda: scalars.

    Returns:
      (advantages, value targets), both [T, E]; targets = advantages + values.
    """
    not_terminated = 1.0 - terminated.astype(rewards.dtype)
    not_done = 1.0 - done.astype(rewards.dtype)
    deltas = rewards + gamma * next_values * not_terminated - values

    def backward(next_advantage, step):  # one step back in time, every environment at once
        delta, continues = step
        advantage = delta + gamma * gae_lambda * continues * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(deltas[0]), (deltas, not_done), reverse=True)
    return advantages, advantages + values
