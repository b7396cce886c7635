"""Lower bound on the swing's minimum time to rotation: the energy the rider must add, over the
most power the servo-limited body can put in at each energy (results/limits/README.md has the argument).

The quantity is the swing's *reserve* ``R = 1/2 I W^2 + m g rho (1 - cos psi)``: the kinetic
energy of the whole body turning at the mean rate ``W = H / I`` (``H`` the angular momentum
about the pivot, ``I = m rho^2 + J``) plus the height of the CoM above the lowest point of its
current circle. From the equation of motion (``physics.angular_acceleration``: ``H' = -m g rho
sin psi - c_d theta'``) its rate is exactly

    R' = -W^2 I' / 2 + m g rho' (1 - cos psi) + m g rho (J / I) (alpha' - beta') sin psi
         - c_d theta' (theta' + nu),          nu = (m rho^2 alpha' + J beta') / I,

which the servo's limits bound by ``R' <= growth R + lean_gravity sqrt(R) + damping_power``
(``PowerConstants``). By comparison the reserve never exceeds the solution ``X(t)`` of
``X' = f(X)`` from the start's reserve; reaching ``|theta| = pi`` needs ``R >= needed``, and the
half turn after it (theta from pi to 2 pi) cannot be faster than ``|theta'| <= sqrt(2 X / I_min)
+ nu_max`` allows. Everything here is float64 NumPy on the host (a 2-D grid over the pose and a
1-D quadrature): exact search at this size costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs.swing import physics
from purehr.envs.swing.physics import ALPHA, BETA, INERTIA, RHO, PlantState, SwingParams

QUADRATURE_CELLS = 20_000
"""Geometric cells of the reserve between the start and the top (and after it)."""


@dataclass(frozen=True)
class PowerConstants:
    """The suprema over every pose c in [-1, 1]^2 and pose rate |c_i'| <= servo_rate that the
    bound uses (each one a grid maximum plus a Lipschitz margin, or a minimum minus one)."""

    servo_rate: float  # 2 w_a / e, the largest |c_i'| a critically damped servo reaches from rest
    growth: float  # sup max(|I'| / I, |rho'| / rho), 1/s
    lean_gravity: float  # sup (J / I) |alpha' - beta'| sqrt(2 m g rho), J^(1/2) / s
    damping_power: float  # sup c_d nu^2 / 4, W
    nu_max: float  # sup |nu|, rad/s
    inertia_min: float  # min I, kg m^2
    needed: float  # min over poses of m g (rho + rho cos alpha): the reserve at |theta| = pi, J
    grid: int  # grid points per pose axis

    def rate_bound(self, reserve):
        """f(R) = growth R + lean_gravity sqrt(R) + damping_power: the most R' can be."""
        return self.growth * reserve + self.lean_gravity * np.sqrt(reserve) + self.damping_power

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def servo_rate_limit(params: SwingParams) -> float:
    """2 w_a / e: c' is the target convolved with h'(t), h = w_a^2 t exp(-w_a t), from rest, so
    |c'| <= integral |h'| = 2 max h = 2 w_a / e for any target in [-1, 1] (and |c| <= 1)."""
    return 2.0 * float(params.servo_frequency) / math.e


def pose_derivatives(params: SwingParams, squat: np.ndarray, lean: np.ndarray) -> dict[str, np.ndarray]:
    """rho, alpha, J, I and their partial derivatives in squat (``_s``) and lean (``_l``), in
    closed form (float64), at poses of any shape: the geometry of ``physics.body_geometry``."""
    L, m = float(params.length), float(params.mass)
    half = 0.5 * (float(params.h_max) - float(params.h_min))
    beta_max, j0 = float(params.beta_max), m * float(params.gyration_radius) ** 2
    h = 0.5 * (float(params.h_max) + float(params.h_min)) - squat * half  # dh/ds = -half
    beta = lean * beta_max  # dbeta/dl = beta_max
    cos_b, sin_b = np.cos(beta), np.sin(beta)
    rho = np.sqrt(L**2 - 2.0 * L * h * cos_b + h**2)
    inertia_body = j0 * (h / float(params.h_max)) ** 2
    d_rho = ((h - L * cos_b) / rho, L * h * sin_b / rho)  # (d/dh, d/dbeta)
    d_alpha = (L * sin_b / rho**2, h * (L * cos_b - h) / rho**2)
    d_body = (2.0 * j0 * h / float(params.h_max) ** 2, np.zeros_like(h))
    d_inertia = (2.0 * m * rho * d_rho[0] + d_body[0], 2.0 * m * rho * d_rho[1])
    chain = (-half, beta_max)  # (dh/ds, dbeta/dl)
    out = {
        "rho": rho,
        "alpha": np.arctan2(h * sin_b, L - h * cos_b),
        "body_inertia": inertia_body,
        "inertia": m * rho**2 + inertia_body,
        "radial": L - h * cos_b,  # rho cos alpha
    }
    for name, (by_h, by_beta) in {"rho": d_rho, "alpha": d_alpha, "body_inertia": d_body, "inertia": d_inertia}.items():
        out[f"{name}_s"] = by_h * chain[0]
        out[f"{name}_l"] = by_beta * chain[1]
    out["beta_s"] = np.zeros_like(h)
    out["beta_l"] = np.full_like(h, beta_max)
    return out


