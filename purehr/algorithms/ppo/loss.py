"""The clipped PPO objective."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from purehr.algorithms.ppo.config import PPOHyperparams
from purehr.algorithms.ppo.metrics import LOSS_STATISTICS


class Batch(NamedTuple):
    """What the loss trains on: [batch_size, ...] flattened over steps and environments, then
    [num_minibatches, minibatch_size, ...] once permuted and cut into minibatches."""

    observation: jax.Array
    action: jax.Array
    log_prob: jax.Array  # of ``action`` under the policy that collected it
    advantage: jax.Array  # normalised over the whole batch
    target: jax.Array  # value target: advantage + value (before normalisation)


def ppo_loss(
    params, apply_fn: Callable, distribution_fn: Callable, minibatch: Batch, hparams: PPOHyperparams
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The clipped surrogate, value and entropy terms on one minibatch ([M, ...] each);
    ``minibatch.action`` is the stored one (the latent for tanh-Gaussian)."""
    actor_output, log_std, value = apply_fn(params, minibatch.observation)
    distribution = distribution_fn(actor_output, log_std)
    log_prob = distribution.log_prob(minibatch.action)
    log_ratio = log_prob - minibatch.log_prob
    ratio = jnp.exp(log_ratio)
    advantage = minibatch.advantage
    clipped_ratio = jnp.clip(ratio, 1.0 - hparams.clip_range, 1.0 + hparams.clip_range)
    policy_loss = -jnp.mean(jnp.minimum(ratio * advantage, clipped_ratio * advantage))
    # no value clipping: a plain squared error (clipping the value update rarely helps; Andrychowicz et al. 2021)
    value_loss = 0.5 * jnp.mean(jnp.square(value - minibatch.target))
    entropy = jnp.mean(distribution.entropy())
    total = policy_loss + hparams.vf_coef * value_loss - hparams.ent_coef * entropy
    stats = {
        "loss": total,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
        "clip_fraction": jnp.mean((jnp.abs(ratio - 1.0) > hparams.clip_range).astype(jnp.float32)),
    }
    assert tuple(stats) == LOSS_STATISTICS  # the names updates.csv has, in its order
    return total, stats
