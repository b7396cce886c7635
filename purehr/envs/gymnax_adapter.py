"""Run any gymnax environment through purehr's interface, so the PPO engine can be checked on
environments nobody here wrote.

gymnax 0.0.9's ``step`` auto-resets and folds the time limit into ``done``; the adapter calls
``step_env`` instead and splits ``done`` into terminated and truncated from the time counter,
so GAE can bootstrap time-limit truncations.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from purehr.envs import spaces
from purehr.envs.base import Environment
from purehr.types import StepResult


def _convert_space(space):
    kind = type(space).__name__
    if kind == "Discrete":
        return spaces.Discrete(int(space.n))
    if kind == "Box":
        return spaces.Box(low=space.low, high=space.high, shape=tuple(space.shape), dtype=jnp.float32)
    if kind == "Dict":
        return spaces.Dict({key: _convert_space(sub) for key, sub in space.spaces.items()})
    raise TypeError(f"gymnax space {space!r} is not supported; expected Discrete, Box or a Dict of them")


def _float_observation(observation):
    return jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.float32), observation)


class GymnaxEnv(Environment):
    """A gymnax environment (``gymnax.make(name, **make_kwargs)``); gymnax defines no success."""

    defines_success = False

    def __init__(self, name: str, **make_kwargs):
        try:
            import gymnax
        except ImportError as error:  # pragma: no cover - depends on the install
            raise ImportError("the gymnax adapter needs gymnax: pip install 'purehr[gymnax]'") from error
        if name not in gymnax.registered_envs:
            raise ValueError(f"unknown gymnax environment {name!r}; expected one of {sorted(gymnax.registered_envs)}")
        self.name = name
        self.task_name = f"gymnax:{name}"  # the task it belongs to (purehr.tasks.task_of_env)
        self.make_kwargs = dict(make_kwargs)
        self._env, self._default_params = gymnax.make(name, **make_kwargs)

    @property
    def default_params(self):
        return self._default_params

    def reset(self, key, params=None):
        params = self._default_params if params is None else params
        observation, state = self._env.reset_env(key, params)
        return _float_observation(observation), state

    def step(self, key, state, action, params=None) -> StepResult:
        params = self._default_params if params is None else params
        observation, next_state, reward, done, _ = self._env.step_env(key, state, action, params)
        truncated = jnp.logical_and(done, next_state.time >= params.max_steps_in_episode)
        terminated = jnp.logical_and(done, jnp.logical_not(truncated))
        info = {"success": jnp.zeros((), bool)}
        return (
            _float_observation(observation),
            next_state,
            jnp.asarray(reward, jnp.float32),
            terminated,
            truncated,
            info,
        )

    def observation_space(self, params=None):
        return _convert_space(self._env.observation_space(params or self._default_params))

    def action_space(self, params=None):
        return _convert_space(self._env.action_space(params or self._default_params))

    def max_episode_steps(self, params=None) -> int:
        return int((params or self._default_params).max_steps_in_episode)
