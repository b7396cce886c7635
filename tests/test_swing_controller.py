"""Structured controller, held-out evaluation and episode recording."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.envs.swing import (
    TRACE_KEYS,
    ControllerParams,
    StructuredController,
    SwingEnv,
    heldout_evaluation,
    heldout_starts,
    make_structured_policy,
    random_policy,
    record_episode,
    structured_action,
    zero_policy,
)
from purehr.envs.swing.controller import DEFAULT_CONTROLLER

HOLD_STILL = ControllerParams(squat_gain=0.0, lean_gain=0.0)
jitted_structured_action = jax.jit(structured_action)
# An observation at 2.3 degrees, moving back slowly, neutral pose (layout of docs/swing_model.md).
OBS = jnp.array(
    [math.cos(0.04), math.sin(0.04), -0.02, math.cos(0.04), math.sin(0.04), -0.02, 4e-4, 0.0, 0.0, 0.0, 0.0],
    jnp.float32,
)
METRICS = {
    "success_rate",
    "return_mean",
    "return_std",
    "time_to_rotation",
    "effort",
    "min_tension_mean",
    "min_tension_worst",
    "negative_tension_rate",
    "peak_energy",
}


@pytest.fixture(scope="module")
def env():
    return SwingEnv()


@pytest.fixture(scope="module")
def evaluate(env):
    """Held-out evaluation with the controller constants traced: one compilation, and the
    proof that a policy closing over traced parameters (as PPO's will) works."""
    params = env.default_params
    return jax.jit(lambda controller: heldout_evaluation(env, params, make_structured_policy(params, controller)))


def test_structured_controller_rotates_from_95_of_100_starts(evaluate):
    metrics = jax.device_get(evaluate(DEFAULT_CONTROLLER))
    assert set(metrics) == METRICS
    assert round(float(metrics["success_rate"]) * 100) >= 95
    assert 5.0 < float(metrics["time_to_rotation"]) < 32.0
    assert float(metrics["effort"]) > 0 and float(metrics["return_std"]) >= 0
    assert float(metrics["min_tension_worst"]) <= float(metrics["min_tension_mean"])


def test_zero_action_never_rotates(evaluate, env):
    key = jax.random.PRNGKey(1)
    for t in (0, 7, 300):  # the zero-gain law is exactly zero_policy
        np.testing.assert_array_equal(
            jitted_structured_action(OBS, t, env.default_params, HOLD_STILL), zero_policy(OBS, t, key)
        )
    metrics = jax.device_get(evaluate(HOLD_STILL))
    assert float(metrics["success_rate"]) == 0.0
    assert math.isnan(float(metrics["time_to_rotation"]))
    assert float(metrics["effort"]) == 0.0 and float(metrics["negative_tension_rate"]) == 0.0
    # holding still only loses energy: the peak is the start's, at most 5 deg and 0.1 rad/s
    # from the bottom, i.e. energy_norm <= (1 - cos 5 deg) / 2 + small kinetic part < 0.003
    assert 0.0 <= float(metrics["peak_energy"]) < 0.003


def test_heldout_starts_fixed_and_in_range():
    theta, theta_dot = heldout_starts()
    again, _ = heldout_starts()
    np.testing.assert_array_equal(theta, again)
    assert theta.shape == theta_dot.shape == (100,)
    assert np.all(np.abs(theta) <= math.radians(5)) and np.all(np.abs(theta_dot) <= 0.1)
    assert np.ptp(theta) > math.radians(8)
    assert not np.array_equal(heldout_starts(seed=1)[0], theta)


def test_stateful_controller_matches_pure_function(env):
    params = env.default_params
    controller = StructuredController(params)
    first = [np.asarray(controller(OBS)) for _ in range(3)]
    controller.reset()
    assert controller.t == 0
    for t, action in enumerate(first):
        expected = jitted_structured_action(OBS, t, params, DEFAULT_CONTROLLER)
        np.testing.assert_allclose(action, expected, rtol=1e-6)
    assert np.all(first[0] == 0.0)  # start-up ramp begins at zero
    assert np.all(np.abs(first[2]) > 0.0)


def test_random_policy_in_bounds_and_keyed():
    obs = jnp.zeros(11)
    actions = jax.vmap(lambda k: random_policy(obs, 0, k))(jax.random.split(jax.random.PRNGKey(0), 256))
    assert actions.shape == (256, 2)
    assert np.all(np.abs(actions) <= 1.0) and np.std(actions) > 0.4


def test_record_episode_until_success_then_frozen(env):
    params = env.default_params
    trace = jax.device_get(
        jax.jit(lambda: record_episode(env, params, make_structured_policy(params), math.radians(3.0), 0.0))()
    )
    assert set(trace) == set(TRACE_KEYS)
    assert all(np.shape(v) == (params.horizon,) for v in trace.values())
    first = int(np.argmax(trace["success"]))
    assert trace["success"][first] and not trace["success"][:first].any()
    assert abs(trace["theta"][first]) >= 2 * math.pi
    assert np.all(trace["success"][first:])  # stays reported after the end
    assert np.all(trace["reward"][first + 1 :] == 0.0)  # nothing accumulates afterwards
    assert np.all(trace["theta"][first:] == trace["theta"][first])
    np.testing.assert_allclose(trace["time"][first], (first + 1) * params.dt, rtol=1e-6)
    assert np.ptp(trace["squat"][:first]) > 1.0 and np.ptp(trace["lean"][:first]) > 1.0
