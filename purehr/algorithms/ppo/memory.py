"""What one seed's PPO update holds beyond its state, for the memory check made before anything
is compiled (``purehr.run.host.estimate.TrainingMemory``): the gradients (one more copy of the
parameters), a rollout's transitions and one minibatch's layer activations with their
gradients. A lower bound: XLA's temporaries come on top."""

from __future__ import annotations

import math

import jax
import numpy as np

from purehr.algorithms.ppo.config import PPOConfig

TRANSITION_SCALARS = 8
"""A transition's scalars besides its observation (action, log-probability, value, reward, flags)."""


def working_set_bytes(config: PPOConfig, state_shapes, observation_size: int) -> int:
    """Bytes [per seed] of the update's working set; ``state_shapes``: ``jax.eval_shape`` of
    ``init`` (its ``params`` size the gradients)."""
    itemsize = 8 if jax.config.jax_enable_x64 else 4
    parameters = sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(state_shapes.params))
    units = sum(config.actor_hidden) + sum(config.critic_hidden)
    if config.policy == "gru":  # embedding, three gates and the state, per transition
        units += 5 * config.recurrent_width
    rollout = config.num_envs * config.num_steps * (observation_size + TRANSITION_SCALARS) * itemsize
    minibatch = 2 * config.minibatch_size * units * itemsize  # activations and their gradients
    return parameters + rollout + minibatch
