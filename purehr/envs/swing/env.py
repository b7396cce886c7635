"""``SwingEnv``: the functional environment around the rigid-rod plant."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purehr.envs import spaces
from purehr.envs.base import Environment, all_finite, end_if_not_finite
from purehr.envs.swing import physics
from purehr.envs.swing.physics import PlantState, SwingParams
from purehr.types import StepResult

OBSERVATION_SIZE = 11
ACTION_SIZE = 2
ANGLE_INDICES = (0, 1, 3, 4, 7, 8)
"""The entries of the full observation that ``observe_rates=False`` keeps: cos theta, sin theta,
cos psi, sin psi, squat, lean. It drops theta'/w0, psi'/w0, the command rates and energy_norm
(energy holds theta'^2, so it would give the amplitude of the rate)."""

PHASE_FEATURES = {
    "none": None,
    "theta": (1, 2, False),
    "psi": (4, 5, False),
    "theta+amplitude": (1, 2, True),
    "psi+amplitude": (4, 5, True),
}
"""``phase_features`` -> the (sin angle, rate / w0) entries of the full observation whose phase
``physics.phase_entries`` appends (cos phi, sin phi: 2 more numbers) and whether it appends the
log-amplitude too (3), or None for none."""

INFO_KEYS = ("time", "swing_angle", "seat_radius", "energy_norm", "tension", "command_speed", "success")


@struct.dataclass
class SwingState:
    """Plant state plus the episode bookkeeping (step counter, start angle)."""

    plant: PlantState
    time: jax.Array  # seconds since the episode began
    step: jax.Array  # int32 control steps taken
    start_angle: jax.Array  # unwrapped theta at reset (kept for records and SwingRL parity)


def _default_float():
    return jnp.result_type(float)


def sanitize_action(action: jax.Array) -> jax.Array:
    """NaN and +-inf -> 0, the neutral pose (``invalid_action`` flags them), then clip to
    [-1, 1] (finite values beyond the box saturate, as a tanh policy's limits do)."""
    action = jnp.asarray(action)
    if not jnp.issubdtype(action.dtype, jnp.floating):
        action = action.astype(_default_float())
    return jnp.clip(jnp.where(jnp.isfinite(action), action, 0.0), -1.0, 1.0)


def invalid_action(action: jax.Array) -> jax.Array:
    """True when any component is NaN or infinite: ``sanitize_action`` replaced it."""
    action = jnp.asarray(action)
    if not jnp.issubdtype(action.dtype, jnp.inexact):
        return jnp.zeros((), bool)
    return jnp.logical_not(jnp.all(jnp.isfinite(action)))


def energy_potential(energy_norm: jax.Array) -> jax.Array:
    """P = clip(energy_norm, -0.5, 1.5): the shaping potential."""
    return jnp.clip(energy_norm, -0.5, 1.5)


def is_success(swing_angle: jax.Array, seat_radius: jax.Array, length, params: SwingParams) -> jax.Array:
    """A full revolution with the seat still out at >= 0.9 L (``length``: nominal L)."""
    return (jnp.abs(swing_angle) >= params.success_angle) & (seat_radius >= params.success_radius_fraction * length)


def swing_reward(
    energy_norm_before: jax.Array,
    energy_norm_after: jax.Array,
    command_speed: jax.Array,
    success: jax.Array,
    params: SwingParams,
) -> jax.Array:
    """k_shape (gamma P' - P) - k_effort |c'| - k_time + k_success * success."""
    shaping = params.gamma * energy_potential(energy_norm_after) - energy_potential(energy_norm_before)
    return params.k_shape * shaping - params.k_effort * command_speed - params.k_time + params.k_success * success


def swing_diagnostics(info: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """Logged per update: the minimum tension (reduce with min) and mean command speed."""
    return {"min_tension": info["tension"], "command_speed": info["command_speed"]}


class SwingEnv(Environment[SwingState, SwingParams]):
    """A standing rider pumping a rigid-rod swing over the top bar (``docs/swing_model.md``).

    Actions are squat and lean targets in [-1, 1]; success (terminal) is a full revolution,
    ``|swing_angle| >= 2 pi`` with the seat at ``>= 0.9 L``; the episode is truncated at
    ``params.horizon`` control steps. A NaN or infinite action component acts as 0 and sets
    ``info["invalid_action"]``; a plant state that is no longer finite terminates the
    episode with reward 0 and ``info["nonfinite_state"]`` set.

    ``observe_rates=False`` is the partially observed variant (task ``swing-angles``): the
    observation keeps only the angles and the posture (``ANGLE_INDICES``, 6 numbers), so the
    swing's phase and direction must come from memory of recent angles. Dynamics and rewards
    are the same.

    ``phase_features="theta"`` (or ``"psi"``, the CoM angle) appends the cos and sin of the
    swing's phase, atan2(theta'/w0, sin theta), which do not shrink with the amplitude as the
    other entries do near rest (``physics.phase_entries``; 13 numbers; ``"theta+amplitude"``
    and ``"psi+amplitude"`` add the amplitude on a log scale, 14). ``"none"`` (the
    default) is the 11-number observation. The phase reads the rate, so it is refused with
    ``observe_rates=False``.
    """

    name = "swing"

    def __init__(self, params: SwingParams | None = None, observe_rates: bool = True, phase_features: str = "none"):
        if not isinstance(observe_rates, (bool, np.bool_)):
            raise ValueError(
                f"observe_rates={observe_rates!r}, expected True (the full observation) or False (angles only)"
            )
        if not isinstance(phase_features, str) or phase_features not in PHASE_FEATURES:
            raise ValueError(f"phase_features={phase_features!r}, expected one of {', '.join(PHASE_FEATURES)}")
        if not observe_rates and phase_features != "none":
            raise ValueError(
                f"phase_features={phase_features!r} with observe_rates=False: expected 'none' (the phase is "
                "computed from the rates this variant hides)"
            )
        self._default_params = physics.validated_default(params)
        self.observe_rates = bool(observe_rates)
        self.phase_features = phase_features
        if not self.observe_rates:
            self.name = "swing-angles"  # the task it belongs to (the logs name the task by it)

    def _observe(self, plant: PlantState, params: SwingParams) -> jax.Array:
        """(11,) the full observation, (13,) with the phase entries, or (6,) its ``ANGLE_INDICES``."""
        full = physics.observation(plant, params)
        phase = PHASE_FEATURES[self.phase_features]
        if phase is not None:
            angle, rate, amplitude = phase
            # the phase reads the entries as stored: fused, XLA recomputed the rate entry inside
            # the phase at one CPU optimisation level and not at another (the initial states'
            # last bits differed between levels 1 and 3; tests/test_writer.py)
            stored = jax.lax.optimization_barrier(full)
            return jnp.concatenate([full, physics.phase_entries(stored[angle], stored[rate], amplitude)])
        return full if self.observe_rates else full[np.asarray(ANGLE_INDICES)]

    @property
    def observation_size(self) -> int:
        """11, 13 or 14 with ``phase_features``, 6 without the rates."""
        if not self.observe_rates:
            return len(ANGLE_INDICES)
        phase = PHASE_FEATURES[self.phase_features]
        return OBSERVATION_SIZE + (0 if phase is None else 3 if phase[2] else 2)

    @property
    def default_params(self) -> SwingParams:
        return self._default_params

    def _params(self, params: SwingParams | None) -> SwingParams:
        return self._default_params if params is None else physics.validate(params)

    # ------------------------------------------------------------------ episode
    def reset(self, key: jax.Array, params: SwingParams | None = None):
        params = self._params(params)
        theta, theta_dot = physics.training_start(key, params, _default_float())
        return self.reset_to(theta, theta_dot, params)

    def reset_to(self, theta, theta_dot, params: SwingParams | None = None):
        """Start an episode at rest in the neutral pose from a given swing angle and rate."""
        params = self._params(params)
        dtype = jnp.result_type(theta, theta_dot, float)
        theta = jnp.asarray(theta, dtype)
        plant = PlantState(
            theta=theta,
            theta_dot=jnp.asarray(theta_dot, dtype),
            command=jnp.zeros(ACTION_SIZE, dtype),
            command_rate=jnp.zeros(ACTION_SIZE, dtype),
        )
        state = SwingState(plant=plant, time=jnp.zeros((), dtype), step=jnp.zeros((), jnp.int32), start_angle=theta)
        return self._observe(plant, params), state

    def step(
        self, key: jax.Array, state: SwingState, action: jax.Array, params: SwingParams | None = None
    ) -> StepResult:
        params = self._params(params)
        target = sanitize_action(action).astype(state.plant.theta.dtype)
        energy_norm_before = physics.energy_norm(state.plant, params)

        plant = physics.rk4_advance(state.plant, target, params)
        step = state.step + 1
        time = (step * params.dt).astype(state.time.dtype)
        next_state = SwingState(plant=plant, time=time, step=step, start_angle=state.start_angle)

        energy_norm = physics.energy_norm(plant, params)
        command_speed = physics.command_speed(plant)
        seat_radius = jnp.full_like(plant.theta, params.length)
        success = is_success(plant.theta, seat_radius, params.length, params)
        reward = swing_reward(energy_norm_before, energy_norm, command_speed, success, params)
        truncated = (step >= params.horizon) & ~success
        info = {
            "time": next_state.time,
            "swing_angle": plant.theta,
            "seat_radius": seat_radius,
            "energy_norm": energy_norm,
            "tension": physics.tension(plant, target, params),
            "command_speed": command_speed,
            "success": success,
            "invalid_action": invalid_action(action),
        }
        reward = reward.astype(plant.theta.dtype)
        # a plant that is no longer finite ends the episode (terminated, reward 0: no NaN to bootstrap)
        return end_if_not_finite(
            (self._observe(plant, params), next_state, reward, success, truncated, info),
            all_finite(plant) & jnp.isfinite(reward),
        )

    # ------------------------------------------------------------------ description
    def observation_space(self, params: SwingParams | None = None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (self.observation_size,), _default_float())

    def action_space(self, params: SwingParams | None = None) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (ACTION_SIZE,), _default_float())

    def max_episode_steps(self, params: SwingParams | None = None) -> int:
        return self._params(params).horizon

    def diagnostics(self, info: dict[str, jax.Array]) -> dict[str, jax.Array]:
        return swing_diagnostics(info)
