"""Separate actor and critic MLPs.

Weights are Gaussian with std gain / sqrt(fan_in) (docs/protocol.md), not orthogonal: an
orthogonal init does a QR, and a QR vmapped over seeds deadlocks XLA's CPU thread pool
(docs/protocol.md, "Engine facts")."""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

HIDDEN_GAIN = 2.0 ** 0.5
POLICY_GAIN = 0.01
VALUE_GAIN = 1.0


def scaled_normal(gain: float) -> nn.initializers.Initializer:
    return nn.initializers.variance_scaling(gain ** 2, "fan_in", "normal")


class MLP(nn.Module):
    hidden: Sequence[int]
    activation: str
    output_size: int
    output_gain: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        activation = {"tanh": nn.tanh, "relu": nn.relu}[self.activation]
        for width in self.hidden:
            x = activation(nn.Dense(width, kernel_init=scaled_normal(HIDDEN_GAIN),
                                    bias_init=nn.initializers.zeros)(x))
        return nn.Dense(self.output_size, kernel_init=scaled_normal(self.output_gain),
                        bias_init=nn.initializers.zeros)(x)


class ActorCritic(nn.Module):
    """Returns (actor output, log std or None, value). The log std is state-independent."""
    actor_hidden: Sequence[int]
    critic_hidden: Sequence[int]
    activation: str
    policy_output_size: int
    continuous: bool
    log_std_init: float = -0.5

    def setup(self) -> None:
        self.actor = MLP(self.actor_hidden, self.activation, self.policy_output_size, POLICY_GAIN)
        self.critic = MLP(self.critic_hidden, self.activation, 1, VALUE_GAIN)
        if self.continuous:
            self.log_std = self.param("log_std", nn.initializers.constant(self.log_std_init),
                                      (self.policy_output_size,))

    def __call__(self, observation: jax.Array):
        log_std = self.log_std if self.continuous else None
        return self.actor(observation), log_std, self.value(observation)

    def value(self, observation: jax.Array) -> jax.Array:
        return jnp.squeeze(self.critic(observation), -1)
