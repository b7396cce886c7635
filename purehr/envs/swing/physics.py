"""The rigid-rod standing rider of ``docs/swing_model.md``: parameters, geometry, RK4 plant.

Everything here is a pure function of arrays and a ``SwingParams`` pytree, so it can be
jitted, vmapped and differentiated. Body-coordinate derivatives (rho', alpha'', ...) come
from the geometry by nested ``jax.jvp``: the equation of motion can never disagree with
the geometry it is derived from. Arrays take the dtype of their inputs (Python-float
params are weakly typed), so the plant runs in float32 by default and in float64 under
``jax_enable_x64``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

# Index of each quantity in the vector `body_geometry` returns.
RHO, ALPHA, BETA, INERTIA = 0, 1, 2, 3


@struct.dataclass
class SwingParams:
    """Every constant of the swing task (defaults: the table of ``docs/swing_model.md``).

    Reward coefficients (the potential-based shaping dominates): pumping from rest to the
    top is worth about ``k_shape`` = 10 of (discounted) shaping and success pays
    ``k_success`` = 10. Within PPO's effective horizon 1 / (1 - gamma) = 200 steps the
    structured controller gains about 0.3 of energy_norm (3 reward units), while its effort
    (|c'| about 3.2 per step) costs ``k_effort`` = 0.0005 x 3.2 x 200 = 0.3 and the time
    penalty ``k_time`` = 0.001 costs 0.2: small enough not to teach "stand still" before
    the energy signal is found, large enough to prefer smooth, fast pumping. ``gamma`` must
    equal the PPO discount for the shaping to leave the optimal policy unchanged (the
    undiscounted return also carries -(1 - gamma) k_shape sum(P): compare returns only at
    the same gamma).
    """

    gravity: float = 9.81  # g, m/s^2
    mass: float = 70.0  # m, rider mass, kg
    length: float = 2.2  # L, suspension length, m
    damping: float = 0.5  # c_d, pivot viscous damping, N m s
    h_max: float = 1.05  # CoM height above the seat standing tall, m
    h_min: float = 0.55  # CoM height above the seat in a deep squat, m
    beta_max: float = math.radians(20.0)  # largest lean of the body axis, rad
    gyration_radius: float = 0.28  # J0 = m * gyration_radius^2, m
    servo_frequency: float = 12.0  # w_a of the critically damped command servo, rad/s
    dt: float = 0.02  # control interval, s
    # Training starts: theta (rad) and theta' (rad/s) ~ N(0, reset_noise^2). Wide on purpose:
    # from hanging still to near the top, so PPO sees high swings (0.01, the held-out starts'
    # scale, taught it to stand still: docs/swing_model.md). Evaluation uses fixed starts.
    reset_noise: float = 1.0
    # A fraction of the training starts drawn at the held-out scale instead (theta, theta' ~
    # N(0, small_reset_noise^2), from the training key): the starts that fast pumping misses.
    # 0.0 (the default) draws every start wide, the same numbers as before the field existed.
    small_start_fraction: float = 0.0
    small_reset_noise: float = 0.05
    success_angle: float = 2.0 * math.pi  # |swing_angle| that counts as a full revolution
    success_radius_fraction: float = 0.9  # seat_radius >= this * L for success
    k_shape: float = 10.0  # weight of the potential-based energy shaping
    k_effort: float = 0.0005  # penalty per unit of command speed |c'|
    k_time: float = 0.001  # penalty per control step
    k_success: float = 10.0  # bonus on the successful step
    gamma: float = 0.995  # discount of the shaping (= PPO discount)
    substeps: int = struct.field(pytree_node=False, default=8)  # RK4 sub-steps per dt
    horizon: int = struct.field(pytree_node=False, default=1600)  # control steps (32 s)

    @property
    def inertia_max(self):
        """J0: the body's inertia about its CoM when standing tall."""
        return self.mass * self.gyration_radius**2

    @property
    def rho_neutral(self):
        """rho0 = L - (h_max + h_min) / 2, the CoM radius in the neutral pose."""
        return self.length - 0.5 * (self.h_max + self.h_min)


def _is_concrete(value) -> bool:
    return not isinstance(value, jax.core.Tracer)


def validate(params: SwingParams) -> SwingParams:
    """Raise ``ValueError`` for physically meaningless params before anything compiles.

    Traced fields (inside jit or vmap) are skipped: they were checked when concrete.
    """

    def check(name: str, ok: Callable[[float], bool], expected: str) -> None:
        value = getattr(params, name)
        if not _is_concrete(value):
            return
        if not bool(np.all(ok(np.asarray(value, dtype=float)))):
            raise ValueError(f"SwingParams.{name}={value!r}: expected {expected}")

    for name in ("gravity", "mass", "length", "dt", "servo_frequency"):
        check(name, lambda v: v > 0, "a positive number")
    for name in ("damping", "gyration_radius", "reset_noise", "small_reset_noise", "k_effort", "k_time"):
        check(name, lambda v: v >= 0, "a non-negative number")
    check("small_start_fraction", lambda v: (v >= 0) & (v <= 1), "a fraction in [0, 1]")
    check("h_min", lambda v: v > 0, "a positive number")
    if _is_concrete(params.h_min) and _is_concrete(params.h_max):
        if not bool(np.all(np.asarray(params.h_min) < np.asarray(params.h_max))):
            raise ValueError(f"SwingParams.h_min={params.h_min!r} >= h_max={params.h_max!r}: expected h_min < h_max")
        if _is_concrete(params.length) and not bool(np.all(np.asarray(params.h_max) < np.asarray(params.length))):
            raise ValueError(
                f"SwingParams.h_max={params.h_max!r}: expected < length="
                f"{params.length!r} (the CoM must stay below the pivot)"
            )
    check("beta_max", lambda v: (v >= 0) & (v < math.pi / 2), "an angle in [0, pi/2) rad")
    check("gamma", lambda v: (v > 0) & (v <= 1), "a discount in (0, 1]")
    for name in ("substeps", "horizon"):
        value = getattr(params, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"SwingParams.{name}={value!r}: expected an integer >= 1")
    return params


def validated_default(params: SwingParams | None) -> SwingParams:
    """A swing environment's default params (``SwingEnv``, ``SwingRLEnv``): ``params``, or
    ``SwingParams()`` when None, through ``validate``."""
    return validate(SwingParams() if params is None else params)


def training_start(key: jax.Array, params: SwingParams, dtype: jnp.dtype | None = None) -> tuple[jax.Array, jax.Array]:
    """(theta, theta_dot) of a training reset: N(0, reset_noise^2) each, or with probability
    ``small_start_fraction`` N(0, small_reset_noise^2) each.

    The normal draw uses ``key`` itself and the choice a key folded from it, so a fraction of
    0 gives exactly the starts of a plain ``reset_noise`` draw.
    """
    dtype = jnp.result_type(float) if dtype is None else dtype
    small = jax.random.uniform(jax.random.fold_in(key, 1), (), dtype) < params.small_start_fraction
    scale = jnp.where(small, params.small_reset_noise, params.reset_noise)
    theta, theta_dot = scale * jax.random.normal(key, (2,), dtype)
    return theta, theta_dot


def natural_frequency(params: SwingParams) -> jax.Array:
    """w0 = sqrt(m g rho0 / (m rho0^2 + J(neutral))), the small-oscillation frequency."""
    neutral = body_geometry(jnp.zeros(2, jnp.result_type(params.length, float)), params)
    rho0, inertia0 = neutral[RHO], neutral[INERTIA]
    return jnp.sqrt(params.mass * params.gravity * rho0 / (params.mass * rho0**2 + inertia0))


# ----------------------------------------------------------------------------- geometry


def com_height(squat: jax.Array, params: SwingParams) -> jax.Array:
    """h: CoM height above the seat along the body axis (squat +1 low, -1 tall)."""
    return 0.5 * (params.h_max + params.h_min) - squat * 0.5 * (params.h_max - params.h_min)


def body_geometry(command: jax.Array, params: SwingParams) -> jax.Array:
    """(rho, alpha, beta, J) of the body for the command c = (squat, lean)."""
    height = com_height(command[0], params)
    beta = command[1] * params.beta_max
    radial = params.length - height * jnp.cos(beta)
    tangential = height * jnp.sin(beta)
    rho = jnp.sqrt(radial**2 + tangential**2)
    alpha = jnp.arctan2(tangential, radial)
    inertia = params.inertia_max * (height / params.h_max) ** 2
    return jnp.stack([rho, alpha, beta, inertia])


def second_time_derivative(
    function: Callable[[jax.Array], jax.Array], x: jax.Array, x_dot: jax.Array, x_ddot: jax.Array
):
    """(f, df/dt, d2f/dt2) of ``f(x(t))`` from x, x', x'' by nested forward-mode jvp.

    The inner jvp gives f' = Df x'; differentiating the pair (x, x') -> f' along
    (x', x'') gives f'' = D2f[x', x'] + Df x''. Exact, no finite differences.
    """

    def value_and_rate(position, velocity):
        return jax.jvp(function, (position,), (velocity,))

    (value, rate), (_, acceleration) = jax.jvp(value_and_rate, (x, x_dot), (x_dot, x_ddot))
    return value, rate, acceleration


def com_position(theta: jax.Array, command: jax.Array, params: SwingParams) -> jax.Array:
    """CoM position (x, y) with the pivot at the origin, y up."""
    geometry = body_geometry(command, params)
    psi = theta + geometry[ALPHA]
    return geometry[RHO] * jnp.stack([jnp.sin(psi), -jnp.cos(psi)])


# ----------------------------------------------------------------------------- dynamics


@struct.dataclass
class PlantState:
    """Continuous state: swing angle (unwrapped), its rate, body command and its rate."""

    theta: jax.Array
    theta_dot: jax.Array
    command: jax.Array  # c = (squat, lean), shape (2,)
    command_rate: jax.Array  # c', shape (2,)


def servo_acceleration(
    command: jax.Array, command_rate: jax.Array, target: jax.Array, params: SwingParams
) -> jax.Array:
    """c'' = w_a^2 (a - c) - 2 w_a c': critically damped, so body accelerations stay finite."""
    w = params.servo_frequency
    return w**2 * (target - command) - 2.0 * w * command_rate


def body_motion(plant: PlantState, target: jax.Array, params: SwingParams):
    """Geometry and its first two time derivatives along the servo trajectory."""
    command_accel = servo_acceleration(plant.command, plant.command_rate, target, params)
    geometry, rate, accel = second_time_derivative(
        lambda c: body_geometry(c, params), plant.command, plant.command_rate, command_accel
    )
    return geometry, rate, accel, command_accel


def angular_acceleration(
    theta: jax.Array, theta_dot: jax.Array, geometry: jax.Array, rate: jax.Array, accel: jax.Array, params: SwingParams
) -> jax.Array:
    """theta'' from the reduced rigid-rod equation (angular momentum about the pivot)."""
    m, g = params.mass, params.gravity
    rho, alpha, inertia = geometry[RHO], geometry[ALPHA], geometry[INERTIA]
    rho_dot, alpha_dot, beta_dot, inertia_dot = rate[RHO], rate[ALPHA], rate[BETA], rate[INERTIA]
    alpha_ddot, beta_ddot = accel[ALPHA], accel[BETA]
    psi = theta + alpha
    psi_dot = theta_dot + alpha_dot
    torque = (
        -m * rho**2 * alpha_ddot
        - 2.0 * m * rho * rho_dot * psi_dot
        - inertia * beta_ddot
        - inertia_dot * (theta_dot + beta_dot)
        - m * g * rho * jnp.sin(psi)
        - params.damping * theta_dot
    )
    return torque / (m * rho**2 + inertia)


def plant_derivative(plant: PlantState, target: jax.Array, params: SwingParams) -> PlantState:
    geometry, rate, accel, command_accel = body_motion(plant, target, params)
    theta_ddot = angular_acceleration(plant.theta, plant.theta_dot, geometry, rate, accel, params)
    return PlantState(plant.theta_dot, theta_ddot, plant.command_rate, command_accel)


def rk4_advance(plant: PlantState, target: jax.Array, params: SwingParams) -> PlantState:
    """One control interval: ``params.substeps`` classical RK4 steps, the target held."""
    h = params.dt / params.substeps
    # jitted so that its four stages are one trace (jit's cache): the nested jvp makes the
    # derivative about 270 equations, each traced again under every vmap around the step.
    # The params stay Python constants inside (a closure, not an argument), so XLA folds them
    # as before, and it inlines the call: the compiled program is the same.
    derivative = jax.jit(lambda state: plant_derivative(state, target, params))

    def axpy(scale, direction, base):
        return jax.tree.map(lambda d, b: b + scale * d, direction, base)

    def rk4_step(_, state):
        k1 = derivative(state)
        k2 = derivative(axpy(0.5 * h, k1, state))
        k3 = derivative(axpy(0.5 * h, k2, state))
        k4 = derivative(axpy(h, k3, state))
        increment = jax.tree.map(lambda a, b, c, d: (a + 2.0 * b + 2.0 * c + d) / 6.0, k1, k2, k3, k4)
        return axpy(h, increment, state)

    return jax.lax.fori_loop(0, params.substeps, rk4_step, plant)


# ----------------------------------------------------------------------------- summary


def energy(plant: PlantState, params: SwingParams) -> jax.Array:
    """E = 1/2 m |v_cm|^2 + 1/2 J (theta' + beta')^2 + m g y_cm.

    Equal to the ``docs/swing_model.md`` form 1/2 m (rho'^2 + rho^2 psi'^2) + ... - m g rho cos psi;
    v_cm comes from the CoM position by jvp.
    """
    position, velocity = jax.jvp(
        lambda th, c: com_position(th, c, params), (plant.theta, plant.command), (plant.theta_dot, plant.command_rate)
    )
    _, geometry_rate = jax.jvp(lambda c: body_geometry(c, params), (plant.command,), (plant.command_rate,))
    inertia = body_geometry(plant.command, params)[INERTIA]
    body_rate = plant.theta_dot + geometry_rate[BETA]
    return (
        0.5 * params.mass * jnp.sum(velocity**2)
        + 0.5 * inertia * body_rate**2
        + params.mass * params.gravity * position[1]
    )


def energy_norm(plant: PlantState, params: SwingParams) -> jax.Array:
    """(E - E_bottom) / (E_top - E_bottom): 0 hanging at rest, 1 at the top in neutral pose."""
    bottom = -params.mass * params.gravity * params.rho_neutral
    return (energy(plant, params) - bottom) / (-2.0 * bottom)


def tension(plant: PlantState, target: jax.Array, params: SwingParams) -> jax.Array:
    """Axial rod force T = m g cos(theta) - m a_cm . e_r (positive pulls; m g at rest)."""
    derivative = plant_derivative(plant, target, params)
    _, _, com_accel = second_time_derivative(
        lambda q: com_position(q[0], q[1:], params),
        jnp.concatenate([plant.theta[None], plant.command]),
        jnp.concatenate([plant.theta_dot[None], plant.command_rate]),
        jnp.concatenate([derivative.theta_dot[None], derivative.command_rate]),
    )
    radial = jnp.stack([jnp.sin(plant.theta), -jnp.cos(plant.theta)])
    return params.mass * params.gravity * jnp.cos(plant.theta) - params.mass * jnp.dot(com_accel, radial)


def command_speed(plant: PlantState) -> jax.Array:
    """|c'|, the effort measure."""
    return jnp.sqrt(jnp.sum(plant.command_rate**2))


def observation(plant: PlantState, params: SwingParams) -> jax.Array:
    """The 11 numbers of ``docs/swing_model.md``, all of order one."""
    w0 = natural_frequency(params)
    geometry, rate = jax.jvp(lambda c: body_geometry(c, params), (plant.command,), (plant.command_rate,))
    psi = plant.theta + geometry[ALPHA]
    psi_dot = plant.theta_dot + rate[ALPHA]
    w_a = params.servo_frequency
    return jnp.stack(
        [
            jnp.cos(plant.theta),
            jnp.sin(plant.theta),
            plant.theta_dot / w0,
            jnp.cos(psi),
            jnp.sin(psi),
            psi_dot / w0,
            energy_norm(plant, params),
            plant.command[0],
            plant.command[1],
            plant.command_rate[0] / w_a,
            plant.command_rate[1] / w_a,
        ]
    )


PHASE_EPS = 1e-3
"""rad: the amplitude below which the phase entries shrink toward 0 (``phase_entries``)."""


def phase_entries(sin_angle: jax.Array, scaled_rate: jax.Array, amplitude: bool = False) -> jax.Array:
    """(2,) cos phi, sin phi of the oscillation phase phi = atan2(rate / w0, sin angle), and
    with ``amplitude`` (3,) the amplitude on a log scale.

    The observation carries a small swing's phase only in differences of a few hundredths;
    these entries carry it at order one whatever the amplitude. Both are divided by
    r = sqrt(sin^2 + (rate / w0)^2 + PHASE_EPS^2), so at exact rest they are 0 (finite, no NaN)
    and always within [-1, 1]. sin of the angle, not the angle, keeps them continuous over the
    top. The amplitude entry ln(r / PHASE_EPS) / ln(1 / PHASE_EPS) is 0 at rest, 1/3 at
    r = 0.01, 2/3 at 0.1 and 1 at 1: order one where the plain entries are hundredths.
    ``sin_angle``, ``scaled_rate``: observation entries 1 and 2 (theta) or 4 and 5 (psi).
    """
    radius = jnp.sqrt(sin_angle**2 + scaled_rate**2 + PHASE_EPS**2)
    entries = [sin_angle / radius, scaled_rate / radius]
    if amplitude:
        entries.append(jnp.log(radius / PHASE_EPS) / math.log(1.0 / PHASE_EPS))
    return jnp.stack(entries)
