"""Any purehr environment as a Gymnasium ``Env``, for Stable-Baselines3, CleanRL and friends.

    from purehr.envs import HRWritingEnv, to_gymnasium
    env = to_gymnasium(HRWritingEnv(hrv_dim=8), flatten=True, seed=0)
    observation, info = env.reset(seed=0)

The functional ``reset``/``step`` are jitted once per wrapper; the JAX key of an episode is
drawn from Gymnasium's ``np_random`` at every ``reset``, so ``reset(seed=s)`` makes the
episode (noise included) reproducible, as ``gymnasium.utils.env_checker.check_env`` wants.
Spaces convert as Box -> ``gymnasium.spaces.Box`` (float32), Discrete -> ``Discrete``,
MultiDiscrete -> ``MultiDiscrete``, Dict -> ``gymnasium.spaces.Dict`` (or, with
``flatten=True``, one float32 Box in purehr's sorted-key order, the vector the PPO networks
see). An action must have the action space's shape (nothing is broadcast); a discrete action
that is not a whole number reaches the environment as it is, which flags it
(``info["invalid_action"]``). One environment, one step per Python call: this is the slow
path that host-loop libraries need, not how purehr trains.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs import spaces
from purehr.envs.base import Environment

try:
    import gymnasium
except ImportError:  # pragma: no cover - depends on the install
    gymnasium = None


def _require_gymnasium():
    if gymnasium is None:
        raise ImportError("to_gymnasium needs gymnasium: pip install 'purehr[gymnasium]'")
    return gymnasium


def to_gymnasium_space(space, flatten: bool = False):
    """The Gymnasium space of a purehr space (``flatten`` turns a Dict into one Box)."""
    gym = _require_gymnasium()
    if isinstance(space, spaces.Box):
        low = np.broadcast_to(np.asarray(space.low, np.float32), space.shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), space.shape)
        return gym.spaces.Box(low=low, high=high, shape=tuple(space.shape), dtype=np.float32)
    if isinstance(space, spaces.Discrete):
        return gym.spaces.Discrete(int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        return gym.spaces.MultiDiscrete(np.asarray(space.nvec, np.int64))
    if isinstance(space, spaces.Dict):
        if flatten:
            names = sorted(space.spaces)  # jax's pytree order, as flatten_observation uses
            boxes = [to_gymnasium_space(space.spaces[name]) for name in names]
            return gym.spaces.Box(
                low=np.concatenate([b.low.ravel() for b in boxes]),
                high=np.concatenate([b.high.ravel() for b in boxes]),
                dtype=np.float32,
            )
        return gym.spaces.Dict({name: to_gymnasium_space(sub) for name, sub in space.spaces.items()})
    raise TypeError(f"no Gymnasium equivalent for space {space!r}")


def _to_numpy_observation(observation):
    if isinstance(observation, dict):
        return {name: np.array(value, np.float32) for name, value in observation.items()}
    return np.array(observation, np.float32)


def _info_to_numpy(info: dict) -> dict[str, Any]:
    converted = {}
    for name, value in info.items():
        array = np.asarray(value)
        converted[name] = array.item() if array.ndim == 0 else array.copy()
    return converted


_JITTED: dict[tuple[int, bool], tuple] = {}


def _jitted_functions(env: Environment, flatten: bool):
    """One jitted reset/step per (environment object, flatten): the copies in a vector env
    (SB3's DummyVecEnv of n wrappers) share one compilation instead of compiling n times."""
    cache_key = (id(env), flatten)
    if cache_key not in _JITTED or _JITTED[cache_key][0] is not env:
        shape = spaces.flatten_observation if flatten else (lambda observation: observation)

        def reset_fn(key, env_params):
            observation, state = env.reset(key, env_params)
            return shape(observation), state

        def step_fn(key, state, action, env_params):
            key, step_key = jax.random.split(key)  # inside the jit: one dispatch per step
            observation, state, reward, terminated, truncated, info = env.step(step_key, state, action, env_params)
            return key, shape(observation), state, reward, terminated, truncated, info

        _JITTED[cache_key] = (env, jax.jit(reset_fn), jax.jit(step_fn))
    return _JITTED[cache_key][1:]


def _functional_action(action, space) -> jax.Array:
    """A Gymnasium action as the environment's ``step`` takes it, of the space's shape (a wrong
    shape is refused, never broadcast). A discrete action that is not a whole number (1.7, NaN)
    stays float, so the environment's own check flags it (``info["invalid_action"]``) instead
    of a cast truncating it to a valid choice."""
    array = np.asarray(action)
    if array.shape != tuple(space.shape):
        raise ValueError(
            f"action of shape {array.shape}: expected shape {tuple(space.shape)} "
            f"(the {type(space).__name__} action space's)"
        )
    if isinstance(space, spaces.Box):
        return jnp.asarray(array, jnp.float32)
    if np.issubdtype(array.dtype, np.inexact) and not np.all(np.isfinite(array) & (array == np.round(array))):
        return jnp.asarray(array, jnp.float32)
    return jnp.asarray(array, jnp.int32)


def to_gymnasium(env: Environment, params=None, seed: int | None = None, *, flatten: bool = False):
    """A ``gymnasium.Env`` that runs ``env`` with ``params`` (default: its default params).

    ``seed`` seeds the first ``reset`` (later resets continue the stream unless given a seed).
    ``flatten=True`` turns a Dict observation into one float32 vector (SB3's ``MlpPolicy``);
    otherwise Dict observations stay a ``gymnasium.spaces.Dict`` (SB3's ``MultiInputPolicy``).
    """
    gym = _require_gymnasium()

    class PureJaxEnv(gym.Env):
        metadata = {"render_modes": []}

        def __init__(self):
            self.functional_env = env
            self.params = env.default_params if params is None else params
            self.flatten = flatten
            self.observation_space = to_gymnasium_space(env.observation_space(self.params), flatten)
            self.action_space = to_gymnasium_space(env.action_space(self.params))
            self.spec_max_episode_steps = env.max_episode_steps(self.params)
            self._pending_seed = seed
            self._reset, self._step = _jitted_functions(env, flatten)
            self._state = None
            self._key = None
            self._functional_action_space = env.action_space(self.params)

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            if seed is None and self._pending_seed is not None:
                seed = self._pending_seed
            self._pending_seed = None
            super().reset(seed=seed)
            episode_seed = int(self.np_random.integers(0, 2**31 - 1))
            self._key, reset_key = jax.random.split(jax.random.PRNGKey(episode_seed))
            observation, self._state = self._reset(reset_key, self.params)
            return _to_numpy_observation(jax.device_get(observation)), {}

        def step(self, action):
            if self._state is None:
                raise RuntimeError("call reset() before step()")
            action = _functional_action(action, self._functional_action_space)
            self._key, observation, self._state, reward, terminated, truncated, info = self._step(
                self._key, self._state, action, self.params
            )
            observation, reward, terminated, truncated, info = jax.device_get(
                (observation, reward, terminated, truncated, info)
            )
            return (
                _to_numpy_observation(observation),
                float(reward),
                bool(terminated),
                bool(truncated),
                _info_to_numpy(info),
            )

    return PureJaxEnv()
