"""SAC's networks: a tanh-squashed Gaussian actor and twin Q critics, built from the engine's
MLP (the twins one ``nn.vmap`` ensemble of it; Gaussian initialisers with std gain /
sqrt(fan_in): no orthogonal init, whose QR deadlocks under a seed vmap;
``purehr.engine.networks``). The actor's layers are purehr's ``Dense`` (flax's parameters,
a faster weight gradient for its head of 2 x A outputs on a CPU: ``purehr.engine.dense``;
the critics' one output gains nothing from it). The target critics are a second copy of the
critics' parameters, moved towards them by Polyak averaging (``polyak``).

Actions inside SAC are in the squashed unit box [-1, 1]^A (what the critics read, what the
buffer stores, where the log-probability and the target entropy are measured, as SB3 does);
``purehr.engine.distributions.TanhGaussian.to_env_action`` maps them to the action bounds.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from purehr.engine.dense import Dense
from purehr.engine.distributions import TanhGaussian
from purehr.engine.networks import MLP, POLICY_GAIN, VALUE_GAIN

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
"""The actor's log standard deviation, squashed into this range (CleanRL's SAC): a std of
exp(-5) keeps log-probabilities finite, one of exp(2) is already uniform after the tanh."""


class Actor(nn.Module):
    """obs [..., O] -> (mean [..., A], log std [..., A]) of the latent (pre-tanh) Gaussian."""

    hidden: Sequence[int]
    activation: str
    action_size: int
    torso: nn.Module | None = None
    """A user's torso (``SACConfig.network``, a ``purehr.engine.user_network.StructuredInput``):
    the MLP head then reads its features [..., F] instead of the flat observation."""

    @nn.compact
    def __call__(self, observation: jax.Array) -> tuple[jax.Array, jax.Array]:
        if self.torso is not None:
            observation = self.torso(observation)
        output = MLP(self.hidden, self.activation, 2 * self.action_size, POLICY_GAIN, Dense)(observation)
        mean, raw_log_std = jnp.split(output, 2, axis=-1)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (jnp.tanh(raw_log_std) + 1.0)
        return mean, log_std


class TwinCritic(nn.Module):
    """(obs [..., O], unit action [..., A]) -> Q [..., 2]: two independent MLPs (clipped double Q)
    as one ensemble, ``nn.vmap`` over the engine's MLP: every parameter has a leading axis of 2
    and each member is initialised from its own key (``split_rngs``). One batched matmul per
    layer serves both twins, where two MLPs took two (SAC's update is mostly critic matmuls)."""

    hidden: Sequence[int]
    activation: str
    torso: nn.Module | None = None
    """A user's torso, shared by the twins: they read [its features, action]."""

    @nn.compact
    def __call__(self, observation: jax.Array, action: jax.Array) -> jax.Array:
        if self.torso is not None:
            observation = self.torso(observation)
        inputs = jnp.concatenate([observation, action], axis=-1)
        twins = nn.vmap(
            MLP,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=None,
            out_axes=-1,
            axis_size=2,
        )
        return twins(self.hidden, self.activation, 1, VALUE_GAIN, name="twins")(inputs)[..., 0, :]


def unit_distribution(mean: jax.Array, log_std: jax.Array) -> TanhGaussian:
    """The policy as the engine's tanh-Gaussian on [-1, 1]^A: its ``log_prob`` of a latent is the
    squashed action's density there (the Jacobian of the tanh included)."""
    one = jnp.ones_like(mean)
    return TanhGaussian(mean, log_std, -one, one)


def env_distribution(mean: jax.Array, log_std: jax.Array, low: jax.Array, high: jax.Array) -> TanhGaussian:
    """The same policy with the environment's bounds, for acting (``to_env_action``)."""
    return TanhGaussian(mean, log_std, jnp.broadcast_to(low, mean.shape), jnp.broadcast_to(high, mean.shape))


def unit_to_env(action: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """A unit-box action [..., A] at the environment's bounds (``TanhGaussian.to_env_action``'s map)."""
    return low + (action + 1.0) * 0.5 * (high - low)


def polyak(target, online, tau: jax.Array):
    """target <- (1 - tau) target + tau online, leaf by leaf."""
    return jax.tree.map(lambda t, o: (1.0 - tau) * t + tau * o, target, online)
