"""Wrappers that turn a single-episode environment into an endless training stream."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from purehr.envs.base import Environment, all_finite, end_if_not_finite
from purehr.types import StepResult


def _select(condition: jax.Array, when_true, when_false):
    return jax.tree.map(lambda a, b: jnp.where(condition, a, b), when_true, when_false)


class Wrapper(Environment):
    def __init__(self, env: Environment):
        self.env = env
        self.name = env.name

    @property
    def default_params(self):
        return self.env.default_params

    def observation_space(self, params=None):
        return self.env.observation_space(params)

    def action_space(self, params=None):
        return self.env.action_space(params)

    def max_episode_steps(self, params=None) -> int:
        return self.env.max_episode_steps(params)

    def diagnostics(self, info):
        return self.env.diagnostics(info)

    @property
    def unwrapped(self) -> Environment:
        return getattr(self.env, "unwrapped", self.env)


class AutoResetWrapper(Wrapper):
    """Resets a finished episode in the same step, keeping its last observation in
    ``info["final_observation"]`` so PPO can bootstrap ``V(final)`` on a truncation.

    ``step_with_reset`` takes the reset to continue from, ``(observation, state)`` of
    ``env.reset``, drawn beforehand: PPO draws a whole rollout's resets in one batched call
    before its step scan (a reset does not depend on the state it replaces).

    An environment that does not set ``info["nonfinite_state"]`` itself (any but swing, hrv and
    the adapters that check) is checked here: a non-finite reward or observation ends the
    step as ``end_if_not_finite`` says, so training never sees the NaN and counts it. Whether
    it does is a Python fact of the traced ``info``: for the others nothing is added."""

    def reset(self, key, params=None):
        return self.env.reset(key, params)

    def step(self, key, state, action, params=None) -> StepResult:
        key_step, key_reset = jax.random.split(key)
        return self.step_with_reset(key_step, state, action, self.env.reset(key_reset, params), params)

    def step_with_reset(self, key, state, action, reset: tuple[Any, Any], params=None) -> StepResult:
        step = self.env.step(key, state, action, params)
        if "nonfinite_state" not in step[5]:
            step = end_if_not_finite(step, all_finite((step[0], step[2])))
        obs, next_state, reward, terminated, truncated, info = step
        done = jnp.logical_or(terminated, truncated)
        reset_obs, reset_state = reset
        info = dict(info, final_observation=obs)
        return (
            _select(done, reset_obs, obs),
            _select(done, reset_state, next_state),
            reward,
            terminated,
            truncated,
            info,
        )


@struct.dataclass
class EpisodeStatisticsState:
    env_state: Any
    episode_return: jax.Array
    episode_length: jax.Array
    episode_nan_actions: jax.Array


class EpisodeStatisticsWrapper(Wrapper):
    """Adds the finished episode's return, length and success to ``info``; counts NaN
    actions (the environment replaces them, this wrapper reports them). ``invalid_action``
    and ``nonfinite_state`` are the environment's own flags (``purehr.envs.base``; the latter
    set by ``AutoResetWrapper`` for an environment that does not), so every task logs the same
    columns."""

    def reset(self, key, params=None):
        obs, env_state = self.env.reset(key, params)
        zero = jnp.zeros((), jnp.float32)
        return obs, EpisodeStatisticsState(env_state, zero, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))

    def step(self, key, state: EpisodeStatisticsState, action, params=None) -> StepResult:
        return self._count(state, action, self.env.step(key, state.env_state, action, params))

    def step_with_reset(self, key, state: EpisodeStatisticsState, action, reset, params=None) -> StepResult:
        """``AutoResetWrapper.step_with_reset`` underneath, counted the same way."""
        return self._count(state, action, self.env.step_with_reset(key, state.env_state, action, reset, params))

    def _count(self, state: EpisodeStatisticsState, action, step: StepResult) -> StepResult:
        obs, env_state, reward, terminated, truncated, info = step
        done = jnp.logical_or(terminated, truncated)
        nan_action = (
            jnp.any(jnp.isnan(action))
            if jnp.issubdtype(jnp.asarray(action).dtype, jnp.floating)
            else jnp.zeros((), bool)
        )
        episode_return = state.episode_return + reward.astype(jnp.float32)
        episode_length = state.episode_length + 1
        episode_nan_actions = state.episode_nan_actions + nan_action.astype(jnp.int32)
        info = dict(
            info,
            episode_done=done,
            episode_return=jnp.where(done, episode_return, 0.0),
            episode_length=jnp.where(done, episode_length, 0),
            episode_success=jnp.logical_and(done, info["success"]),
            episode_nan_actions=jnp.where(done, episode_nan_actions, 0),
            nan_action=nan_action,
            invalid_action=jnp.asarray(info.get("invalid_action", nan_action), bool),
            nonfinite_state=jnp.asarray(info.get("nonfinite_state", False), bool),
        )
        keep = jnp.logical_not(done)
        next_state = EpisodeStatisticsState(
            env_state,
            episode_return * keep,
            episode_length * keep,
            episode_nan_actions * keep,
        )
        return obs, next_state, reward, terminated, truncated, info


def training_wrappers(env: Environment) -> Environment:
    """The stack PPO trains on: statistics outside, auto-reset inside."""
    return EpisodeStatisticsWrapper(AutoResetWrapper(env))
