"""Any environment as a task: the registry's three forms (registered, <suite>:<environment>,
module:factory), the generic held-out evaluation on a hand-countable environment, the floors,
and the refusals a user meets before anything is compiled or written."""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import pytest
from flax import struct

from purehr.cli.env_args import env_kwargs_from_args
from purehr.envs import spaces
from purehr.envs.base import Environment
from purehr.envs.rollout import heldout_evaluation, heldout_key, record_episode
from purehr.run.planning.run_plan import RunRequest, new_run_plan
from purehr.tasks import TASKS, environment_task, get_task, register_task, task_of_env


@struct.dataclass
class CountParams:
    goal: int = 3
    limit: int = 5


class Count(Environment):
    """Observation: the step count. Action 1 counts up, 0 stands still; reaching ``goal`` is a
    success (terminated); ``limit`` steps truncate. Reward 1 per step counted up."""

    name = "count"

    def __init__(self, goal: int = 3):
        self.goal = goal

    @property
    def default_params(self):
        return CountParams(goal=self.goal)

    def reset(self, key, params=None):
        return jnp.zeros(1, jnp.float32), (jnp.int32(0), jnp.int32(0))

    def step(self, key, state, action, params=None):
        params = params or self.default_params
        count, t = state[0] + action, state[1] + 1
        success = count >= params.goal
        truncated = jnp.logical_and(t >= params.limit, jnp.logical_not(success))
        reward = jnp.asarray(action, jnp.float32)
        return count.astype(jnp.float32)[None], (count, t), reward, success, truncated, {"success": success}

    def observation_space(self, params=None):
        return spaces.Box(0.0, 10.0, (1,))

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def max_episode_steps(self, params=None):
        return (params or self.default_params).limit


def always(action):
    return lambda observation, t, key: jnp.int32(action)


def test_generic_evaluation_counts_what_a_hand_count_gives():
    env = Count(goal=3)
    up = jax.jit(lambda: heldout_evaluation(env, env.default_params, always(1), num_episodes=4))()
    assert {k: float(v) for k, v in up.items()} == {
        "success_rate": 1.0,  # the goal after 3 steps, before the limit of 5
        "return_mean": 3.0,
        "return_std": 0.0,
        "return_min": 3.0,
        "episode_length": 3.0,
    }
    still = heldout_evaluation(env, env.default_params, always(0), num_episodes=4)
    assert float(still["success_rate"]) == 0.0 and float(still["episode_length"]) == 5.0  # truncated at the limit
    episode = record_episode(env, env.default_params, always(1))
    assert episode["active"].tolist() == [True, True, True, False, False]  # the showcase stops with the episode
    assert episode["reward"].tolist() == [1.0, 1.0, 1.0, 1.0, 1.0]  # recorded, masked by active


def test_heldout_keys_are_fixed_and_none_is_a_training_seed_key():
    assert jnp.array_equal(heldout_key(), heldout_key())
    training = jax.vmap(jax.random.PRNGKey)(jnp.arange(5, dtype=jnp.uint32))
    assert not any(jnp.array_equal(heldout_key(), key) for key in training)


def test_an_environment_without_success_reports_nan_not_zero():
    class NoSuccess(Count):
        defines_success = False

    metrics = heldout_evaluation(NoSuccess(), CountParams(), always(1), num_episodes=2)
    assert math.isnan(float(metrics["success_rate"])) and float(metrics["return_mean"]) == 3.0


def test_a_registered_environment_is_a_task_with_floors_and_no_reference():
    task = register_task(environment_task("count", Count))
    try:
        assert get_task("count") is task and task_of_env(task.make_env()) is task
        assert task.baseline is None and [b.flag for b in task.floors] == ["random"]  # discrete: no zero action
        env = task.make_env(goal=2)
        random = task.floors[0].make_policy(env, env.default_params)
        assert 0.0 < float(heldout_evaluation(env, env.default_params, random, 64)["success_rate"]) < 1.0
        with pytest.raises(ValueError, match="'count' is already registered; pass replace=True"):
            register_task(environment_task("count", Count))
    finally:
        del TASKS["count"]
    with pytest.raises(ValueError, match="without ':'"):
        register_task(environment_task("my:count", Count))


