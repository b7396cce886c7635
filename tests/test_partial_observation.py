"""The partially observed variants (``swing-angles``, ``hrv-hidden-audience``, ``hrv-flicker``):
the same environment seen through fewer numbers. The kept entries equal the full observation's, the
dynamics, rewards and held-out evaluation are the full task's, and the option travels with
the task (registry, manifest, ``task_of_env``)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.envs.hrv import HRWritingEnv
from purehr.envs.hrv.env import CONTENT_KEEP, MOD_DECREASE, MOD_INCREASE, STYLE_NONE
from purehr.envs.swing import SwingEnv, SwingParams
from purehr.envs.swing.physics import observation as full_swing_observation
from purehr.envs.wrappers import training_wrappers
from purehr.run.planning.run_plan import DEFAULT_TASKS
from purehr.run.store.record import recorded_env
from purehr.tasks import TASK_NAMES, TASKS, get_task, task_of_env
from purehr.tasks.hrv import HRV_FLICKER_DROPOUT

# cos theta, sin theta, cos psi, sin psi, squat, lean: of the 11 (cos theta, sin theta,
# theta'/w0, cos psi, sin psi, psi'/w0, energy_norm, squat, lean, squat'/w_a, lean'/w_a)
KEPT_SWING = [0, 1, 3, 4, 7, 8]
HIDDEN_HRV = {"generation_context", "gain"}
STEPS = 6


def _rollouts(envs, reset, actions):
    """Per environment: (first observation, (observations, states, rewards, terminated,
    truncated, infos)) of ``len(actions)`` steps from ``reset(env)``, stacked over the steps;
    one compiled program for all of ``envs`` (the suite pays for compiles, not steps)."""

    def rollout(env):
        obs, state = reset(env)

        def step(state, inputs):
            key, action = inputs
            obs, state, reward, terminated, truncated, info = env.step(key, state, action)
            return state, (obs, state, reward, terminated, truncated, info)

        keys = jax.random.split(jax.random.PRNGKey(7), len(actions))
        return obs, jax.lax.scan(step, state, (keys, actions))[1]

    return jax.jit(lambda: tuple(rollout(env) for env in envs))()


def _heldout_metrics(runs):
    """``{task: held-out metrics}`` of ``runs`` = ``{task: (env, policy, num_episodes)}``,
    each the task's own held-out evaluation at its default params, in one compiled program."""

    def evaluate():
        return {
            name: get_task(name).heldout_evaluation(env, env.default_params, policy, num_episodes=episodes)
            for name, (env, policy, episodes) in runs.items()
        }

    return {name: {key: float(value) for key, value in m.items()} for name, m in jax.jit(evaluate)().items()}


def _assert_same_tree(a, b):
    jax.tree.map(np.testing.assert_array_equal, a, b)


# ---------------------------------------------------------------- swing-angles


@pytest.fixture(scope="module")
def swing_pair():
    params = SwingParams(reset_noise=0.5)
    actions = jax.random.uniform(jax.random.PRNGKey(3), (STEPS, 2), minval=-1.0, maxval=1.0)
    reset = lambda env: env.reset(jax.random.PRNGKey(11))  # noqa: E731
    full_env, angles_env = SwingEnv(params), SwingEnv(params, observe_rates=False)
    return full_env, angles_env, *_rollouts((full_env, angles_env), reset, actions)


