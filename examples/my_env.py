"""Your own environment for purehr: a template to copy, rename and change.

The task: a point on the square [-1, 1]^2 must reach a goal disc. Each step the agent picks a
velocity (a continuous action in [-1, 1]^2, scaled by ``max_speed``); the episode is
terminated when the point is inside the goal disc (a success) and truncated at ``max_steps``.
PPO learns it in well under a minute on two CPU cores; acting at random or doing nothing
rarely succeeds, so the floors are far below what training reaches.

Train it from the folder that holds this file (docs/environments.md)::

    /path/to/purehr/.venv/bin/python /path/to/purehr/scripts/train_all_seeds.py --tasks my_env:make_env --seeds 0 1 \
        --run-dir runs/point --no-render
    /path/to/purehr/.venv/bin/python /path/to/purehr/scripts/train_all_seeds.py --tasks my_env:make_env \
        --env-arg my_env:make_env goal_radius=0.2 --run-dir runs/point_easy

or from Python::

    import purehr.tasks
    import my_env
    purehr.tasks.register_task(
        purehr.tasks.environment_task(
            "point", my_env.make_env, default_config=my_env.PPO_CONFIG, default_protocol=my_env.PROTOCOL
        )
    )

What purehr reads of this file: ``make_env`` (any callable returning an ``Environment``; the
keyword arguments a run gives it are recorded in the run's manifest, so resume and restore
call it again with the same ones), ``PPO_CONFIG`` (optional: the task's default PPO
configuration; without it, the default for the action space of
``purehr.tasks.environment_task``), ``PROTOCOL`` (optional: its checkpoint and evaluation
settings, whichever algorithm trains it) and ``BASELINES`` with ``REFERENCE_BASELINE`` (optional, at
the end: your own reference policies, evaluated beside the floors; uncomment them to try).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from purehr import PPOConfig, ProtocolSettings
from purehr.envs import spaces
from purehr.envs.base import Environment
from purehr.types import StepResult

# --- state and params ---------------------------------------------------------------------
# Both are flax struct dataclasses, i.e. pytrees: training vmaps the state over environments
# and seeds and scans it over time; the params are passed into every reset and step, so they
# can change inside a training scan (a curriculum) without compiling again.


@struct.dataclass
class PointState:
    """Everything that changes during an episode (no Python objects: arrays only)."""

    position: jax.Array  # float32 [2]: the point
    goal: jax.Array  # float32 [2]: the centre of the goal disc, drawn at reset
    time: jax.Array  # int32 []: steps taken in this episode


@struct.dataclass
class PointParams:
    """Every constant of the task, with its default. Numbers are traced leaves; ``max_steps``
    is static (``pytree_node=False``) because it sets the length of the evaluation scan."""

    goal_radius: float = 0.1  # success: the point within this distance of the goal
    max_speed: float = 0.1  # distance moved per step at full action
    success_bonus: float = 1.0  # reward on the step that reaches the goal
    max_steps: int = struct.field(pytree_node=False, default=50)  # the time limit (truncation)


ARENA = 1.0
"""The point and the goal stay on [-ARENA, ARENA]^2."""


# --- the environment ------------------------------------------------------------------------


class PointReach(Environment[PointState, PointParams]):
    """A point that must reach a goal disc. It holds no state: ``reset`` and ``step`` are pure
    functions of their arguments (jit, vmap and scan need that).

    Constructor keywords are the fields of ``PointParams`` (``PointReach(goal_radius=0.2)``):
    ``make_env(**kwargs)`` passes a run's ``--env-arg`` values here, and a saved model's
    params come back through here too, so what is refused here is refused everywhere."""

    name = "point_reach"  # how the logs and wrappers name the environment
    defines_success = True  # info["success"] means something: evaluations report success_rate

    def __init__(self, **param_values: Any):
        known = sorted(PointParams.__dataclass_fields__)
        unknown = sorted(set(param_values) - set(known))
        if unknown:
            raise ValueError(f"PointReach: unknown parameter(s) {unknown}; expected some of {known}")
        values = {name: _positive_number(name, value) for name, value in param_values.items()}
        if "max_steps" in values:
            values["max_steps"] = _positive_integer("max_steps", values["max_steps"])
        self._params = PointParams(**values)

    @property
    def default_params(self) -> PointParams:
        return self._params

    def reset(self, key: jax.Array, params: PointParams | None = None) -> tuple[jax.Array, PointState]:
        """A random start and goal, both uniform on the square. A reset depends on its key and
        the params only (PPO draws every reset of a rollout beforehand)."""
        params = self._params if params is None else params
        start_key, goal_key = jax.random.split(key)
        position = jax.random.uniform(start_key, (2,), jnp.float32, -ARENA, ARENA)
        goal = jax.random.uniform(goal_key, (2,), jnp.float32, -ARENA, ARENA)
        state = PointState(position=position, goal=goal, time=jnp.int32(0))
        return self._observation(state), state

    def step(
        self, key: jax.Array, state: PointState, action: jax.Array, params: PointParams | None = None
    ) -> StepResult:
        """Move, then judge: ``(obs, state, reward, terminated, truncated, info)``. The reward
        is the progress toward the goal (distance before minus after) plus the bonus on
        success; ``terminated`` on success (nothing to bootstrap), ``truncated`` at the time
        limit (PPO bootstraps the value there)."""
        params = self._params if params is None else params
        action = jnp.asarray(action, jnp.float32)
        # a NaN or infinite action acts as "stay" and is reported (the training log counts it)
        invalid_action = jnp.logical_not(jnp.all(jnp.isfinite(action)))
        velocity = jnp.where(invalid_action, 0.0, jnp.clip(action, -1.0, 1.0)) * params.max_speed
        position = jnp.clip(state.position + velocity, -ARENA, ARENA)
        before = jnp.linalg.norm(state.goal - state.position)
        distance = jnp.linalg.norm(state.goal - position)
        success = distance <= params.goal_radius
        time = state.time + 1
        terminated = success
        truncated = jnp.logical_and(time >= params.max_steps, jnp.logical_not(success))
        reward = (before - distance) + jnp.where(success, params.success_bonus, 0.0)
        next_state = PointState(position=position, goal=state.goal, time=time)
        # info: the same keys and shapes at every step (scan needs that); "success" is required
        # (bool: the goal was reached on this step); the rest feeds diagnostics() below
        info = {"success": success, "distance": distance, "invalid_action": invalid_action}
        return self._observation(next_state), next_state, reward.astype(jnp.float32), terminated, truncated, info

    def _observation(self, state: PointState) -> jax.Array:
        """float32 [4]: the goal relative to the point, then the point itself (the walls)."""
        return jnp.concatenate([state.goal - state.position, state.position]).astype(jnp.float32)

    # --- spaces: what the networks are sized from (purehr.envs.spaces) ------------------------

    def observation_space(self, params: PointParams | None = None) -> spaces.Box:
        return spaces.Box(low=-2 * ARENA, high=2 * ARENA, shape=(4,), dtype=jnp.float32)

    def action_space(self, params: PointParams | None = None) -> spaces.Box:
        """A Box: PPO uses a tanh-squashed Gaussian policy, and the floors are acting at random
        and the zero action. (A Discrete or MultiDiscrete space gives a categorical policy.)"""
        return spaces.Box(low=-1.0, high=1.0, shape=(2,), dtype=jnp.float32)

    def max_episode_steps(self, params: PointParams | None = None) -> int:
        """The horizon of a held-out episode (every evaluation runs this many steps)."""
        return int((self._params if params is None else params).max_steps)

    def diagnostics(self, info: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """Per-step scalars averaged into updates.csv beside the returns."""
        return {"distance": info["distance"]}


def _positive_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"PointReach: {name}={value!r}; expected a positive finite number")
    return value


def _positive_integer(name: str, value: Any) -> int:
    if int(value) != value:
        raise ValueError(f"PointReach: {name}={value!r}; expected a positive integer")
    return int(value)


# --- what purehr reads of this module -------------------------------------------------------


def make_env(**kwargs: Any) -> PointReach:
    """The factory ``--tasks my_env:make_env`` names. ``kwargs``: a run's ``--env-arg`` values
    (recorded in its manifest), or nothing for the default task."""
    return PointReach(**kwargs)


PPO_CONFIG = PPOConfig(
    total_timesteps=40_960,  # 40 updates of 16 environments x 64 steps
    num_envs=16,
    num_steps=64,
    num_epochs=4,
    minibatch_size=256,
    learning_rate=3e-3,
    anneal_lr=True,
    gamma=0.97,
    gae_lambda=0.95,
    ent_coef=0.0,
    actor_hidden=(32, 32),
    critic_hidden=(32, 32),
    log_std_init=-0.5,
)
"""The task's default PPO configuration (optional; every flag of train_all_seeds.py overrides
its fields): a small budget, since the task is small. A ``SAC_CONFIG`` (a ``purehr.SACConfig``)
would be its default for ``--tasks my_env:make_env@sac``; a Discrete task's ``PQN_CONFIG`` (a
``purehr.PQNConfig``) for ``@pqn``."""

PROTOCOL = ProtocolSettings(
    checkpoint_interval=10_240,  # a checkpoint (and a held-out evaluation) every 10 updates
    eval_episodes=200,
    quick_eval_episodes=200,
)
"""The task's checkpoint and evaluation settings under every algorithm (optional; without it,
``ProtocolSettings()``'s; ``--checkpoint-interval``, ``--eval-episodes``... override them)."""


# --- optional: your own reference policies (docs/environments.md, "Your own baselines") ------


def make_straight_policy(env: PointReach, env_params: PointParams):
    """Full speed straight at the goal: the hand-written controller PPO is compared with.
    ``make_policy(env, env_params)`` returns ``policy(observation, t, key) -> action``, pure and
    jittable (the held-out evaluation scans it over every episode)."""

    def policy(observation: jax.Array, t: jax.Array, key: jax.Array) -> jax.Array:
        return jnp.clip(observation[:2] / env_params.max_speed, -1.0, 1.0)

    return policy


# BASELINES = {"straight": make_straight_policy}  # name (also --policy's) -> make_policy
# REFERENCE_BASELINE = "straight"  # the task's reference; a baseline not named here is a floor
