"""The rewards PPO's GAE trains on: the environment's rewards, scaled (``reward_scaling``,
Brax's) and divided by the running standard deviation of the discounted return
(``normalize_returns``, SB3's ``VecNormalize(norm_reward=True)`` and PureJaxRL's
``NormalizeVecReward``). Only the value targets and advantages see them: the logged rewards
and episode returns stay in the environment's units.

With both options at their defaults nothing here enters the program (Python decides, not the
trace): today's training programs, states and checkpoints are the ones before these options.

The update order of the return statistics, once per update after the rollout:
  1. for each step t of the rollout, each environment's running discounted return
     ``R_t = gamma * R_{t-1} + r_t`` (``r_t`` already scaled), reset to 0 after a step that
     ended its episode (terminated or truncated), as SB3 does;
  2. all T x E returns of the rollout are folded into the running mean and variance at once
     (Chan et al.'s parallel combination, as the observation statistics are);
  3. every reward of the rollout is divided by ``sqrt(var + 1e-8)`` of the statistics that
     include it (SB3 updates after each step; here the rollout is one batch, so its first
     steps are divided by a variance that already includes its last).
The mean is kept for the variance's combination only: rewards are scaled, never shifted.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

RETURN_EPSILON = 1e-8
"""Added to the return variance under the square root (SB3's and PureJaxRL's epsilon)."""


@struct.dataclass
class ReturnStatistics:
    """The running statistics of the discounted return, in the training state (so a resume
    continues them bit for bit): scalars, but ``discounted_return`` [E], one per environment."""

    discounted_return: jax.Array
    mean: jax.Array
    var: jax.Array
    count: jax.Array


def initial_return_statistics(normalize_returns: bool, num_envs: int) -> ReturnStatistics | tuple:
    """``()`` without return normalisation: no leaf, so the state and checkpoints keep the layout
    they had before the option existed (``purehr.run.store.checkpoints.stored_form`` drops it)."""
    if not normalize_returns:
        return ()
    zero = jnp.zeros((), jnp.float32)
    return ReturnStatistics(jnp.zeros((num_envs,), jnp.float32), zero, jnp.ones((), jnp.float32), zero)


def normalized_rewards(
    statistics: ReturnStatistics, rewards: jax.Array, done: jax.Array, gamma: jax.Array
) -> tuple[jax.Array, ReturnStatistics]:
    """``rewards`` [T, E] divided by the running std of the discounted return, and the
    statistics after this rollout (steps 1-3 of the module's order)."""

    def accumulate(running, step):
        reward, ended = step
        running = gamma * running + reward
        return jnp.where(ended, 0.0, running), running

    carried, returns = jax.lax.scan(accumulate, statistics.discounted_return, (rewards, done))
    batch_count = jnp.float32(returns.size)
    batch_mean, batch_var = returns.mean(), returns.var()
    count = statistics.count + batch_count
    delta = batch_mean - statistics.mean
    mean = statistics.mean + delta * batch_count / count
    var = (
        statistics.var * statistics.count + batch_var * batch_count + delta**2 * statistics.count * batch_count / count
    ) / count
    updated = ReturnStatistics(carried, mean, var, count)
    return rewards / jnp.sqrt(var + RETURN_EPSILON), updated


def training_rewards(
    rewards: jax.Array, done: jax.Array, statistics: Any, gamma: jax.Array, reward_scaling: float
) -> tuple[jax.Array, Any]:
    """The rewards GAE trains on and the return statistics after them: ``rewards`` [T, E] times
    ``reward_scaling``, then normalised where ``statistics`` are kept (``()``: not normalised).
    The defaults return ``rewards`` itself: no operation is added to the program."""
    if reward_scaling != 1.0:
        rewards = rewards * jnp.float32(reward_scaling)
    if isinstance(statistics, ReturnStatistics):
        rewards, statistics = normalized_rewards(statistics, rewards, done, gamma)
    return rewards, statistics