def test_swing_angles_sees_the_full_observation_at_the_kept_indices(swing_pair):
    full_env, angles_env, (full_first, full), (angles_first, angles) = swing_pair
    np.testing.assert_array_equal(angles_first, full_first[np.asarray(KEPT_SWING)])
    observations, states = angles[0], angles[1]
    assert observations.shape == (STEPS, 6) and full[0].shape == (STEPS, 11)
    np.testing.assert_array_equal(observations, full[0][:, KEPT_SWING])
    # and from the state itself: the angle's cos and sin, the posture (squat, lean)
    theta = np.asarray(states.plant.theta)
    np.testing.assert_allclose(observations[:, 0], np.cos(theta), rtol=0, atol=1e-6)
    np.testing.assert_allclose(observations[:, 1], np.sin(theta), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(observations[:, 4:], states.plant.command)
    assert not np.allclose(states.plant.theta_dot, 0.0)  # the dropped rates were there to drop
    # the default observation is still the physics' eleven numbers
    plant = jax.tree.map(lambda x: x[-1], full[1].plant)
    reference = jax.jit(full_swing_observation)(plant, full_env.default_params)  # alone: not fused as in the scan
    np.testing.assert_allclose(full[0][-1], reference, rtol=1e-6, atol=1e-7)
    assert full_env.observation_space().shape == (11,) and angles_env.observation_space().shape == (6,)
    assert angles_env.observation_space().dtype == full_env.observation_space().dtype


def test_swing_angles_has_the_full_dynamics_and_rewards(swing_pair):
    _, _, (_, full), (_, angles) = swing_pair
    _assert_same_tree(angles[1:], full[1:])  # states, rewards, terminated, truncated, info
    assert np.all(np.asarray(full[2]) != 0.0)


def test_swing_angles_heldout_evaluation_of_a_policy_blind_to_the_rates_is_the_full_ones():
    def full_policy(obs, t, key):  # reads sin theta and cos psi only
        return jnp.stack([obs[1], obs[3]]) * 5.0

    def angles_policy(obs, t, key):
        return jnp.stack([obs[1], obs[2]]) * 5.0

    metrics = _heldout_metrics(
        {
            "swing": (get_task("swing").make_env(), full_policy, 4),
            "swing-angles": (get_task("swing-angles").make_env(), angles_policy, 4),
        }
    )
    assert metrics["swing"].keys() == metrics["swing-angles"].keys()
    np.testing.assert_equal(metrics["swing-angles"], metrics["swing"])
    assert metrics["swing"]["effort"] > 0.0  # the policy moved the body


# ---------------------------------------------------------------- hrv-hidden-audience


@pytest.fixture(scope="module")
def hrv_pair():
    actions = jax.random.randint(jax.random.PRNGKey(5), (STEPS, 2 + 4), 0, 3)
    reset = lambda env: env.reset(jax.random.PRNGKey(13))  # noqa: E731
    full_env, hidden_env = HRWritingEnv(4), HRWritingEnv(4, observe_audience=False)
    return full_env, hidden_env, *_rollouts((full_env, hidden_env), reset, actions)


def test_hrv_hidden_audience_sees_the_full_observation_less_the_audience(hrv_pair):
    full_env, hidden_env, (full_first, full), (hidden_first, hidden) = hrv_pair
    kept = ["content_stats", "current_hrv", "episode_fraction", "gap", "target_hrv"]
    for full_obs, hidden_obs in ((full_first, hidden_first), (full[0], hidden[0])):
        assert sorted(hidden_obs) == kept and set(full_obs) == set(kept) | HIDDEN_HRV
        _assert_same_tree(hidden_obs, {key: full_obs[key] for key in kept})
    assert sorted(hidden_env.observation_space().spaces) == kept
    for key in kept:
        assert hidden_env.observation_space().spaces[key] == full_env.observation_space().spaces[key]
    assert not np.allclose(hidden[1].context, 0.0)  # the audience is there, only unseen
    # without the gap features only the context is left to hide
    raw = HRWritingEnv(4, gap_features=False, observe_audience=False)
    assert sorted(raw.observation_space().spaces) == ["content_stats", "current_hrv", "episode_fraction", "target_hrv"]


def test_hrv_hidden_audience_has_the_full_dynamics_and_rewards(hrv_pair):
    _, _, (_, full), (_, hidden) = hrv_pair
    _assert_same_tree(hidden[1:], full[1:])
    assert len(set(np.asarray(full[2]).tolist())) > 1


def test_hrv_hidden_audience_heldout_evaluation_of_a_policy_blind_to_the_audience_is_the_full_ones():
    def toward_target(obs, t, key):  # reads current and target only
        move = jnp.where(obs["target_hrv"] > obs["current_hrv"], MOD_INCREASE, MOD_DECREASE)
        return jnp.concatenate([jnp.asarray([STYLE_NONE, CONTENT_KEEP]), move]).astype(jnp.int32)

    metrics = _heldout_metrics(
        {name: (get_task(name).make_env(), toward_target, 8) for name in ("hrv", "hrv-hidden-audience")}
    )
    assert "noisy_success_rate" in metrics["hrv"]  # the protocol's evaluation, probe included
    np.testing.assert_equal(metrics["hrv-hidden-audience"], metrics["hrv"])
    assert metrics["hrv"]["final_distance"] < 0.3


# ---------------------------------------------------------------- hrv-flicker

FLICKER_STEPS = 400


@pytest.fixture(scope="module")
def hrv_flicker_pair():
    """The full hrv and hrv-flicker environments over FLICKER_STEPS steps of the same actions
    and keys; episodes last 10 steps, so the runs cross many resets."""
    actions = jax.random.randint(jax.random.PRNGKey(5), (FLICKER_STEPS, 2 + 4), 0, 3)
    reset = lambda env: env.reset(jax.random.PRNGKey(13))  # noqa: E731
    full_env = HRWritingEnv(4, max_episode_length=10)
    flicker_env = HRWritingEnv(4, reading_dropout=0.5, max_episode_length=10)
    return full_env, flicker_env, *_rollouts((full_env, flicker_env), reset, actions)


def test_hrv_flicker_loses_the_reading_at_the_dropout_rate_and_nothing_else(hrv_flicker_pair):
    full_env, flicker_env, (full_first, full), (flicker_first, flicker) = hrv_flicker_pair
    full_keys = list(full_env.observation_space().spaces)
    assert sorted(flicker_env.observation_space().spaces) == sorted([*full_keys, "reading_seen"])
    assert float(flicker_first["reading_seen"][0]) == 1.0  # the text is read at the start
    _assert_same_tree({k: v for k, v in flicker_first.items() if k != "reading_seen"}, full_first)
    seen = np.asarray(flicker[0]["reading_seen"][:, 0]) == 1.0
    # Binomial(400, 0.5): 4.5 standard deviations either side of 200 lost readings
    assert 155 <= np.sum(~seen) <= 245
    for key in ("current_hrv", "gap"):  # lost: zeros; read: the full observation's values
        assert not np.any(np.asarray(flicker[0][key])[~seen])
        np.testing.assert_array_equal(np.asarray(flicker[0][key])[seen], np.asarray(full[0][key])[seen])
    for key in ("target_hrv", "content_stats", "generation_context", "gain", "episode_fraction"):
        np.testing.assert_array_equal(flicker[0][key], full[0][key])  # everything else every step


def test_hrv_flicker_has_the_full_dynamics_and_rewards(hrv_flicker_pair):
    _, _, (_, full), (_, flicker) = hrv_flicker_pair
    _assert_same_tree(flicker[1:], full[1:])  # states, rewards, ends, infos: the same noise stream
    assert np.asarray(full[3]).sum() + np.asarray(full[4]).sum() >= 30  # many episodes ended


def test_hrv_flicker_is_a_task_of_its_own():
    task = get_task("hrv-flicker")
    env = task.make_env()
    assert env.reading_dropout == HRV_FLICKER_DROPOUT == 0.75 and env.observe_audience and env.name == "hrv-flicker"
    assert task_of_env(env) is task and task_of_env(HRWritingEnv(3, reading_dropout=0.2)) is task
    assert task.env_kwargs(env)["reading_dropout"] == 0.75 and task.floors == get_task("hrv").floors
    assert not task.has_reference and task.default_config == get_task("hrv").default_config
    assert "reading_dropout" not in get_task("hrv").env_kwargs(HRWritingEnv())  # hrv's record unchanged
    recorded = {**task.env_kwargs(env), "reading_dropout": 0.5}  # a run's own dropout comes back from its record
    assert recorded_env({"environments": {"hrv-flicker": recorded}}, task).reading_dropout == 0.5


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: HRWritingEnv(reading_dropout=1.0), r"reading_dropout=1.0, expected a probability in \[0, 1\)"),
        (lambda: HRWritingEnv(reading_dropout=-0.1), r"reading_dropout=-0.1, expected a probability"),
        (lambda: HRWritingEnv(reading_dropout=True), r"reading_dropout=True, expected a probability"),
        (lambda: HRWritingEnv(reading_dropout="0.5"), r"reading_dropout='0.5', expected a probability"),
        (lambda: get_task("hrv").make_env(reading_dropout=0.5), r"reading_dropout=0.5: .*task 'hrv-flicker'"),
        (lambda: get_task("hrv-flicker").make_env(reading_dropout=0), r"reading_dropout=0: .*train 'hrv'"),
        (lambda: get_task("hrv-flicker").make_env(observe_audience=False), r"observe_audience=False: expected True"),
    ],
)
def test_bad_flicker_values_are_refused_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# ---------------------------------------------------------------- the tasks


