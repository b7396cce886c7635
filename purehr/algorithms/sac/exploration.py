"""Temporally correlated exploration noise for SAC's rollout actions: a first-order
autoregressive (AR(1), a discretised Ornstein-Uhlenbeck) process per environment and action
dimension, stationary standard normal, in place of the fresh normal SAC draws every step.

Why: SAC's policy acts ``tanh(mean + std * eps)``; with ``eps`` white, a 20 ms control step and
a small learned std, the noise has almost no power at a slow system's natural frequency (the
swing's period is ~120 steps), so exploration never pumps it. The correlated noise keeps the
policy's marginal action distribution (each ``eps_t`` is N(0, 1)) and moves its power to low
frequencies (Eberhard et al., "Pink Noise Is All You Need", ICLR 2023, who keep the update's
log-probabilities on fresh independent normals: so does SAC here, only the rollout's actions
change).

    eps_t = b eps_{t-1} + sqrt(1 - b^2) z_t,   z_t ~ N(0, 1) i.i.d.

Stationary: Var eps_t = 1 for all t when Var eps_0 = 1 (the state starts with a standard-normal
draw); the lag-k autocorrelation is b^k, so a correlation time of tau steps is b = exp(-1/tau).
b = 0 is white noise, bit for bit (0 * eps + 1 * z = z). The state is not reset at episode
starts: it is stationary at every step, an episode's first steps included, so a reset would
change nothing in distribution and would cost a draw and a flag per environment.

Shapes: E environments, A action dimensions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def innovation_scale(correlation: float) -> np.float32:
    """sqrt(1 - b^2), float32: the weight of the fresh normal that keeps the variance at 1."""
    return np.float32(np.sqrt(1.0 - np.float64(correlation) ** 2))


def ar1_step(previous: jax.Array, fresh: jax.Array, correlation: float) -> jax.Array:
    """The next noise [E, A] from the previous one [E, A] and standard normals ``fresh`` [E, A]."""
    return np.float32(correlation) * previous + innovation_scale(correlation) * fresh


def ar1_sequence(start: jax.Array, fresh: jax.Array, correlation: float) -> tuple[jax.Array, jax.Array]:
    """(the last noise [E, A], the noise of every step [T, E, A]) from the state ``start``
    [E, A] and T steps of standard normals ``fresh`` [T, E, A]."""

    def step(previous, z):
        noise = ar1_step(previous, z, correlation)
        return noise, noise

    return jax.lax.scan(step, start, fresh)


def initial_noise(key: jax.Array, num_envs: int, action_size: int) -> jax.Array:
    """The process's first state [E, A]: a stationary (standard-normal) draw."""
    return jax.random.normal(key, (num_envs, action_size), jnp.float32)