def _bounded(values: np.ndarray, spacing: float, largest: bool) -> float:
    """The max (or min) of a function over the square from its values on a grid of ``spacing``,
    widened by twice the steepest grid difference times the spacing: every point lies within
    spacing / sqrt(2) of a node, and |grad| <= sqrt(2) max |partial|."""
    steep = max(np.max(np.abs(np.diff(values, axis=0))), np.max(np.abs(np.diff(values, axis=1)))) / spacing
    margin = 2.0 * steep * spacing
    return float(values.max() + margin) if largest else float(values.min() - margin)


def power_constants(params: SwingParams, grid: int = 801) -> PowerConstants:
    """The constants of ``PowerConstants`` for ``params`` on a ``grid`` x ``grid`` pose grid."""
    axis = np.linspace(-1.0, 1.0, grid)
    squat, lean = np.meshgrid(axis, axis, indexing="ij")
    d = pose_derivatives(params, squat, lean)
    r, m, g = servo_rate_limit(params), float(params.mass), float(params.gravity)
    rho, inertia, body = d["rho"], d["inertia"], d["body_inertia"]
    growth = r * np.maximum(
        (np.abs(d["inertia_s"]) + np.abs(d["inertia_l"])) / inertia, (np.abs(d["rho_s"]) + np.abs(d["rho_l"])) / rho
    )
    relative = r * (np.abs(d["alpha_s"] - d["beta_s"]) + np.abs(d["alpha_l"] - d["beta_l"]))  # |alpha' - beta'|
    lean_gravity = body / inertia * relative * np.sqrt(2.0 * m * g * rho)
    nu = r * (
        np.abs(m * rho**2 * d["alpha_s"] + body * d["beta_s"]) + np.abs(m * rho**2 * d["alpha_l"] + body * d["beta_l"])
    )
    nu = nu / inertia
    spacing = float(axis[1] - axis[0])
    nu_max = _bounded(nu, spacing, True)
    return PowerConstants(
        servo_rate=r,
        growth=_bounded(growth, spacing, True),
        lean_gravity=_bounded(lean_gravity, spacing, True),
        damping_power=float(params.damping) * nu_max**2 / 4.0,
        nu_max=nu_max,
        inertia_min=_bounded(inertia, spacing, False),
        needed=m * g * _bounded(rho + d["radial"], spacing, False),
        grid=grid,
    )


def start_reserve(theta0, theta_dot0, params: SwingParams) -> np.ndarray:
    """R at a start at rest in the neutral pose: 1/2 I0 theta'^2 + m g rho0 (1 - cos theta)."""
    d = pose_derivatives(params, np.zeros(()), np.zeros(()))
    theta0, theta_dot0 = np.asarray(theta0, np.float64), np.asarray(theta_dot0, np.float64)
    m, g = float(params.mass), float(params.gravity)
    return 0.5 * float(d["inertia"]) * theta_dot0**2 + m * g * float(d["rho"]) * (1.0 - np.cos(theta0))


def rotation_lower_bound(theta0, theta_dot0, params: SwingParams, constants: PowerConstants) -> dict[str, np.ndarray]:
    """Per start (any shape): ``top_s``, a lower bound on the time to first reach |theta| = pi;
    ``rotation_s``, on the time to |theta| = 2 pi; ``rotation_step``, the first control step
    that can succeed (ceil of rotation_s / dt)."""
    reserves = np.atleast_1d(start_reserve(theta0, theta_dot0, params))
    top, rotation = np.empty_like(reserves), np.empty_like(reserves)
    for i, x0 in enumerate(reserves.ravel()):
        top.flat[i], rotation.flat[i] = _times(float(x0), constants)
    dt = float(params.dt)
    shape = np.shape(theta0)
    steps = np.ceil(rotation / dt - 1e-9).astype(np.int64)
    return {"top_s": top.reshape(shape), "rotation_s": rotation.reshape(shape), "rotation_step": steps.reshape(shape)}