def test_the_variants_are_registered_with_their_option_and_the_default_run_is_unchanged():
    assert TASK_NAMES == DEFAULT_TASKS == ("swing", "hrv")
    assert {"swing-angles", "hrv-hidden-audience"} <= set(TASKS)
    angles, hidden = get_task("swing-angles").make_env(), get_task("hrv-hidden-audience").make_env()
    assert angles.observe_rates is False and angles.observation_space().shape == (6,)
    assert hidden.observe_audience is False and hidden.hrv_dim == 8
    assert get_task("swing").make_env().observe_rates and get_task("hrv").make_env().observe_audience
    # the same training starts and PPO defaults as the full tasks
    assert angles.default_params == get_task("swing").make_env().default_params
    assert get_task("swing-angles").default_config == get_task("swing").default_config
    assert get_task("hrv-hidden-audience").default_config == get_task("hrv").default_config


@pytest.mark.parametrize("name", ["swing", "hrv", "swing-angles", "hrv-hidden-audience", "hrv-flicker"])
def test_an_environment_maps_back_to_its_task_and_its_record_rebuilds_it(name):
    task = get_task(name)
    env = task.make_env()
    assert task_of_env(env) is task and task_of_env(training_wrappers(env)) is task
    assert env.name == name  # what the API's logs call it
    recorded = task.env_kwargs(env)
    rebuilt = recorded_env({"environments": {name: recorded}}, task)
    assert task_of_env(rebuilt) is task and task.env_kwargs(rebuilt) == recorded
    assert rebuilt.observation_space() == env.observation_space()
    # a saved model rebuilds its env params through make_env(**kwargs, **fields)
    fields = {field.name: getattr(env.default_params, field.name) for field in dataclasses.fields(env.default_params)}
    assert task_of_env(task.make_env(**{**recorded, **fields})) is task


