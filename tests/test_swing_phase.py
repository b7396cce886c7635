"""The swing's phase observation (``phase_features``, issue 51 item 3): the entries are the
phase of the state, safe at rest; off, the observation is today's; the option is refused where
it would leak the rates, and recorded so that old runs rebuild their 11-number observation."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import write_synthetic_run

from purehr.cli.env_args import env_kwargs_from_args
from purehr.envs.swing import SwingEnv, natural_frequency, physics
from purehr.run.compiled.task_setup import build_setups, recorded_setup
from purehr.run.planning.run_plan import check_env_kwargs
from purehr.run.restoring import restore
from purehr.run.status import PROTOCOL_TEXT
from purehr.run.store.checkpoints import SeedCheckpoints
from purehr.run.store.record import recorded_env
from purehr.tasks import SWING_DEFAULTS, get_task

KEY = jax.random.PRNGKey(0)
OLD_MANIFEST = {
    "status": "finished",
    "tasks": ["swing"],
    "seeds": [0],
    "configs": {
        "swing": SWING_DEFAULTS.replace(num_envs=4, num_steps=8, minibatch_size=16, total_timesteps=64).to_dict()
    },
    "protocol": PROTOCOL_TEXT,
    "curricula": {},
    "environments": {"swing": {"small_start_fraction": 0.25, "small_reset_noise": 0.05}},  # no phase_features
}
"""A swing run's manifest as recorded before ``phase_features`` existed (results/protocol's until
the phase became the default)."""
W0 = float(natural_frequency(physics.SwingParams()))


def _phase(env: SwingEnv, theta: float, theta_dot: float) -> np.ndarray:
    obs, _ = env.reset_to(jnp.float32(theta), jnp.float32(theta_dot))
    assert obs.shape == (13,) and obs.dtype == jnp.float32
    return np.asarray(obs[11:])


# (theta, theta_dot) -> hand-computed (cos phi, sin phi) of phi = atan2(theta'/w0, sin theta)
HAND_MADE = [
    ((0.03, 0.0), (1.0, 0.0)),  # at the right extreme: phi = 0
    ((-0.02, 0.0), (-1.0, 0.0)),  # at the left extreme: phi = pi
    ((0.0, 0.05), (0.0, 1.0)),  # through the bottom, moving right: phi = pi / 2
    ((0.0, -0.3), (0.0, -1.0)),  # through the bottom, moving left: phi = -pi / 2
    ((math.asin(0.03), -0.03 * W0), (math.sqrt(0.5), -math.sqrt(0.5))),  # phi = -pi / 4
    ((2.5, 3.0 * W0), (math.sin(2.5) / math.hypot(math.sin(2.5), 3.0), 3.0 / math.hypot(math.sin(2.5), 3.0))),
]


@pytest.mark.parametrize(("state", "expected"), HAND_MADE)
def test_phase_entries_are_the_phase_of_hand_made_states(state, expected):
    """Amplitude-invariant: a 0.02 rad swing gets the same unit vector as a wide one (up to the
    PHASE_EPS shrink, under 0.1% at these amplitudes)."""
    entries = _phase(SwingEnv(phase_features="theta"), *state)
    np.testing.assert_allclose(entries, expected, atol=2e-3)
    np.testing.assert_allclose(math.atan2(entries[1], entries[0]), math.atan2(expected[1], expected[0]), atol=1e-4)


def test_phase_entries_at_exact_rest_and_tiny_swings_are_finite_and_bounded():
    env = SwingEnv(phase_features="theta")
    np.testing.assert_array_equal(_phase(env, 0.0, 0.0), [0.0, 0.0])  # no NaN from atan2(0, 0)
    space = env.observation_space()
    for theta, theta_dot in [(0.0, 0.0), (1e-7, -1e-7), (1e-30, 0.0), (-3.0, 40.0)]:
        obs, _ = env.reset_to(jnp.float32(theta), jnp.float32(theta_dot))
        assert bool(jnp.all(jnp.isfinite(obs))) and space.contains(obs)
        assert np.all(np.abs(np.asarray(obs[11:])) <= 1.0)
    # the gradient at rest is finite too (a policy's gradient flows through the observation)
    grad = jax.grad(lambda th: jnp.sum(env.reset_to(th, jnp.float32(0.0))[0][11:]))(jnp.float32(0.0))
    assert bool(jnp.isfinite(grad))


@pytest.mark.parametrize(("sin_theta", "expected"), [(0.0, 0.0), (0.01, 1 / 3), (0.1, 2 / 3), (1.0, 1.0)])
def test_the_amplitude_entry_is_log_scaled_from_rest_to_one(sin_theta, expected):
    """ln(r / eps) / ln(1 / eps): hundredths of a radian become thirds."""
    env = SwingEnv(phase_features="theta+amplitude")
    obs, _ = env.reset_to(jnp.float32(math.asin(sin_theta)), jnp.float32(0.0))
    assert obs.shape == env.observation_space().shape == (14,)
    np.testing.assert_allclose(obs[13], expected, atol=2e-3)  # the eps in r: at most 0.0017 at r = 0.01
    np.testing.assert_allclose(obs[11:13], [1.0 if sin_theta else 0.0, 0.0], atol=6e-3)


@jax.jit
def _trajectories(actions):
    """20 steps of three environments under the same actions: (off, theta, psi) observations."""
    envs = (SwingEnv(), SwingEnv(phase_features="theta"), SwingEnv(phase_features="psi"))

    def run(env):
        obs, state = env.reset_to(jnp.float32(0.04), jnp.float32(-0.03))

        def body(state, action):
            obs, state, *_ = env.step(KEY, state, action)
            return state, (obs, physics.observation(state.plant, env.default_params))

        _, (observations, plain) = jax.lax.scan(body, state, actions)
        return jnp.concatenate([obs[None], observations]), plain

    return [run(env) for env in envs]


def test_off_is_todays_observation_and_on_only_appends():
    actions = jax.random.uniform(KEY, (20, 2), jnp.float32, -1.0, 1.0)
    (off, plain), (theta, _), (psi, _) = _trajectories(actions)
    assert off.shape == (21, 11) and theta.shape == psi.shape == (21, 13)
    assert SwingEnv().observation_space().shape == (11,)  # the class's default: off
    swing_task = get_task("swing")  # the task's default: psi (SWING_PHASE_FEATURES); swing-angles: off
    assert swing_task.make_env().phase_features == "psi" and swing_task.make_env().observation_size == 13
    assert swing_task.make_env(phase_features="none").observation_space().shape == (11,)
    assert get_task("swing-angles").make_env().phase_features == "none"
    np.testing.assert_array_equal(off[1:], plain)  # off: physics.observation's 11 numbers, bit for bit
    np.testing.assert_array_equal(theta[:, :11], off)
    np.testing.assert_array_equal(psi[:, :11], off)
    # theta's phase from entries 1, 2; psi's from 4, 5 (the lean moves psi away from theta)
    for observations, (angle, rate) in [(theta, (1, 2)), (psi, (4, 5))]:
        expected = np.arctan2(np.asarray(observations[:, rate]), np.asarray(observations[:, angle]))
        got = np.arctan2(np.asarray(observations[:, 12]), np.asarray(observations[:, 11]))
        np.testing.assert_allclose(got, expected, atol=1e-5)
    assert np.max(np.abs(np.asarray(theta[:, 11:] - psi[:, 11:]))) > 0.1


def test_bad_values_and_the_angles_variant_are_refused_before_any_work():
    with pytest.raises(
        ValueError, match=r"phase_features='phi', expected one of none, theta, psi, theta\+amplitude, psi\+amplitude"
    ):
        SwingEnv(phase_features="phi")
    with pytest.raises(
        ValueError, match=r"phase_features=True, expected one of none, theta, psi, theta\+amplitude, psi\+amplitude"
    ):
        get_task("swing").make_env(phase_features=True)  # --env-arg swing phase_features=true
    with pytest.raises(ValueError, match=r"phase_features='theta' with observe_rates=False: expected 'none'"):
        SwingEnv(observe_rates=False, phase_features="theta")
    with pytest.raises(ValueError, match=r"task 'swing-angles' .*phase_features='psi' with observe_rates=False"):
        check_env_kwargs(["swing-angles"], {"swing-angles": {"phase_features": "psi"}}, {})


def test_the_manifest_records_the_option_and_old_runs_rebuild_eleven_numbers():
    env_kwargs = env_kwargs_from_args([["swing", "phase_features=theta"]], ["swing"], None)
    (setup,) = build_setups(["swing"], {}, env_kwargs=env_kwargs)
    recorded = setup.task.env_kwargs(setup.env)  # what the new run's manifest["environments"]["swing"] holds
    assert recorded == {"small_start_fraction": 0.25, "small_reset_noise": 0.05, "phase_features": "theta"}
    rebuilt = recorded_env({"environments": {"swing": json.loads(json.dumps(recorded))}}, get_task("swing"))
    assert rebuilt.phase_features == "theta" and rebuilt.observation_space().shape == (13,)

    old = recorded_setup(OLD_MANIFEST, "swing")  # a manifest recorded before the option
    assert old.env.phase_features == "none" and old.env.observation_space().shape == (11,)
    assert recorded_env({}, get_task("swing")).observation_space().shape == (11,)  # before manifests named it


def test_a_run_recorded_before_the_option_restores_its_eleven_numbers(tmp_path):
    """A run saved before the phase existed (its manifest names no ``phase_features``) restores
    with the 11-number observation its network was trained on, though the task's default is psi."""
    state = recorded_setup(OLD_MANIFEST, "swing").algorithm.init(jax.random.PRNGKey(0))
    saver = SeedCheckpoints(tmp_path / "swing" / "seed_0" / "checkpoints", asynchronous=False)
    digest = saver.save(0, state)
    saver.finish()
    row = {
        "target_steps": 0,
        "actual_steps": 0,
        "checkpoint_path": "swing/seed_0/checkpoints/0",
        "state_digest": digest,
    }
    write_synthetic_run(tmp_path, OLD_MANIFEST, {("swing", 0): []}, {("swing", 0): [row]})
    restored = restore(tmp_path, task="swing", seed=0)
    obs, _ = restored.env.reset_to(0.05, 0.0)
    assert obs.shape == (11,) and restored.policy(obs).shape == (2,)
