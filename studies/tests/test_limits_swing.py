"""The swing's optimal-control references (studies/limits, results/limits/README.md): the shooting
optimiser's sequences replay in SwingEnv to the step it reports, and the physics lower bound is
below every trajectory, its derivation checked against the implemented equation of motion."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.envs.swing import physics
from purehr.envs.swing.controller import make_structured_policy
from purehr.envs.swing.env import SwingEnv
from purehr.envs.swing.evaluation import heldout_starts, rollout
from purehr.envs.swing.physics import ALPHA, INERTIA, RHO, PlantState
from studies.limits import swing_bound, swing_shooting
from studies.limits.swing_shooting import NO_CROSSING, ShootingSettings

ENV = SwingEnv()
PARAMS = ENV.default_params
# high-energy starts rotate within 1.4 s even when still: the optimiser's whole loop on a short horizon
FAST_THETA = np.array([2.9, -2.8, 2.2])
FAST_RATE = np.array([1.2, -1.5, 3.0])
STEPS = 96  # the still warm start crosses at about 68 steps from each of these starts


@pytest.fixture(scope="module")
def constants():
    return swing_bound.power_constants(PARAMS, grid=201)


@pytest.fixture(scope="module")
def found():
    """One small optimisation: warm starts that rotate late (a slow lean-only pump) or not at all."""
    t = np.arange(STEPS) * float(PARAMS.dt)
    lean = np.stack([np.zeros(STEPS), 0.3 * np.sin(2.6 * t)], axis=-1).astype(np.float32)
    warm = {"lean": np.broadcast_to(lean, (3, STEPS, 2)).copy(), "still": np.zeros((3, STEPS, 2), np.float32)}
    settings = ShootingSettings(
        rounds=1,
        iterations=2,
        ladder=(0.5, 1.0),
        pool_size=2,
        neighbours=1,
        offsets=(0, 3),
        screen_width=4,
        horizon_margin=STEPS,  # keep the warm starts' length: one compiled program per kind
    )
    result = swing_shooting.optimise(warm, FAST_THETA, FAST_RATE, PARAMS, settings, say=lambda _: None)
    replayed = swing_shooting.replay(ENV, PARAMS, result.actions, FAST_THETA, FAST_RATE)
    return {"result": result, "replayed": replayed}


@pytest.fixture(scope="module")
def controller_rows():
    """The structured controller from four held-out starts, full horizon, per-step rows."""
    theta0, theta_dot0 = (values[[0, 7, 15, 64]] for values in heldout_starts())
    policy = make_structured_policy(PARAMS)
    rows = jax.jit(jax.vmap(lambda a, b: rollout(ENV, PARAMS, policy, a, b, jax.random.PRNGKey(0))))(
        jnp.asarray(theta0, jnp.float32), jnp.asarray(theta_dot0, jnp.float32)
    )
    return theta0, theta_dot0, {k: np.asarray(v) for k, v in rows.items()}


def test_crossing_interpolates_between_steps():
    """Hand-computed: |theta| passes 2 pi between rows 3 and 4 (6.0 -> 7.0), so the crossing is
    4 + (2 pi - 6) / 1 steps and step 5 is the successful one; no crossing is NO_CROSSING."""
    angles = jnp.asarray([1.0, -3.0, -5.0, -6.0, -7.0])
    crossing = float(swing_shooting.crossing_step(angles, 0.0))
    assert crossing == pytest.approx(4 + (2 * math.pi - 6.0), abs=1e-5)
    assert math.ceil(crossing) == 5
    # the first step already succeeds: interpolated from the start angle 0.5 to 7.0
    first = float(swing_shooting.crossing_step(jnp.asarray([7.0, 8.0]), 0.5))
    assert first == pytest.approx((2 * math.pi - 0.5) / 6.5, abs=1e-5) and math.ceil(first) == 1
    assert float(swing_shooting.crossing_step(jnp.asarray([1.0, 2.0, -6.2]), 0.0)) == NO_CROSSING


def test_offset_and_mirror_move_sequences_as_documented():
    u = np.arange(10, dtype=np.float32).reshape(5, 2)
    np.testing.assert_array_equal(swing_shooting.offset(u, -2)[:2], 0)
    np.testing.assert_array_equal(swing_shooting.offset(u, -2)[2:], u[:3])
    np.testing.assert_array_equal(swing_shooting.offset(u, 2)[:3], u[2:])
    np.testing.assert_array_equal(swing_shooting.offset(u, 2)[3:], 0)
    np.testing.assert_array_equal(swing_shooting.mirror(u), np.stack([u[:, 0], -u[:, 1]], axis=-1))


def test_mirror_is_a_symmetry_of_the_plant():
    """theta -> -theta with the lean negated gives the mirrored trajectory: what lets the
    optimiser offer a start the mirror image of another start's sequence."""
    u = np.asarray(np.random.default_rng(0).uniform(-1.5, 1.5, (40, 2)), np.float32)
    angles = swing_shooting.swing_angles(jnp.asarray(u), 0.05, -0.07, PARAMS)
    mirrored = swing_shooting.swing_angles(jnp.asarray(swing_shooting.mirror(u)), -0.05, 0.07, PARAMS)
    np.testing.assert_allclose(np.asarray(mirrored), -np.asarray(angles), atol=1e-5)


