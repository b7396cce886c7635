"""Q(lambda) returns over a vectorised rollout, computed backward in Peng's form, as PQN uses
them (no cut of the trace at exploratory actions): every step mixes the one-step max-Q
bootstrap with the longer return; and the epsilon schedule of the rollouts."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def q_lambda_returns(
    rewards: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: jax.Array,
    q_lambda: jax.Array,
) -> jax.Array:
    """The lambda-returns [T, E] by a reverse scan over time:

        G_t = r_t + gamma (1 - terminated_t) [(1 - done_t) lambda G_{t+1} + (1 - (1 - done_t) lambda) V'_t]

    where ``V'_t`` bootstraps with the greedy value (max over legal actions) of the observation
    that followed step t in the same episode. So a terminated step's return is its reward; a
    truncated one (time limit) bootstraps from its *final* observation and does not reach into
    the next episode; the rollout's last step bootstraps from the observation after it.

    Args:
      rewards: [T, E] float32, as trained on (scaled).
      next_values: [T, E] max-Q of the observation that followed step t in its episode (the
        final observation, before the auto-reset, where step t ended it).
      terminated: [T, E] bool: step t ended its episode in a terminal state (no bootstrap).
      done: [T, E] bool: step t ended its episode (terminated or truncated).
      gamma, q_lambda: scalars.
    """
    not_terminated = 1.0 - terminated.astype(rewards.dtype)
    mix = (1.0 - done.astype(rewards.dtype)) * q_lambda  # the weight of G_{t+1}: 0 across an episode end

    def backward(next_return, step):  # one step back in time, every environment at once
        reward, next_value, continues, weight = step
        lambda_return = reward + gamma * continues * (weight * next_return + (1.0 - weight) * next_value)
        return lambda_return, lambda_return

    # after the last step the "longer return" is the bootstrap itself
    _, returns = jax.lax.scan(backward, next_values[-1], (rewards, next_values, not_terminated, mix), reverse=True)
    return returns


def epsilon_at(update_index: jax.Array, num_updates: int, hparams) -> jax.Array:
    """Exploration epsilon of an update: linear from ``epsilon_start`` to ``epsilon_finish``
    over the first ``epsilon_decay_fraction`` of ``num_updates``, then constant."""
    progress = update_index.astype(jnp.float32) / (hparams.epsilon_decay_fraction * num_updates)
    return hparams.epsilon_start + (hparams.epsilon_finish - hparams.epsilon_start) * jnp.clip(progress, 0.0, 1.0)
