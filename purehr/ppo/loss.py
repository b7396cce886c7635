"""The clipped PPO objective."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from purehr.ppo.config import PPOHyperparams


def ppo_loss(params, apply_fn: Callable, distribution_fn: Callable, minibatch: dict,
             hparams: PPOHyperparams) -> tuple[jax.Array, dict[str, jax.Array]]:
    """``minibatch`` holds observation, action (the stored one: the latent for tanh-Gaussian),
    log_prob, advantage (already normalised over the whole batch) and target."""
    actor_output, log_std, value = apply_fn(params, minibatch["observation"])
    distribution = distribution_fn(actor_output, log_std)
    log_prob = distribution.log_prob(minibatch["action"])
    log_ratio = log_prob - minibatch["log_prob"]
    ratio = jnp.exp(log_ratio)
    advantage = minibatch["advantage"]
    clipped_ratio = jnp.clip(ratio, 1.0 - hparams.clip_range, 1.0 + hparams.clip_range)
    policy_loss = -jnp.mean(jnp.minimum(ratio * advantage, clipped_ratio * advantage))
    value_loss = 0.5 * jnp.mean(jnp.square(value - minibatch["target"]))
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
    return total, stats
