"""An optional swing environment backed by SwingRL's own simulator.

SwingRL (github.com/pierrelux/swing-rl) is not on PyPI and not a dependency: this module
imports without it, and constructing ``SwingRLEnv`` without it raises ``ImportError`` with
the install command. Only the simulator interface listed at the end of ``docs/swing_model.md``
is used (``initial_state, advance, summary, summary_fields, n_free, n_actions,
spec.nominal_length``); the reward, success and truncation are purehr's (``env.py``), so a
policy can be compared on both plants. The adapter is jittable exactly when SwingRL's
simulator is written in JAX; SwingRL runs in float64, so enable x64 for bit-level parity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from purehr.envs import spaces
from purehr.envs.base import Environment, all_finite, end_if_not_finite
from purehr.envs.swing import physics
from purehr.envs.swing.env import (
    INFO_KEYS,
    invalid_action,
    is_success,
    sanitize_action,
    swing_diagnostics,
    swing_reward,
)
from purehr.envs.swing.physics import SwingParams
from purehr.types import StepResult

INSTALL_HINT = (
    "SwingRLEnv needs the SwingRL library: pip install swing-rl "
    "(it is not on PyPI; from its repository: "
    "pip install git+https://github.com/pierrelux/swing-rl)"
)


def import_swing_rl():
    """The ``swing_rl`` module, or ``ImportError`` saying how to install it."""
    try:
        import swing_rl
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    return swing_rl


@struct.dataclass
class SwingRLState:
    sim_state: Any  # SwingRL's own (batch of one) state
    energy_norm: jax.Array  # for the shaping term of the next reward
    step: jax.Array


class SwingRLEnv(Environment[SwingRLState, SwingParams]):
    """purehr's environment interface over a SwingRL simulator (a batch of one).

    ``simulator`` is a SwingRL batched simulator built with SwingRL's own API (its model
    choice is SwingRL's business); ``params`` supplies the reward coefficients, dt and
    horizon (the physical constants are the simulator's).
    """

    name = "swing_rl"

    def __init__(self, simulator: Any = None, params: SwingParams | None = None):
        import_swing_rl()
        if simulator is None:
            raise TypeError("SwingRLEnv(simulator=...): pass a SwingRL simulator instance")
        self.simulator = simulator
        self.summary_fields = tuple(simulator.summary_fields)
        missing = sorted(set(INFO_KEYS) - {"success"} - set(self.summary_fields))
        if missing:
            raise ValueError(f"SwingRL summary_fields {self.summary_fields} lack {missing}")
        self._default_params = physics.validated_default(params)

    @property
    def default_params(self) -> SwingParams:
        return self._default_params

    def _summary(self, summary) -> dict[str, jax.Array]:
        """SwingRL's summary (a mapping, or an array whose last axis is summary_fields)."""
        names = [k for k in INFO_KEYS if k != "success"]
        if isinstance(summary, Mapping):
            return {name: jnp.asarray(summary[name])[0] for name in names}
        summary = jnp.asarray(summary)
        return {name: summary[0, self.summary_fields.index(name)] for name in names}

    def reset(self, key: jax.Array, params: SwingParams | None = None):
        params = self._default_params if params is None else params
        theta, theta_dot = physics.training_start(key, params)
        return self.reset_to(theta, theta_dot, params)

    def reset_to(self, theta, theta_dot, params: SwingParams | None = None):
        sim = self.simulator
        q = jnp.zeros((1, sim.n_free)).at[0, 0].set(theta)
        q_dot = jnp.zeros((1, sim.n_free)).at[0, 0].set(theta_dot)
        sim_state = sim.initial_state(q, q_dot)
        zero_action = jnp.zeros((1, sim.n_actions))
        observation = jnp.asarray(sim.observe(sim_state, zero_action))[0]
        energy_norm = self._summary(sim.summary(sim_state, zero_action))["energy_norm"]
        return observation, SwingRLState(sim_state, energy_norm, jnp.zeros((), jnp.int32))

    def step(
        self, key: jax.Array, state: SwingRLState, action: jax.Array, params: SwingParams | None = None
    ) -> StepResult:
        params = self._default_params if params is None else params
        invalid = invalid_action(action)
        action = sanitize_action(action)
        sim_state, observation, summary = self.simulator.advance(state.sim_state, action[None])
        info = self._summary(summary)
        success = is_success(info["swing_angle"], info["seat_radius"], self.simulator.spec.nominal_length, params)
        reward = swing_reward(state.energy_norm, info["energy_norm"], info["command_speed"], success, params)
        step = state.step + 1
        truncated = (step >= params.horizon) & ~success
        info["success"] = success
        info["invalid_action"] = invalid
        reward = jnp.asarray(reward)
        return end_if_not_finite(
            (
                jnp.asarray(observation)[0],
                SwingRLState(sim_state, info["energy_norm"], step),
                reward,
                success,
                truncated,
                info,
            ),
            all_finite(sim_state) & jnp.isfinite(reward),
        )

    def observation_space(self, params: SwingParams | None = None) -> spaces.Box:
        observation, _ = self.reset_to(0.0, 0.0, params)
        return spaces.Box(-jnp.inf, jnp.inf, tuple(observation.shape))

    def action_space(self, params: SwingParams | None = None) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (int(self.simulator.n_actions),))

    def max_episode_steps(self, params: SwingParams | None = None) -> int:
        return (self._default_params if params is None else params).horizon

    def diagnostics(self, info: dict[str, jax.Array]) -> dict[str, jax.Array]:
        return swing_diagnostics(info)
