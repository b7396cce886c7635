"""Run any XLand-MiniGrid environment (``xminigrid``, the JAX port of MiniGrid and its XLand
meta-RL worlds) through purehr's interface: the grid-world suite ``xminigrid:<name>``.

Why this suite: measured on this machine, ``pip install --dry-run -c constraints.txt`` of
purehr's core plus ``xminigrid==0.9.3`` adds only xminigrid and tqdm (4.70.1, already pinned;
its other requirements, chex, flax, imageio, jax and rich, come with purehr's core), whereas
navix pulls ~50 packages (wandb, pylint, black, opentelemetry, ...), jumanji ~18
(huggingface-hub, httpx, the gym-era dm-env) and craftax pygame.

What xminigrid 0.9.3 does and the adapter keeps or changes:
- ``env.reset(params, key)`` and ``env.step(params, timestep, action)`` take and return a
  ``TimeStep`` (state, step type, reward, discount, observation); ``step`` does not auto-reset
  (only its ``GymAutoResetWrapper`` / ``DmEnvAutoResetWrapper`` do), so purehr's own
  auto-reset applies. The ``TimeStep`` is the adapter's state; ``step`` ignores its key (the
  dynamics are deterministic; only ``reset`` draws).
- Termination is ``discount == 0`` (the goal reached, or MiniGrid-Memory's wrong object);
  the time limit ``params.max_steps`` (MiniGrid's ``4 * height * width`` by default) ends an
  episode with discount 1: that is ``truncated`` here, so GAE bootstraps it. A step that both
  reaches the goal and hits the limit is terminated, not truncated.
- The reward is ``1 - 0.9 * steps / max_steps`` on reaching the goal, else 0, so
  ``info["success"]`` is ``terminated and reward > 0`` (the goal reached; a Memory episode
  ended at the wrong object is terminated without success).
- The observation is the agent's egocentric ``view x view x 2`` grid of (tile, colour)
  codes, uint8; here a float32 ``Box`` of the same shape with the codes as values (tile
  0..12, colour 0..11), which purehr's MLP takes flattened. ``direction_observation=True``
  adds the agent's heading through xminigrid's ``DirectionObservationWrapper`` (one-hot, 4)
  and makes the observation ``spaces.Dict({"direction": Box(4), "image": Box(view, view, 2)})``
  (the networks concatenate its leaves in sorted-key order: direction, then image).
- Actions: ``Discrete(env.num_actions(params))`` (6: forward, left, right, pick up, put
  down, toggle).
- ``EnvParams`` fields are static (``pytree_node=False``): one compiled program per
  setting, nothing to vmap or schedule. The XLand-MiniGrid-* worlds come with an empty
  ruleset (no goal: no episode succeeds) until a benchmark's ruleset is set in their params;
  benchmarks are downloaded from HuggingFace, so the suite's examples are the MiniGrid ports.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs import spaces
from purehr.envs.base import Environment
from purehr.types import StepResult

IMAGE_KEY = "image"
DIRECTION_KEY = "direction"
NUM_DIRECTIONS = 4
CODE_HIGH = (12.0, 11.0)
"""The largest tile and colour codes of xminigrid 0.9.3 (``NUM_TILES - 1``, ``NUM_COLORS - 1``;
``tests/test_suite_xminigrid.py`` checks them against the installed package)."""
ADAPTER_KWARGS = ("direction_observation",)
"""Constructor arguments the adapter reads itself; every other one is a field of xminigrid's
params, given to ``xminigrid.make(name, **kwargs)`` (``view_size``, ``max_steps``, ``height``...)."""


def _xminigrid():
    try:
        import xminigrid
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError("the xminigrid suite needs xminigrid: pip install 'purehr[xminigrid]'") from error
    return xminigrid


def _float(tree):
    return jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.float32), tree)


class XMiniGridEnv(Environment):
    """An XLand-MiniGrid environment, ``xminigrid.make(name, **params_kwargs)``; with
    ``direction_observation`` the observation is a dict of the view and the heading."""

    defines_success = True

    def __init__(self, name: str, *, direction_observation: bool = False, **params_kwargs: Any):
        xminigrid = _xminigrid()
        names = xminigrid.registered_environments()
        if name not in names:
            raise ValueError(f"unknown xminigrid environment {name!r}; expected one of {sorted(names)}")
        if not isinstance(direction_observation, bool):
            raise ValueError(f"direction_observation={direction_observation!r}: expected True or False")
        env, default = xminigrid.make(name)
        _check_params_kwargs(name, default, params_kwargs)
        self.name = name
        self.task_name = f"xminigrid:{name}"  # the task it belongs to (purehr.tasks.task_of_env)
        self.direction_observation = direction_observation
        self.make_kwargs = {**params_kwargs, **({"direction_observation": True} if direction_observation else {})}
        """What rebuilds this environment: ``XMiniGridEnv(name, **make_kwargs)`` (the manifest's record)."""
        if direction_observation:
            from xminigrid.wrappers import DirectionObservationWrapper

            env = DirectionObservationWrapper(env)
        self._env = env
        self._default_params = default.replace(**params_kwargs)
        _check_params_values(name, self._default_params)

    @property
    def default_params(self):
        return self._default_params

    def _observation(self, timestep):
        observation = timestep.observation
        if self.direction_observation:
            return {DIRECTION_KEY: _float(observation["direction"]), IMAGE_KEY: _float(observation["img"])}
        return _float(observation)

    def reset(self, key, params=None):
        params = self._default_params if params is None else params
        timestep = _strong_types(self._env.reset(params, key))
        return self._observation(timestep), timestep

    def step(self, key, state, action, params=None) -> StepResult:
        """The key is unused: xminigrid's dynamics are deterministic given the state."""
        params = self._default_params if params is None else params
        timestep = _strong_types(self._env.step(params, state, jnp.asarray(action, jnp.int32)))
        reward = jnp.asarray(timestep.reward, jnp.float32)
        terminated = jnp.asarray(timestep.discount, jnp.float32) == 0.0
        truncated = jnp.logical_and(timestep.last(), jnp.logical_not(terminated))
        info = {"success": jnp.logical_and(terminated, reward > 0.0)}
        return self._observation(timestep), timestep, reward, terminated, truncated, info

    def observation_space(self, params=None):
        params = self._default_params if params is None else params
        view = int(params.view_size)
        image = spaces.Box(
            low=0.0,
            high=np.asarray(CODE_HIGH, np.float32),  # per channel (tile, colour), broadcast over the view
            shape=(view, view, 2),
            dtype=jnp.float32,
        )
        if not self.direction_observation:
            return image
        direction = spaces.Box(low=0.0, high=1.0, shape=(NUM_DIRECTIONS,), dtype=jnp.float32)
        return spaces.Dict({DIRECTION_KEY: direction, IMAGE_KEY: image})

    def action_space(self, params=None):
        params = self._default_params if params is None else params
        return spaces.Discrete(int(self._env.num_actions(params)))

    def max_episode_steps(self, params=None) -> int:
        params = self._default_params if params is None else params
        return int(params.max_steps)


def _strong_types(timestep):
    """The same values without JAX's weak types (MiniGrid-Empty's ``jnp.asarray(1)`` heading is
    weakly typed, a stepped one is not), so a reset and a step give one carry type in a scan."""
    return jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.asarray(leaf).dtype), timestep)


def _check_params_kwargs(name: str, default, params_kwargs: dict[str, Any]) -> None:
    """``ValueError`` naming a keyword that is neither the adapter's nor a params field."""
    fields = sorted(default.__dataclass_fields__)
    unknown = sorted(set(params_kwargs) - set(fields))
    if unknown:
        raise ValueError(
            f"xminigrid environment {name!r}: unknown argument(s) {unknown}; expected {list(ADAPTER_KWARGS)} "
            f"or fields of its params {fields}"
        )


def _check_params_values(name: str, params) -> None:
    """``ValueError`` for sizes xminigrid would not refuse but cannot run (it asserts nothing)."""
    view = params.view_size
    if isinstance(view, bool) or not isinstance(view, (int, np.integer)) or view < 3 or view % 2 == 0:
        raise ValueError(f"xminigrid environment {name!r}: view_size={view!r}; expected an odd integer >= 3")
    limit = params.max_steps
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise ValueError(f"xminigrid environment {name!r}: max_steps={limit!r}; expected a positive integer")
    for size in ("height", "width"):
        value = getattr(params, size)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 3:
            raise ValueError(f"xminigrid environment {name!r}: {size}={value!r}; expected an integer >= 3")
