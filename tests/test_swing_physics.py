"""The swing plant against physics it must obey (docs/swing_model.md)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.envs.swing import ControllerParams, SwingEnv, SwingParams, natural_frequency, physics, structured_action
from purehr.envs.wrappers import EpisodeStatisticsWrapper

KEY = jax.random.PRNGKey(0)
FREE = SwingParams(damping=0.0)
HOLD_STILL = ControllerParams(squat_gain=0.0, lean_gain=0.0)  # action 0 every step


@jax.jit
def _trajectory(params: SwingParams, theta0, theta_dot0, controller: ControllerParams, control_steps):
    """``params.horizon`` steps under the structured law for the first ``control_steps``,
    then action 0. One compilation per dtype serves every test (params, starts and gains
    are traced)."""
    env = SwingEnv()
    obs, state = env.reset_to(theta0, theta_dot0, params)

    def body(carry, t):
        obs, state = carry
        action = jnp.where(t < control_steps, structured_action(obs, t, params, controller), 0.0)
        obs, state, reward, terminated, _, info = env.step(KEY, state, action, params)
        return (obs, state), dict(info, energy=physics.energy(state.plant, params), terminated=terminated, obs=obs)

    _, rows = jax.lax.scan(body, (obs, state), jnp.arange(params.horizon, dtype=jnp.int32))
    initial = {"energy": physics.energy(state.plant, params), "energy_norm": physics.energy_norm(state.plant, params)}
    return rows, initial


def simulate(
    params: SwingParams,
    theta0: float,
    theta_dot0: float,
    controller: ControllerParams = HOLD_STILL,
    control_steps: int = 1 << 30,
):
    rows, initial = _trajectory(params, theta0, theta_dot0, controller, control_steps)
    return jax.tree.map(np.asarray, rows), jax.tree.map(float, initial)


@pytest.fixture(scope="module")
def free_swing_x64():
    """32 s of the undamped swing, body held still, in float64."""
    with jax.enable_x64(True):
        params = SwingParams(damping=0.0)
        large, large_initial = simulate(params, 1.0, 0.5)
        small, _ = simulate(params, 1e-3, 0.0)
        w0 = float(natural_frequency(params))
    return {"large": large, "large_initial": large_initial, "small": small, "w0": w0}


def test_energy_conserved_without_damping_float64(free_swing_x64):
    """Relative to |E| (pivot reference) and, stricter, to the energy above the bottom."""
    rows, initial = free_swing_x64["large"], free_swing_x64["large_initial"]
    assert rows["energy"].dtype == np.float64
    assert np.max(np.abs(rows["energy"] - initial["energy"])) < 1e-5 * abs(initial["energy"])
    assert np.max(np.abs(rows["energy_norm"] - initial["energy_norm"])) < 1e-5 * initial["energy_norm"]
    assert np.ptp(rows["swing_angle"]) > 1.5  # it really swung


def test_small_oscillation_period_matches_w0(free_swing_x64):
    theta = np.concatenate([[1e-3], free_swing_x64["small"]["swing_angle"]])
    dt = FREE.dt
    down = np.where((theta[:-1] > 0) & (theta[1:] <= 0))[0]
    crossings = (down + theta[down] / (theta[down] - theta[down + 1])) * dt
    assert len(crossings) >= 10
    period = np.mean(np.diff(crossings))
    assert abs(period - 2 * math.pi / free_swing_x64["w0"]) < 0.01 * period


def test_tension_at_rest_is_weight():
    params = SwingParams()
    rows, _ = simulate(params, 0.0, 0.0)
    weight = params.mass * params.gravity
    np.testing.assert_allclose(rows["tension"][:50], weight, rtol=1e-5)


# The servo lags the squat target by about 0.8 rad at 2 w0, so -0.6 rad is "stand tall
# through the bottom, squat at the extremes" in the realised pose; +pi is its opposite.
@pytest.mark.parametrize("offset, gains_energy", [(-0.6, True), (-0.6 + math.pi, False)])
def test_pumping_timing(offset, gains_energy):
    """Right timing pumps energy in, opposite timing takes it out.

    Pump for two periods (squat law only, no damping), then hold the neutral pose for a
    second, so the energy is compared in the pose it started in."""
    rows, initial = simulate(FREE, 0.3, 0.0, ControllerParams(lean_gain=0.0, squat_offset=offset), control_steps=240)
    settled = rows["energy_norm"][280:300]
    assert np.ptp(settled) < 1e-2 * np.max(settled)  # body still again: energy constant
    ratio = settled[-1] / initial["energy_norm"]
    assert (ratio > 2.0) if gains_energy else (ratio < 0.5)


@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_success_fires_exactly_at_first_full_revolution(direction):
    rows, _ = simulate(SwingParams(), 0.0, 7.0 * direction)
    theta = rows["swing_angle"]
    assert np.abs(theta).max() > 2 * math.pi
    first = int(np.argmax(np.abs(theta) >= 2 * math.pi))
    assert np.abs(theta[first]) >= 2 * math.pi and np.all(np.abs(theta[:first]) < 2 * math.pi)
    assert np.array_equal(np.flatnonzero(rows["success"])[:1], [first])
    assert rows["terminated"][first] and not rows["terminated"][:first].any()


def test_float32_and_float64_agree_for_five_seconds():
    steps = int(5.0 / FREE.dt)
    rows32, _ = simulate(SwingParams(), 0.05, 0.0, ControllerParams())
    with jax.enable_x64(True):
        rows64, _ = simulate(SwingParams(), 0.05, 0.0, ControllerParams())
    rows32, rows64 = (jax.tree.map(lambda x: x[:steps], rows) for rows in (rows32, rows64))
    assert rows32["swing_angle"].dtype == np.float32 and rows64["obs"].dtype == np.float64
    np.testing.assert_allclose(rows32["swing_angle"], rows64["swing_angle"], atol=1e-4)
    np.testing.assert_allclose(rows32["energy_norm"], rows64["energy_norm"], atol=1e-4)
    assert np.ptp(rows64["swing_angle"]) > 0.2  # the body moved and pumped


def test_jvp_body_derivatives_match_finite_differences():
    with jax.enable_x64(True):
        params = SwingParams()
        c = jnp.array([0.3, -0.4])
        c_dot = jnp.array([1.7, -2.3])
        c_ddot = jnp.array([-9.0, 14.0])
        geometry = lambda c: physics.body_geometry(c, params)  # noqa: E731
        value, rate, accel = physics.second_time_derivative(geometry, c, c_dot, c_ddot)
        path = lambda t: geometry(c + c_dot * t + 0.5 * c_ddot * t**2)  # noqa: E731
        h = 1e-4
        fd_rate = (path(h) - path(-h)) / (2 * h)
        fd_accel = (path(h) - 2 * path(0.0) + path(-h)) / h**2
        np.testing.assert_allclose(value, path(0.0), rtol=1e-12)
        np.testing.assert_allclose(rate, fd_rate, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(accel, fd_accel, rtol=1e-4, atol=1e-5)
        assert np.all(np.abs(np.asarray(accel)) > 1e-3)  # every component is exercised


@pytest.mark.parametrize(
    "field, value",
    [
        ("length", 0.0),
        ("mass", -70.0),
        ("dt", 0.0),
        ("h_min", 1.05),
        ("substeps", 0),
        ("small_start_fraction", 1.5),
        ("small_reset_noise", -0.1),
    ],
)
def test_bad_params_raise_before_compiling(field, value):
    with pytest.raises(ValueError, match=field):
        SwingEnv(SwingParams(**{field: value}))
    with pytest.raises(ValueError, match=field):
        SwingEnv().reset(KEY, SwingParams(**{field: value}))


def test_actions_clipped_and_nan_counted_not_propagated():
    params = SwingParams(horizon=3)
    env = EpisodeStatisticsWrapper(SwingEnv(params))

    @jax.jit
    def episode(actions):
        _, state = env.reset(KEY, params)

        def body(state, action):
            obs, state, reward, terminated, truncated, info = env.step(KEY, state, action, params)
            return state, (obs, reward, terminated, truncated, info)

        return jax.lax.scan(body, state, actions)[1]

    clipped = episode(jnp.array([[5.0, -5.0]] * 3))
    unit = episode(jnp.array([[1.0, -1.0]] * 3))
    np.testing.assert_array_equal(clipped[0], unit[0])

    obs, reward, terminated, truncated, info = episode(jnp.array([[jnp.nan, 0.5], [0.2, 0.1], [0.0, jnp.nan]]))
    assert np.all(np.isfinite(obs)) and np.all(np.isfinite(reward))
    np.testing.assert_array_equal(info["nan_action"], [True, False, True])
    np.testing.assert_array_equal(truncated, [False, False, True])
    assert not np.any(terminated)
    assert int(info["episode_nan_actions"][-1]) == 2


def test_info_keys_and_diagnostics():
    env = SwingEnv()
    obs, state = env.reset(KEY)
    assert obs.shape == (11,) and obs.dtype == jnp.float32
    info, _ = simulate(SwingParams(), 0.0, 0.0)
    assert {"time", "swing_angle", "seat_radius", "energy_norm", "tension", "command_speed", "success"} <= set(info)
    assert all(v.shape == (1600,) for k, v in info.items() if k != "obs")
    np.testing.assert_allclose(info["time"][[0, -1]], [0.02, 32.0], rtol=1e-6)
    assert set(env.diagnostics(info)) == {"min_tension", "command_speed"}
    assert env.max_episode_steps() == 1600
    assert env.action_space().shape == (2,) and env.observation_space().shape == (11,)


def _reset_starts(params: SwingParams, count: int = 20_000) -> np.ndarray:
    keys = jax.random.split(KEY, count)
    plant = jax.jit(jax.vmap(lambda key: SwingEnv().reset(key, params)[1].plant))(keys)
    return np.stack([np.asarray(plant.theta), np.asarray(plant.theta_dot)], axis=1)


def test_training_start_mixture_fraction_and_scale():
    """A fraction ``small_start_fraction`` of the resets at ``small_reset_noise``, the rest
    at ``reset_noise`` (wide enough here that no wide start lands in the small box)."""
    starts = _reset_starts(SwingParams(reset_noise=100.0, small_start_fraction=0.3, small_reset_noise=0.05))
    small = np.max(np.abs(starts), axis=1) < 0.5
    assert abs(small.mean() - 0.3) < 0.015  # 4.7 binomial sd
    np.testing.assert_allclose(starts[small].std(axis=0), [0.05, 0.05], rtol=0.05)
    np.testing.assert_allclose(starts[~small].std(axis=0), [100.0, 100.0], rtol=0.05)
    assert np.all(np.max(np.abs(_reset_starts(SwingParams(small_start_fraction=1.0), 2000)), axis=1) < 0.5)


def test_training_start_fraction_zero_is_the_plain_wide_draw():
    keys = jax.random.split(KEY, 1000)
    wide = np.asarray(jax.vmap(lambda key: 1.0 * jax.random.normal(key, (2,), jnp.float32))(keys))
    np.testing.assert_array_equal(_reset_starts(SwingParams(), 1000), wide)
    np.testing.assert_array_equal(_reset_starts(SwingParams(small_start_fraction=0.0), 1000), wide)