def test_a_suite_task_rebuilds_the_same_environment_and_records_its_source():
    task = get_task("gymnax:CartPole-v1")
    env = task.make_env()
    assert get_task("gymnax:CartPole-v1") is task and task_of_env(env) is task
    assert task.source(env)["suite"] == "gymnax" and task.source(env)["versions"]["gymnax"] == "0.0.9"
    assert task.default_config.num_envs == 4 and task.default_config.learning_rate == 2.5e-4  # PureJaxRL's ppo.py


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("gymnax:CartPol-v1", r"unknown gymnax environment 'CartPol-v1' \(closest: \['CartPole-v1'"),
        ("swng", r"unknown task 'swng' \(did you mean 'swing'\?\)"),
        ("no_such_module:make_env", r"module 'no_such_module' does not import"),
        ("purehr.envs:no_factory", r"purehr.envs has no function 'no_factory'"),
        ("purehr.envs.spaces:flat_dim", r"flat_dim\(\) missing|returned"),
        ("pendulum", r"<suite>:<environment> with a suite of \['brax', 'gymnax', 'pgx', 'xminigrid'\]"),
    ],
)
def test_a_bad_task_name_says_what_is_wrong_and_what_is_expected(name, message):
    with pytest.raises((ValueError, TypeError), match=message):
        get_task(name)


def test_a_suite_whose_package_is_missing_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnax", None)  # import gymnax now raises ImportError
    with pytest.raises(ValueError, match=r"needs the gymnax package .*pip install 'purehr\[gymnax\]'"):
        get_task("gymnax:Acrobot-v1")
    monkeypatch.setitem(sys.modules, "pgx", None)
    with pytest.raises(ValueError, match=r"needs the pgx package .*: pip install 'purehr\[pgx\]'$"):
        get_task("pgx:othello")


def test_an_unsupported_space_is_named_with_why():
    class DiscreteObservations(Count):
        def observation_space(self, params=None):
            return spaces.Discrete(4)

    with pytest.raises(TypeError, match=r"observation space Discrete\(n=4\) is not supported; expected Box"):
        environment_task("discrete-obs", DiscreteObservations)


def test_environment_arguments_are_checked_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match=r"task 'hrv' with environment arguments \{'hrv_dm': 4\}"):
        new_run_plan(tmp_path / "run", RunRequest.checked(tasks=["hrv"], env_kwargs={"hrv": {"hrv_dm": 4}}))
    with pytest.raises(ValueError, match="expected JSON values"):
        RunRequest.checked(tasks=["hrv"], env_kwargs={"hrv": {"params": object()}})
    with pytest.raises(ValueError, match=r"given for tasks \['swing'\] that are not being trained"):
        new_run_plan(tmp_path / "run", RunRequest.checked(tasks=["hrv"], env_kwargs={"swing": {}}))
    assert not (tmp_path / "run").exists()


def test_env_arg_flags_parse_json_values_and_the_brax_backend():
    tasks = ["hrv", "brax:ant", "brax:hopper"]
    parsed = env_kwargs_from_args([["hrv", "hrv_dim=4"], ["hrv", "reward_form=distance"]], tasks, "spring")
    assert parsed == {
        "hrv": {"hrv_dim": 4, "reward_form": "distance"},
        "brax:ant": {"backend": "spring"},
        "brax:hopper": {"backend": "spring"},
    }
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        env_kwargs_from_args([["hrv", "hrv_dim"]], tasks, None)
    with pytest.raises(ValueError, match="no brax:<name> task"):
        env_kwargs_from_args(None, ["hrv"], "mjx")