def test_found_sequences_replay_in_swingenv_at_the_reported_step(found):
    result, replayed = found["result"], found["replayed"]
    assert np.all(result.crossing < NO_CROSSING)
    assert replayed["success"].all()
    np.testing.assert_array_equal(replayed["step"], np.ceil(result.crossing).astype(int))
    np.testing.assert_allclose(replayed["time"], replayed["step"] * float(PARAMS.dt), rtol=1e-6)
    # an accepted change is a verified improvement: never later than the best warm start
    assert np.all(result.crossing <= result.warm_crossing)
    assert np.any(result.crossing < result.warm_crossing - 1.0)  # and the optimiser gained a step somewhere
    assert np.all(np.abs(result.actions) <= 1.0)


def test_pose_derivatives_match_the_plant_geometry():
    """The bound's closed-form geometry and its partial derivatives against jax.jacfwd of
    physics.body_geometry (an independent computation) at random poses."""
    poses = np.random.default_rng(1).uniform(-1, 1, (12, 2))
    closed = swing_bound.pose_derivatives(PARAMS, poses[:, 0], poses[:, 1])
    for pose, row in zip(poses, range(len(poses))):
        c = jnp.asarray(pose, jnp.float32)
        geometry = np.asarray(physics.body_geometry(c, PARAMS))
        jacobian = np.asarray(jax.jacfwd(lambda x: physics.body_geometry(x, PARAMS))(c))  # (4, 2)
        for name, index in (("rho", RHO), ("alpha", ALPHA), ("body_inertia", INERTIA)):
            assert closed[name][row] == pytest.approx(geometry[index], rel=1e-5, abs=1e-6)
            assert closed[f"{name}_s"][row] == pytest.approx(jacobian[index, 0], rel=1e-4, abs=1e-5)
            assert closed[f"{name}_l"][row] == pytest.approx(jacobian[index, 1], rel=1e-4, abs=1e-5)


def _random_states(count: int, seed: int):
    rng = np.random.default_rng(seed)
    return [
        PlantState(
            theta=jnp.float32(rng.uniform(-7, 7)),
            theta_dot=jnp.float32(rng.uniform(-6, 6)),
            command=jnp.asarray(rng.uniform(-1, 1, 2), jnp.float32),
            command_rate=jnp.asarray(rng.uniform(-8, 8, 2), jnp.float32),
        )
        for _ in range(count)
    ], rng.uniform(-1, 1, (count, 2)).astype(np.float32)


def test_reserve_rate_is_the_derived_formula():
    """dR/dt along the plant's own equation of motion (a jvp of R along plant_derivative) equals
    the four terms of results/limits/README.md: the derivation agrees with the implemented dynamics."""
    states, targets = _random_states(8, 2)

    @jax.jit
    def both(plant, target):
        rate = physics.plant_derivative(plant, target, PARAMS)
        _, exact = jax.jvp(lambda p: swing_bound.reserve(p, PARAMS), (plant,), (rate,))
        terms = swing_bound.reserve_rate_terms(plant, PARAMS)
        return exact, sum(terms.values())

    for plant, target in zip(states, targets):
        exact, formula = both(plant, jnp.asarray(target))
        assert float(formula) == pytest.approx(float(exact), rel=2e-3, abs=0.05)


def test_power_constants_hand_values(constants):
    assert constants.servo_rate == pytest.approx(2 * 12.0 / math.e)
    # the reserve at the top is smallest standing tall, no lean: m g 2 (L - h_max) = 70 * 9.81 * 2.3
    exact_needed = 70.0 * 9.81 * 2 * (2.2 - 1.05)
    assert 0.99 * exact_needed < constants.needed <= exact_needed
    # the bound's constants are grid maxima plus margins: a finer grid can only tighten them
    finer = swing_bound.power_constants(PARAMS, grid=801)
    assert finer.growth <= constants.growth and finer.needed >= constants.needed


