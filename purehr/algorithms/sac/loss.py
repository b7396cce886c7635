"""SAC's three losses on a sampled batch of N transitions (Haarnoja et al., 2018; the temperature
loss of "SAC algorithms and applications", as SB3 writes it).

Time limits: a transition records ``terminated`` (the episode reached a terminal state) apart
from a truncation (a time limit), and ``next_observation`` is the episode's own final observation
before any auto-reset (``AutoResetWrapper``'s ``final_observation``). The soft target bootstraps
from it after a truncation and not after a termination, as PPO's GAE does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from purehr.algorithms.sac.networks import unit_distribution


class Transition(NamedTuple):
    """One stored transition (what the buffer holds; [N, ...] once sampled)."""

    observation: jax.Array  # [O] flat
    action: jax.Array  # [A] in the unit box [-1, 1]
    reward: jax.Array  # [] float32
    terminated: jax.Array  # [] bool: no bootstrap from next_observation
    next_observation: jax.Array  # [O] the observation that followed, before any auto-reset


def sample_actions(actor_apply: Callable, actor_params, observation: jax.Array, noise: jax.Array):
    """(unit actions [N, A], log pi [N]) drawn from the policy with standard-normal ``noise``
    [N, A] (reparameterised: the gradient flows through the action)."""
    mean, log_std = actor_apply(actor_params, observation)
    policy = unit_distribution(mean, log_std)
    latent = policy.sample_from_noise(noise)
    return jnp.tanh(latent), policy.log_prob(latent)


def soft_targets(
    reward: jax.Array,
    terminated: jax.Array,
    next_q: jax.Array,
    next_log_prob: jax.Array,
    alpha: jax.Array,
    gamma: jax.Array,
) -> jax.Array:
    """r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s')) [N]: ``next_q``
    [N, 2] the target critics at the next observation and a fresh action a' ~ pi(s')."""
    soft_value = jnp.min(next_q, axis=-1) - alpha * next_log_prob
    return reward + gamma * jnp.where(terminated, 0.0, soft_value)


def critic_loss(critic_params, critic_apply: Callable, batch: Transition, targets: jax.Array):
    """(0.5 x the twins' summed squared errors against ``targets``, mean over samples; mean Q)."""
    q = critic_apply(critic_params, batch.observation, batch.action)  # [N, 2]
    errors = q - jax.lax.stop_gradient(targets)[:, None]
    return 0.5 * jnp.mean(jnp.sum(errors**2, axis=-1)), jnp.mean(q)


def actor_loss(
    actor_params,
    actor_apply: Callable,
    critic_apply: Callable,
    critic_params,
    observation: jax.Array,
    noise: jax.Array,
    alpha: jax.Array,
):
    """(mean of alpha log pi(a|s) - min_i Q_i(s, a), a ~ pi(s) reparameterised; log pi [N])."""
    action, log_prob = sample_actions(actor_apply, actor_params, observation, noise)
    q = jnp.min(critic_apply(critic_params, observation, action), axis=-1)
    return jnp.mean(alpha * log_prob - q), log_prob


def temperature_loss(log_alpha: jax.Array, log_prob: jax.Array, target_entropy: jax.Array) -> jax.Array:
    """-log alpha x (log pi + target entropy), mean: its gradient raises alpha while the policy's
    entropy (-log pi) is below the target and lowers it above."""
    return -jnp.mean(log_alpha * jax.lax.stop_gradient(log_prob + target_entropy))