def _times(start: float, c: PowerConstants) -> tuple[float, float]:
    """(time to the top, time to the rotation) lower bounds for a start's reserve ``start``.

    Time: dt = dR / f(R) with 1/f decreasing, so right-end sums bound it from below. The half
    turn: theta travel = int w(R) / f(R) dR with w = sqrt(2R / I_min) + nu_max, bounded from
    above by the larger end of each cell; the time of the cells before the travel reaches pi
    is a lower bound on the time after the top."""
    low = max(start, 1e-12)
    if low >= c.needed:
        top = 0.0
    else:
        edges = np.geomspace(low, c.needed, QUADRATURE_CELLS + 1)
        top = float(np.sum(np.diff(edges) / c.rate_bound(edges[1:])))
    edges = np.geomspace(max(c.needed, low), max(c.needed, low) * 1e6, QUADRATURE_CELLS + 1)
    speed = np.sqrt(2.0 * edges / c.inertia_min) + c.nu_max
    per_reserve = speed / c.rate_bound(edges)
    travel = np.cumsum(np.diff(edges) * np.maximum(per_reserve[:-1], per_reserve[1:]))
    cells = int(np.searchsorted(travel, math.pi))  # cells completed before the travel reaches pi
    if cells >= QUADRATURE_CELLS:
        raise RuntimeError("the half-turn quadrature ran out of cells; widen its range")
    after = float(np.sum(np.diff(edges)[:cells] / c.rate_bound(edges[1 : cells + 1])))
    return top, top + after


def comparison_reserve(start: float, times: np.ndarray, constants: PowerConstants) -> np.ndarray:
    """X(t): the solution of X' = f(X) from ``start`` at ``times`` (s, increasing), from a fine
    quadrature of t(X); the reserve of any trajectory from that start stays below it."""
    edges = np.geomspace(max(start, 1e-12), max(start, 1e-12) * 1e9, 200_001)
    elapsed = np.concatenate([[0.0], np.cumsum(np.diff(edges) / constants.rate_bound(edges[:-1]))])  # upper sums
    return np.interp(times, elapsed, edges, right=np.inf)


# ----------------------------------------------------------------------------- on the plant


def reserve(plant: PlantState, params: SwingParams) -> jax.Array:
    """R of a plant state (any dtype, jittable): 1/2 I W^2 + m g rho (1 - cos psi)."""
    geometry, rate = jax.jvp(lambda c: physics.body_geometry(c, params), (plant.command,), (plant.command_rate,))
    rho, alpha, inertia_body = geometry[RHO], geometry[ALPHA], geometry[INERTIA]
    inertia = params.mass * rho**2 + inertia_body
    psi_dot = plant.theta_dot + rate[ALPHA]
    momentum = params.mass * rho**2 * psi_dot + inertia_body * (plant.theta_dot + rate[BETA])
    return 0.5 * momentum**2 / inertia + params.mass * params.gravity * rho * (1.0 - jnp.cos(plant.theta + alpha))


def reserve_rate_terms(plant: PlantState, params: SwingParams) -> dict[str, jax.Array]:
    """The four terms of R' (the module docstring's formula) at a plant state: ``pumping``
    (-W^2 I' / 2), ``lowering`` (m g rho' (1 - cos psi)), ``lean_gravity`` and ``damping``."""
    geometry, rate = jax.jvp(lambda c: physics.body_geometry(c, params), (plant.command,), (plant.command_rate,))
    m, g = params.mass, params.gravity
    rho, alpha, inertia_body = geometry[RHO], geometry[ALPHA], geometry[INERTIA]
    rho_dot, alpha_dot, beta_dot, body_dot = rate[RHO], rate[ALPHA], rate[BETA], rate[INERTIA]
    inertia = m * rho**2 + inertia_body
    inertia_dot = 2.0 * m * rho * rho_dot + body_dot
    nu = (m * rho**2 * alpha_dot + inertia_body * beta_dot) / inertia
    mean_rate = plant.theta_dot + nu
    psi = plant.theta + alpha
    return {
        "pumping": -0.5 * mean_rate**2 * inertia_dot,
        "lowering": m * g * rho_dot * (1.0 - jnp.cos(psi)),
        "lean_gravity": m * g * rho * inertia_body / inertia * (alpha_dot - beta_dot) * jnp.sin(psi),
        "damping": -params.damping * plant.theta_dot * (plant.theta_dot + nu),
    }