def test_reserve_at_a_start_is_the_closed_form():
    """start_reserve (float64 closed form) against reserve() of the reset plant state (JAX)."""
    theta0, theta_dot0 = 0.08, -0.09
    _, state = ENV.reset_to(theta0, theta_dot0, PARAMS)
    expected = float(swing_bound.reserve(state.plant, PARAMS))
    assert float(swing_bound.start_reserve(theta0, theta_dot0, PARAMS)) == pytest.approx(expected, rel=1e-4)


def _plant_rows(theta0, theta_dot0, actions):
    """Plant states after every step of (N, 2) actions: the states the bound speaks about."""
    _, state = ENV.reset_to(theta0, theta_dot0, PARAMS)

    def body(plant, action):
        plant = physics.rk4_advance(plant, action, PARAMS)
        return plant, plant

    return jax.lax.scan(body, state.plant, jnp.asarray(actions, jnp.float32))[1]


def test_rate_bound_and_servo_limit_hold_along_trajectories(constants):
    """R' <= f(R) and |c'| <= 2 w_a / e at every step of bang-bang and random action sequences."""
    rng = np.random.default_rng(3)
    bang = np.repeat(np.sign(rng.standard_normal((30, 2))), 7, axis=0)  # switching every 7 steps
    random_actions = rng.uniform(-1, 1, (210, 2))
    step_pair = np.concatenate([-np.ones((60, 2)), np.ones((60, 2))])  # -1 held, then +1: the worst case

    @jax.jit
    def rate_and_reserve(plant, target):
        rate = physics.plant_derivative(plant, target, PARAMS)
        value, derivative = jax.jvp(lambda p: swing_bound.reserve(p, PARAMS), (plant,), (rate,))
        return value, derivative

    for actions in (bang, random_actions, step_pair):
        plants = _plant_rows(0.03, 0.05, actions)
        speeds = np.abs(np.asarray(plants.command_rate))
        assert speeds.max() <= constants.servo_rate * (1 + 1e-4)
        reserves, rates = jax.vmap(rate_and_reserve)(plants, jnp.asarray(actions, jnp.float32))
        reserves, rates = np.asarray(reserves, np.float64), np.asarray(rates, np.float64)
        assert np.all(rates <= constants.rate_bound(np.maximum(reserves, 0)) * (1 + 1e-4) + 1e-2)
    # a step from -1 to +1 drives c' to 2 * (w_a / e) exactly in continuous time; sampled every 20 ms
    assert speeds.max() > 0.95 * constants.servo_rate


def test_lower_bound_is_below_every_verified_trajectory(constants, controller_rows, found):
    """The controller's rotations from held-out starts, and the optimiser's from the fast starts:
    each takes at least the bound's time to the top and to the rotation; and the reserve stays
    under the comparison solution X(t)."""
    theta0, theta_dot0, rows = controller_rows
    bound = swing_bound.rotation_lower_bound(theta0, theta_dot0, PARAMS, constants)
    won = rows["success"] & rows["active"]
    assert won.any(axis=1).all()
    rotation = rows["time"][np.arange(len(theta0)), np.argmax(won, axis=1)]
    top = rows["time"][np.arange(len(theta0)), np.argmax(np.abs(rows["swing_angle"]) >= math.pi, axis=1)]
    assert np.all(bound["rotation_s"] <= rotation) and np.all(bound["rotation_step"] * PARAMS.dt <= rotation + 1e-6)
    assert np.all(bound["top_s"] <= top) and np.all(bound["top_s"] < bound["rotation_s"])

    fast = swing_bound.rotation_lower_bound(FAST_THETA, FAST_RATE, PARAMS, constants)
    replayed = found["replayed"]
    assert np.all(fast["rotation_step"] <= replayed["step"]) and np.all(fast["rotation_s"] <= replayed["time"])

    actions = found["result"].actions[0]
    plants = _plant_rows(FAST_THETA[0], FAST_RATE[0], actions)
    reserves = np.asarray(jax.vmap(lambda p: swing_bound.reserve(p, PARAMS))(plants), np.float64)
    times = (np.arange(len(actions)) + 1) * float(PARAMS.dt)
    start = float(swing_bound.start_reserve(FAST_THETA[0], FAST_RATE[0], PARAMS))
    assert np.all(reserves <= swing_bound.comparison_reserve(start, times, constants))
