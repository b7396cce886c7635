"""Run any Brax environment (``brax.envs``) through purehr's interface, so the whole protocol
(checkpoints, resume, held-out evaluation, floors) reaches Brax's locomotion and control tasks.

The adapter wraps the raw environment of ``brax.envs.get_environment``, none of Brax's training
wrappers: purehr's own ``AutoResetWrapper`` and ``EpisodeStatisticsWrapper`` auto-reset and
count. The time limit Brax's ``EpisodeWrapper`` adds is kept here instead, as a step counter in
the adapter's state, so that an episode cut at the limit is ``truncated`` (PPO bootstraps it)
and only Brax's own ``done`` (the pole fell, the hopper toppled) is ``terminated``; when both
happen at the same step it is terminated, as in Brax (``truncation = 1 - done`` there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from purehr.envs import spaces
from purehr.envs.base import Environment, all_finite, end_if_not_finite
from purehr.types import StepResult

BACKENDS = ("positional", "generalized", "spring", "mjx")
DEFAULT_BACKEND = "positional"  # why: purehr.tasks.suites.brax
"""Brax's physics pipelines (``brax.envs.base.PipelineEnv``)."""
DEFAULT_EPISODE_LENGTH = 1000
"""Brax's own default (``brax.envs.create`` and ``ppo.train``'s ``EpisodeWrapper``)."""


@struct.dataclass
class BraxParams:
    """The adapter's one constant: the time limit, static (a Python int: it sizes the
    evaluation scans), and a ``BraxEnv`` keyword of the same name."""

    episode_length: int = struct.field(pytree_node=False, default=DEFAULT_EPISODE_LENGTH)


@struct.dataclass
class BraxState:
    brax: Any  # brax.envs.base.State: pipeline state, obs, reward, done, metrics, info
    steps: jax.Array  # int32 steps taken in this episode (the time limit's counter)


def _strong(tree):
    """Every leaf a strongly typed array: Brax's envs return Python floats (``reward=1.0``) and
    weakly typed scalars that a scan carry started from ``reset`` would refuse."""
    return jax.tree.map(lambda x: jax.lax.convert_element_type(x, jnp.asarray(x).dtype), tree)


def _float32(tree):
    return jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.float32), tree)


def _observation_space(observation) -> spaces.Box | spaces.Dict:
    """An unbounded float32 Box of the observation's shape (a Dict of them for dict observations)."""
    if isinstance(observation, Mapping):
        return spaces.Dict({key: _observation_space(value) for key, value in observation.items()})
    shape = tuple(int(n) for n in observation.shape)
    return spaces.Box(low=-jnp.inf, high=jnp.inf, shape=shape, dtype=jnp.float32)


class BraxEnv(Environment):
    """``brax.envs.get_environment(name, backend=backend, **kwargs)`` with a time limit of
    ``episode_length`` steps. Actions are float32 in [-1, 1]^action_size (Brax scales them to
    the actuators' ranges); observations float32. Brax defines no success."""

    defines_success = False

    def __init__(
        self,
        name: str,
        backend: str = DEFAULT_BACKEND,
        episode_length: int = DEFAULT_EPISODE_LENGTH,
        **kwargs: Any,
    ):
        try:
            from brax import envs as brax_envs
        except ImportError as error:  # pragma: no cover - depends on the install
            raise ImportError("the Brax adapter needs brax: pip install 'purehr[brax]'") from error
        names = registered_names()
        if name not in names:
            raise ValueError(f"unknown Brax environment {name!r}; expected one of {names}")
        if backend not in BACKENDS:
            raise ValueError(f"Brax backend {backend!r}: expected one of {list(BACKENDS)}")
        if isinstance(episode_length, bool) or not isinstance(episode_length, int) or episode_length <= 0:
            raise ValueError(f"episode_length={episode_length!r}: expected a positive integer (steps)")
        self.name = name
        self.task_name = f"brax:{name}"  # the task it belongs to (purehr.tasks.task_of_env)
        self.make_kwargs = {"backend": backend, "episode_length": int(episode_length), **kwargs}
        """The constructor's keywords, defaults resolved: what a manifest records to rebuild it."""
        self._env = brax_envs.get_environment(name, backend=backend, **kwargs)
        self._params = BraxParams(episode_length=int(episode_length))
        reset_shape = jax.eval_shape(self._env.reset, jax.random.PRNGKey(0))
        self._observation_space = _observation_space(reset_shape.obs)
        self._action_space = spaces.Box(low=-1.0, high=1.0, shape=(int(self._env.action_size),), dtype=jnp.float32)

    @property
    def default_params(self) -> BraxParams:
        return self._params

    @property
    def brax_env(self):
        """The raw Brax environment (for a peer that trains on it directly)."""
        return self._env

    def reset(self, key, params: BraxParams | None = None):
        state = _strong(self._env.reset(key))
        return _float32(state.obs), BraxState(state, jnp.zeros((), jnp.int32))

    def step(self, key, state: BraxState, action, params: BraxParams | None = None) -> StepResult:
        """Brax's step is deterministic: ``key`` is unused. A NaN action component acts as 0
        and an out-of-range one is clipped (both flagged ``invalid_action``); a step whose
        observation or reward is not finite ends the episode (``end_if_not_finite``)."""
        params = self._params if params is None else params
        action = jnp.asarray(action, jnp.float32)
        valid = jnp.isfinite(action) & (jnp.abs(action) <= 1.0)
        safe_action = jnp.where(jnp.isfinite(action), jnp.clip(action, -1.0, 1.0), 0.0)
        next_brax = _strong(self._env.step(state.brax, safe_action))
        steps = state.steps + 1
        observation = _float32(next_brax.obs)
        reward = jnp.asarray(next_brax.reward, jnp.float32)
        terminated = jnp.asarray(next_brax.done) > 0.5
        truncated = jnp.logical_and(steps >= params.episode_length, jnp.logical_not(terminated))
        info = {"success": jnp.zeros((), bool), "invalid_action": jnp.logical_not(jnp.all(valid))}
        step = (observation, BraxState(next_brax, steps), reward, terminated, truncated, info)
        return end_if_not_finite(step, all_finite((observation, reward)))

    def observation_space(self, params=None):
        return self._observation_space

    def action_space(self, params=None):
        return self._action_space

    def max_episode_steps(self, params: BraxParams | None = None) -> int:
        return int((self._params if params is None else params).episode_length)


def registered_names() -> list[str]:
    """The environments ``brax.envs.get_environment`` knows (its registry, with any
    ``brax.envs.register_environment`` additions)."""
    from brax import envs as brax_envs

    return sorted(brax_envs._envs)  # brax has no public accessor for its registry
