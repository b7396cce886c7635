"""HRWritingEnv against docs/hrv_task.md: hand-computed rewards, flags, clipping, shaping, oracle."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.envs import spaces
from purehr.envs.hrv import CONTEXT_DIM, HRVState, HRWritingEnv, heldout_evaluation, oracle_policy, random_policy

SMALL_DIM = 3
"""The unit tests share one small size, so eager-op compilations are reused across them."""
KEEP_ACTION = [0, 1] + [1] * SMALL_DIM  # style none, content keep, keep every dimension


def make_state(current, target, time=0, content=0.5) -> HRVState:
    """A state with a zero context, so gain = 0.5 + sigmoid(0) = 1 exactly."""
    current = jnp.asarray(current, jnp.float32)
    return HRVState(
        current_hrv=current,
        target_hrv=jnp.asarray(target, jnp.float32),
        content_stats=jnp.full((4,), content, jnp.float32),
        context=jnp.zeros((CONTEXT_DIM,), jnp.float32),
        time=jnp.asarray(time, jnp.int32),
    )


def step(env, state, action, params=None):
    return env.step(
        jax.random.key(0), state, jnp.asarray(action, jnp.int32), env.default_params if params is None else params
    )


# --- reward ------------------------------------------------------------------------------------

# current (0.5, 0.5, 0.95), target (0.8, 0.4, 0.9); action: style 0, keep, (+, -, keep) with
# step 0.1 and gain 1 -> next (0.6, 0.4, 0.95). No success (max error 0.2).
SIM_L2_NEXT = 1 - math.sqrt(0.2**2 + 0.0**2 + 0.05**2) / math.sqrt(3)
SIM_L2_CURRENT = 1 - math.sqrt(0.3**2 + 0.1**2 + 0.05**2) / math.sqrt(3)
SIM_COS_NEXT = (0.6 * 0.8 + 0.4 * 0.4 + 0.95 * 0.9) / (math.sqrt(0.36 + 0.16 + 0.9025) * math.sqrt(0.64 + 0.16 + 0.81))
SIM_COS_CURRENT = (0.5 * 0.8 + 0.5 * 0.4 + 0.95 * 0.9) / (
    math.sqrt(0.25 + 0.25 + 0.9025) * math.sqrt(0.64 + 0.16 + 0.81)
)
# mean(next) = 0.65, deviations (-0.05, -0.25, 0.30); mean(current) = 0.65, (-0.15, -0.15, 0.30)
# stability 0.05 * (1 - |0.65 - 0.7|) = 0.0475; extreme: 0.1 * (|0.95 - 0.5| - 0.4) = 0.005
SHAPING_NEXT = 0.1 * (1 - math.sqrt((0.0025 + 0.0625 + 0.09) / 3)) + 0.0475 - 0.005
SHAPING_CURRENT = 0.1 * (1 - math.sqrt((0.0225 + 0.0225 + 0.09) / 3)) + 0.0475 - 0.005


@pytest.mark.parametrize(
    "similarity, reward_form, expected",
    [
        ("hrv_similarity", "seed", SIM_L2_NEXT - SIM_L2_CURRENT + SHAPING_NEXT),
        ("cosine", "seed", SIM_COS_NEXT - SIM_COS_CURRENT + SHAPING_NEXT),
        ("hrv_similarity", "potential", 0.99 * (SIM_L2_NEXT + SHAPING_NEXT) - (SIM_L2_CURRENT + SHAPING_CURRENT)),
        ("cosine", "potential", 0.99 * (SIM_COS_NEXT + SHAPING_NEXT) - (SIM_COS_CURRENT + SHAPING_CURRENT)),
    ],
)
def test_reward_matches_hand_computation(similarity, reward_form, expected):
    env = HRWritingEnv(3, similarity=similarity, reward_form=reward_form, step_size=0.1, noise_scale=0.0)
    state = make_state([0.5, 0.5, 0.95], [0.8, 0.4, 0.9])
    obs, next_state, reward, terminated, truncated, info = step(env, state, [0, 1, 2, 0, 1])
    np.testing.assert_allclose(next_state.current_hrv, [0.6, 0.4, 0.95], atol=1e-6)
    assert not terminated and not truncated
    np.testing.assert_allclose(float(reward), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(info["distance"]), math.sqrt(0.04 + 0.0025), rtol=1e-5)


@pytest.mark.parametrize(
    "reward_form, expected",
    [
        # distance: -||next - target|| / sqrt(3) = -sqrt(0.2^2 + 0^2 + 0.05^2) / sqrt(3)
        ("distance", -math.sqrt(0.04 + 0.0025) / math.sqrt(3)),
        # progress: 0.1 * [(0.3 - 0.2) + (0.1 - 0.0) + (0.05 - 0.05)] / 0.1 - 0.1 = 0.1
        ("progress", 0.1 * (0.1 + 0.1 + 0.0) / 0.1 - 0.1),
    ],
)
def test_dense_rewards_match_hand_computation(reward_form, expected):
    env = HRWritingEnv(3, reward_form=reward_form, step_size=0.1, noise_scale=0.0)
    state = make_state([0.5, 0.5, 0.95], [0.8, 0.4, 0.9])
    _, _, reward, terminated, _, _ = step(env, state, [0, 1, 2, 0, 1])
    assert not terminated
    np.testing.assert_allclose(float(reward), expected, rtol=1e-5, atol=1e-6)


def test_default_reward_is_dense_and_pays_the_bonus_on_success():
    """At the target the distance cost is zero and only the bonus remains: 1.0."""
    env = HRWritingEnv(3, noise_scale=0.0)
    assert env.reward_form == "distance"
    _, _, reward, terminated, _, _ = step(env, make_state([0.5] * 3, [0.5] * 3), KEEP_ACTION)
    assert bool(terminated)
    np.testing.assert_allclose(float(reward), 1.0, atol=1e-7)


def test_gap_features_are_the_gap_in_steps_and_the_context_gain():
    env = HRWritingEnv(3, step_size=0.1, noise_scale=0.0)
    state = make_state([0.5, 0.5, 0.95], [0.8, 0.4, 0.9])
    obs, next_state, *_ = step(env, state, [0, 1, 2, 0, 1])
    # next (0.6, 0.4, 0.95): gap (0.2, 0.0, -0.05) / 0.1; zero context -> gain 0.5 + 0.5 = 1
    np.testing.assert_allclose(obs["gap"], [2.0, 0.0, -0.5], atol=1e-5)
    np.testing.assert_allclose(obs["gain"], [1.0, 1.0, 1.0], atol=1e-7)
    assert spaces.flat_dim(env.observation_space()) == len(spaces.flatten_observation(obs))
    plain = HRWritingEnv(3, gap_features=False)
    plain_obs, _ = plain.reset(jax.random.key(0))
    assert "gap" not in plain_obs and "gain" not in plain_obs
    assert spaces.flat_dim(plain.observation_space()) == spaces.flat_dim(env.observation_space()) - 6


def test_success_flag_exactly_at_precision_and_bonus():
    # target 0.5, current 0.5625 in every dimension (binary-exact), keep: every error is
    # exactly 0.0625 and the L2 distance / sqrt(3) is 0.0625 too.
    state = make_state([0.5625] * 3, [0.5] * 3)
    env = HRWritingEnv(3, reward_form="potential", noise_scale=0.0, target_precision=0.0625)
    _, _, reward, terminated, truncated, info = step(env, state, KEEP_ACTION)
    assert bool(terminated) and bool(info["success"]) and not bool(truncated)
    # Phi = (1 - 0.0625) + 0.1 * (1 - std 0) + 0.05 * (1 - |0.5625 - 0.7|) = 1.080625
    np.testing.assert_allclose(float(reward), 0.99 * 1.080625 - 1.080625 + 1.0, rtol=1e-6)

    stricter = HRWritingEnv(3, reward_form="potential", noise_scale=0.0, target_precision=0.0624)
    _, _, reward, terminated, _, info = step(stricter, state, KEEP_ACTION)
    assert not bool(terminated) and not bool(info["success"])
    np.testing.assert_allclose(float(reward), 0.99 * 1.080625 - 1.080625, rtol=1e-5)


def test_truncation_at_max_episode_length_and_not_before():
    env = HRWritingEnv(SMALL_DIM, noise_scale=0.0, max_episode_length=5)
    obs, state = env.reset(jax.random.key(3))
    state = state.replace(target_hrv=state.current_hrv + 0.3)  # never reached by "keep"
    for t in range(1, 6):
        obs, state, _, terminated, truncated, _ = step(env, state, KEEP_ACTION)
        assert not bool(terminated)
        assert bool(truncated) == (t == 5), t
        np.testing.assert_allclose(obs["episode_fraction"], [t / 5])

    # a success on the last step terminates and is not also a truncation
    at_target = make_state([0.5] * SMALL_DIM, [0.5] * SMALL_DIM, time=4)
    _, _, _, terminated, truncated, _ = step(env, at_target, KEEP_ACTION)
    assert bool(terminated) and not bool(truncated)


def test_hrv_and_content_stats_are_clipped_to_unit_interval():
    env = HRWritingEnv(SMALL_DIM, noise_scale=0.0, step_size=0.3)
    state = make_state([0.95, 0.05, 0.5], [0.5] * 3, content=0.98)
    _, next_state, *_ = step(env, state, [0, 2, 2, 0, 1])  # expand: +0.6, -0.6, keep
    np.testing.assert_array_equal(next_state.current_hrv, [1.0, 0.0, 0.5])
    assert float(next_state.content_stats[0]) == 1.0  # expand lengthens, clipped
    assert np.all((next_state.content_stats >= 0) & (next_state.content_stats <= 1))
    _, condensed, *_ = step(env, state, [0, 0, 1, 1, 1])
    assert float(condensed.content_stats[0]) < 0.98  # condense shortens


def numpy_potential(x, target):
    """Phi of docs/hrv_task.md written out independently of the environment."""
    x, target = np.asarray(x, np.float64), np.asarray(target, np.float64)
    similarity = 1 - np.linalg.norm(x - target) / np.sqrt(len(x))
    return (
        similarity
        + 0.1 * (1 - np.std(x))
        + 0.05 * (1 - abs(np.mean(x) - 0.7))
        - 0.1 * np.sum(np.maximum(0, np.abs(x - 0.5) - 0.4))
    )


@pytest.mark.parametrize("policy_name, precision", [("oracle", 0.05), ("random", 0.005)])
def test_potential_shaping_telescopes(policy_name, precision):
    """Oracle: an episode ending in success (bonus); random: one truncated at 30 steps."""
    env = HRWritingEnv(SMALL_DIM, reward_form="potential", max_episode_length=30, target_precision=precision)
    params = env.default_params
    policy = (oracle_policy if policy_name == "oracle" else random_policy)(env, params)
    key = jax.random.key(11)
    obs, state = env.reset(key, params)
    start, target = np.asarray(state.current_hrv), np.asarray(state.target_hrv)
    discounted, success = 0.0, False
    for t in range(params.max_episode_length):
        key, policy_key, step_key = jax.random.split(key, 3)
        action = policy(obs, jnp.int32(t), policy_key)
        obs, state, reward, terminated, truncated, _ = env.step(step_key, state, action, params)
        discounted += 0.99**t * float(reward)
        if terminated or truncated:
            success = bool(terminated)
            break
    steps = t + 1
    expected = (
        0.99**steps * numpy_potential(state.current_hrv, target)
        - numpy_potential(start, target)
        + 0.99 ** (steps - 1) * 1.0 * success
    )
    assert success == (policy_name == "oracle")
    np.testing.assert_allclose(discounted, expected, atol=1e-4)


# --- spaces and validation ------------------------------------------------------------------


def test_spaces_describe_observation_and_action():
    env = HRWritingEnv(SMALL_DIM)
    obs, _ = env.reset(jax.random.key(0))
    space = env.observation_space()
    assert isinstance(space, spaces.Dict) and set(space.spaces) == set(obs)
    assert bool(space.contains(obs))
    # current, target, content stats, context, episode fraction, gap, gain
    assert spaces.flatten_observation(obs).shape == (space.flat_dim,) == (3 + 3 + 4 + 16 + 1 + 3 + 3,)
    assert env.action_space().nvec == (5, 3, 3, 3, 3)
    assert env.max_episode_steps() == 100


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(hrv_dim=0), "hrv_dim=0"),
        (dict(similarity="euclid"), "'euclid'"),
        (dict(reward_form="dense"), "'dense'"),
        (dict(gap_features="yes"), "gap_features='yes'"),
        (dict(time_cost=-0.1), "time_cost=-0.1"),
        (dict(step_sise=0.1), "step_sise"),
        (dict(difficulty=1.5), "difficulty=1.5"),
        (dict(max_episode_length=0), "max_episode_length=0"),
    ],
)
def test_bad_configuration_raises_naming_the_value(kwargs, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(")):
        HRWritingEnv(**kwargs)


# --- held-out evaluation ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def hrv_env():
    return HRWritingEnv(8)


@pytest.fixture(scope="module")
def evaluate_oracle(hrv_env):
    """Compiled once; params and observation noise are traced arguments."""
    evaluate = lambda params, noise: heldout_evaluation(  # noqa: E731
        hrv_env, params, oracle_policy(hrv_env, params), observation_noise=noise
    )
    params = hrv_env.default_params
    return jax.jit(evaluate).lower(params, jnp.float32(0.0)).compile()


@pytest.fixture(scope="module")
def oracle_metrics(hrv_env, evaluate_oracle):
    return jax.device_get(evaluate_oracle(hrv_env.default_params, jnp.float32(0.0)))


@pytest.fixture(scope="module")
def random_metrics(hrv_env):
    params = hrv_env.default_params
    return jax.device_get(jax.jit(lambda p: heldout_evaluation(hrv_env, p, random_policy(hrv_env, p)))(params))


def test_heldout_evaluation_reports_the_interface_keys(oracle_metrics):
    assert set(oracle_metrics) == {
        "success_rate",
        "return_mean",
        "return_std",
        "final_distance",
        "alignment",
        "episode_length",
    }


def test_oracle_succeeds_on_heldout_targets(oracle_metrics):
    print(f"oracle held-out: {oracle_metrics}")
    assert oracle_metrics["success_rate"] >= 0.95
    assert oracle_metrics["episode_length"] <= 12  # prototype: about 6 steps
    assert oracle_metrics["final_distance"] <= 0.05 * math.sqrt(8)
    assert oracle_metrics["alignment"] > 0.9
    # accumulation stops at the end: continuing would add ~ +1 bonus per frozen step
    assert oracle_metrics["return_mean"] < 2.0


def test_random_policy_is_far_below_the_oracle(oracle_metrics, random_metrics):
    print(f"random held-out: {random_metrics}")
    assert random_metrics["success_rate"] <= 0.1
    assert random_metrics["success_rate"] <= oracle_metrics["success_rate"] - 0.8
    assert random_metrics["episode_length"] > 50
    assert random_metrics["return_mean"] < oracle_metrics["return_mean"] - 1.0


def test_curriculum_fields_are_traced_and_noise_is_a_robustness_probe(hrv_env, evaluate_oracle, oracle_metrics):
    # the same compiled program accepts new difficulty / precision values (no retrace)
    params = hrv_env.default_params
    precise = jax.device_get(evaluate_oracle(params.replace(difficulty=0.9, target_precision=0.02), jnp.float32(0.0)))
    assert precise["success_rate"] >= 0.95
    assert precise["episode_length"] > oracle_metrics["episode_length"]
    easy = jax.device_get(evaluate_oracle(params.replace(difficulty=0.3), jnp.float32(0.0)))
    assert easy["episode_length"] < oracle_metrics["episode_length"]
    noisy = jax.device_get(evaluate_oracle(params, jnp.float32(0.05)))
    assert noisy["episode_length"] > oracle_metrics["episode_length"]


def test_heldout_evaluation_is_deterministic(hrv_env, evaluate_oracle, oracle_metrics):
    again = jax.device_get(evaluate_oracle(hrv_env.default_params, jnp.float32(0.0)))
    for name, value in oracle_metrics.items():
        assert float(again[name]) == float(value), name
