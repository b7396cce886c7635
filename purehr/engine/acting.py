"""Acting outside jit: one observation or a batch, for ``PPOModel.predict`` and a restored
checkpoint's ``policy`` (``purehr.run.restore``). It returns NumPy; called under a transformation
(``jax.jit(r.policy)``) it returns the traced action, though the jittable policy of one
observation is ``r.pure_policy(observation, t, key)``.

A feed-forward policy returns the action(s). A recurrent one (``PPOConfig.policy="gru"``)
takes the memory explicitly and returns it: ``action, state = act(observation, state=state)``,
``state=None`` meaning the start of an episode (the zero memory; docs/recurrent.md). An
explicit state rather than a stateful helper: the caller decides where an episode starts and
can keep many episodes' memories apart, and the call stays a pure function of its inputs.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs.policies import as_recurrent
from purehr.envs.spaces import observation_batch_size


class Actor:
    """``actor(params, observation, t=0, key=None, deterministic=True, state=None)``."""

    def __init__(self, algorithm):
        self.algorithm = algorithm
        self.recurrent = algorithm.recurrent
        self.observation_space = algorithm.env.observation_space(algorithm.env_params)

        def one(params, observation, t, key, state, deterministic):
            policy = as_recurrent(algorithm.policy(params, deterministic))
            return policy.step(state, observation, t, key)

        self._one = jax.jit(one, static_argnums=5)
        self._batch = jax.jit(jax.vmap(one, in_axes=(None, 0, 0, 0, 0, None)), static_argnums=5)

    def initial_state(self, params, batch: int | None) -> Any:
        state = as_recurrent(self.algorithm.policy(params)).initial_state
        if batch is None:
            return state
        return jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (batch, *jnp.shape(leaf))), state)

    def __call__(self, params, observation, t=0, key=None, deterministic: bool = True, state=None):
        key = jax.random.PRNGKey(0) if key is None else key
        batch = observation_batch_size(observation, self.observation_space)
        if state is not None and not self.recurrent:
            raise ValueError("state=...: this policy is feed-forward (config.policy='mlp') and has no memory")
        state = self.initial_state(params, batch) if state is None else state
        if batch is None:
            action, state = self._one(params, observation, jnp.int32(t), key, state, deterministic)
        else:
            steps = jnp.broadcast_to(jnp.asarray(t, jnp.int32), (batch,))
            self._check_batched_state(state, batch)
            action, state = self._batch(params, observation, steps, jax.random.split(key, batch), state, deterministic)
        if not isinstance(action, jax.core.Tracer):  # traced (``jax.jit(r.policy)``): the traced action
            action = np.asarray(action)
        return (action, state) if self.recurrent else action

    @staticmethod
    def _check_batched_state(state, batch: int) -> None:
        shapes = [jnp.shape(leaf) for leaf in jax.tree.leaves(state)]
        if any(not shape or shape[0] != batch for shape in shapes):
            raise ValueError(
                f"state with leaf shapes {shapes} for a batch of {batch} observations: expected a leading axis of "
                f"{batch} (the state returned for the previous batch, or None at the episodes' start)"
            )
