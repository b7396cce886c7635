"""The Brax suite (``brax:<name>``): the adapter's invariants on inverted_pendulum (spaces, the
time limit is a truncation and Brax's own end a termination, float32, +1 per step upright,
actions made safe), the task it becomes, bad input, and a small learning run."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from purehr.algorithms.ppo.config import PPOConfig  # noqa: E402
from purehr.algorithms.trainer import make_train  # noqa: E402
from purehr.engine.seeds import keys_for_seeds  # noqa: E402
from purehr.envs import spaces  # noqa: E402
from purehr.envs.brax_adapter import BraxEnv, BraxParams  # noqa: E402
from purehr.envs.rollout import heldout_evaluation, random_policy  # noqa: E402
from purehr.run.store.record import recorded_env  # noqa: E402
from purehr.tasks import get_task  # noqa: E402
from purehr.tasks.suites.brax import INVERTED_PENDULUM_DEFAULTS  # noqa: E402

LIMIT = 30
"""The time limit of the invariant tests: the pole stays up under the zero action longer than
this (its held-out floor is 68.7 steps, none under 51) and falls well before it under a constant
full push."""


@pytest.fixture(scope="module")
def pendulum() -> BraxEnv:
    return BraxEnv("inverted_pendulum", episode_length=LIMIT)


@pytest.fixture(scope="module")
def run_constant(pendulum):
    """``run(action, steps_before)``: LIMIT steps of one constant action from one fixed reset,
    with the adapter's step counter starting at ``steps_before`` (as if that many steps had been
    taken): observations, rewards, terminated, truncated, invalid_action, nonfinite_state
    [LIMIT, ...]. One compiled program for every call (the arguments are traced)."""

    @jax.jit
    def run(action, steps_before):
        observation, state = pendulum.reset(jax.random.PRNGKey(3), pendulum.default_params)
        state = state.replace(steps=jnp.int32(steps_before))

        def step(state, _):
            observation, state, reward, terminated, truncated, info = pendulum.step(
                jax.random.PRNGKey(0), state, jnp.full((1,), action, jnp.float32)
            )
            return state, (observation, reward, terminated, truncated, info["invalid_action"], info["nonfinite_state"])

        _, rows = jax.lax.scan(step, state, None, LIMIT)
        return (observation, *rows)

    return lambda action, steps_before=0: jax.tree.map(np.asarray, run(action, steps_before))


def test_spaces_params_and_recorded_keywords(pendulum):
    assert pendulum.observation_space() == spaces.Box(-jnp.inf, jnp.inf, (4,), jnp.float32)
    assert pendulum.action_space() == spaces.Box(-1.0, 1.0, (1,), jnp.float32)
    assert pendulum.max_episode_steps() == LIMIT
    assert pendulum.default_params == BraxParams(episode_length=LIMIT)
    assert not pendulum.defines_success
    assert pendulum.make_kwargs == {"backend": "positional", "episode_length": LIMIT}
    assert BraxEnv("inverted_pendulum").max_episode_steps() == 1000  # Brax's EpisodeWrapper default


def test_reset_is_brax_documented_start_and_float32(run_constant):
    """inverted_pendulum starts at q = qd = 0 plus uniform noise in [-0.01, 0.01] (its docstring)."""
    first, observations, *_ = run_constant(0.0)
    assert first.dtype == np.float32 and observations.dtype == np.float32
    assert np.all(np.abs(first) <= 0.01) and np.any(first != 0.0)


def test_time_limit_is_truncation_and_reward_is_one_per_upright_step(run_constant):
    _, observations, rewards, terminated, truncated, invalid, nonfinite = run_constant(0.0)
    assert not terminated.any(), "the pole should stay up for 30 steps under the zero action"
    assert truncated.tolist() == [False] * (LIMIT - 1) + [True]  # at the limit, not before
    np.testing.assert_array_equal(rewards, np.ones(LIMIT, np.float32))  # +1 for every step upright
    assert rewards.dtype == np.float32
    assert np.all(np.abs(observations[:, 1]) <= 0.2)  # the hinge angle never passed Brax's 0.2 rad
    assert not invalid.any() and not nonfinite.any()


def test_falling_is_termination_even_at_the_limit(run_constant):
    _, observations, _, terminated, truncated, _, _ = run_constant(1.0)
    fall = int(np.argmax(terminated))
    assert terminated[fall] and 0 < fall < LIMIT - 1, "a constant full push should topple the pole early"
    assert abs(observations[fall, 1]) > 0.2 >= abs(observations[fall - 1, 1])  # Brax's done: |angle| > 0.2
    assert not truncated[: fall + 1].any()
    # the same fall on the step the time limit is reached: terminated, never truncated (as Brax)
    _, _, _, terminated_at_limit, truncated_at_limit, _, _ = run_constant(1.0, LIMIT - fall - 1)
    assert terminated_at_limit[fall] and not truncated_at_limit[fall]
    assert not truncated_at_limit[:fall].any()


def test_nan_action_acts_as_zero_and_is_flagged(run_constant):
    _, zero_observations, *_ = run_constant(0.0)
    _, nan_observations, _, _, _, invalid, _ = run_constant(np.nan)
    np.testing.assert_array_equal(nan_observations, zero_observations)
    assert invalid.all()


def test_task_defaults_floors_source_and_manifest_round_trip():
    task = get_task("brax:inverted_pendulum")
    assert task.default_config is INVERTED_PENDULUM_DEFAULTS
    assert not task.has_reference and [floor.flag for floor in task.floors] == ["zero", "random"]
    env = task.make_env()
    assert task.env_kwargs(env) == {"backend": "positional", "episode_length": 1000}
    source = task.source(env)
    assert source["suite"] == "brax" and source["environment"] == "inverted_pendulum"
    assert set(source["versions"]) >= {"brax", "mujoco"}
    manifest = {"environments": {task.name: {"backend": "spring", "episode_length": 200}}}
    rebuilt = recorded_env(manifest, task)
    assert rebuilt.make_kwargs == {"backend": "spring", "episode_length": 200}
    assert rebuilt.max_episode_steps() == 200
    assert get_task("brax:hopper").default_protocol.eval_episodes == 20  # the others: cheap evaluation


def test_bad_input_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown brax environment 'invertedpendulum'.*inverted_pendulum"):
        get_task("brax:invertedpendulum")
    with pytest.raises(ValueError, match=r"backend 'bullet': expected one of \['positional'"):
        BraxEnv("inverted_pendulum", backend="bullet")
    with pytest.raises(ValueError, match=r"episode_length=0: expected a positive integer"):
        BraxEnv("inverted_pendulum", episode_length=0)


@pytest.mark.slow
def test_ppo_learns_to_balance_far_above_the_random_floor():
    """41k steps of PPO (small networks, episodes of at most 200 steps) against acting at random,
    on the same 16 held-out episodes."""
    env = BraxEnv("inverted_pendulum", episode_length=200)
    config = PPOConfig(
        total_timesteps=40_960,
        num_envs=64,
        num_steps=32,
        minibatch_size=512,
        learning_rate=1e-3,
        anneal_lr=False,
        gamma=0.97,
        ent_coef=0.0,
        actor_hidden=(32, 32),
        critic_hidden=(64, 64),
        log_std_init=0.0,
        normalize_observations=True,
    )
    train = make_train(config, env)
    params = jax.tree.map(lambda x: x[0], train(keys_for_seeds([0])).runner.params)

    @jax.jit
    def returns(params):
        trained = heldout_evaluation(env, env.default_params, train.algorithm.policy(params), 16)
        floor = heldout_evaluation(env, env.default_params, random_policy(env.action_space()), 16)
        return trained["return_mean"], floor["return_mean"]

    trained, floor = map(float, returns(params))
    assert floor < 50  # random pushes topple the pole within tens of steps (28.3 measured)
    assert trained >= 120 and trained >= 3 * floor, (trained, floor)  # 192.2 measured