def test_the_recorded_option_and_directly_built_environments():
    assert get_task("swing-angles").env_kwargs(get_task("swing-angles").make_env())["observe_rates"] is False
    assert get_task("hrv-hidden-audience").env_kwargs(HRWritingEnv(observe_audience=False))["observe_audience"] is False
    assert "observe_rates" not in get_task("swing").env_kwargs(SwingEnv())  # the full tasks' records unchanged
    assert task_of_env(SwingEnv(observe_rates=False)).name == "swing-angles"
    assert task_of_env(HRWritingEnv(3, observe_audience=False)).name == "hrv-hidden-audience"
    assert task_of_env(SwingEnv()).name == "swing" and task_of_env(HRWritingEnv(3)).name == "hrv"


def test_the_variants_keep_the_floors_and_have_no_reference():
    for name, full in (("swing-angles", "swing"), ("hrv-hidden-audience", "hrv")):
        variant, reference = get_task(name), get_task(full)
        assert not variant.has_reference and variant.baseline is None
        assert variant.floors == reference.floors
        assert [b.flag for b in variant.baselines] == [b.flag for b in reference.floors]
    assert get_task("swing").baseline.flag == "structured" and get_task("hrv").baseline.flag == "oracle"


def test_bad_option_values_are_refused_by_name():
    with pytest.raises(ValueError, match=r"observe_rates='no', expected True \(the full observation\) or False"):
        SwingEnv(observe_rates="no")
    with pytest.raises(ValueError, match=r"observe_rates='no', expected True"):
        get_task("swing-angles").make_env(observe_rates="no")
    with pytest.raises(ValueError, match=r"observe_audience=1, expected True"):
        HRWritingEnv(observe_audience=1)
    with pytest.raises(ValueError, match=r"observe_rates=False: expected True .*task 'swing-angles'"):
        get_task("swing").make_env(observe_rates=False)
    with pytest.raises(ValueError, match=r"observe_audience=True: expected False .*task 'hrv'"):
        get_task("hrv-hidden-audience").make_env(observe_audience=True)
