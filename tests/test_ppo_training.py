"""The one-scan trainer: determinism, seed-vmap equivalence, learning on gymnax suites."""

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from conftest import at_level_1

from purehr.algorithms.ppo.config import PPOConfig
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.gymnax_adapter import GymnaxEnv
from purehr.tasks import get_task

TINY = PPOConfig(
    total_timesteps=4 * 64 * 3,
    num_envs=4,
    num_steps=64,
    minibatch_size=64,
    num_epochs=2,
    actor_hidden=(16,),
    critic_hidden=(16,),
    gamma=0.99,
)


@pytest.fixture(scope="module")
def cartpole():
    return GymnaxEnv("CartPole-v1")


@pytest.fixture(scope="module")
def tiny_train(cartpole):
    return make_train(TINY, cartpole)


def leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_same_keys_give_bit_identical_parameters(tiny_train):
    keys = keys_for_seeds([0, 1, 2])
    first = tiny_train(keys)
    second = tiny_train(keys)
    for a, b in zip(leaves(first.runner.params), leaves(second.runner.params)):
        assert np.array_equal(a, b)
    other = tiny_train(keys_for_seeds([5, 6, 7]))
    assert not np.array_equal(leaves(first.runner.params)[0], leaves(other.runner.params)[0])


def test_three_seeds_vmapped_equal_each_seed_alone(tiny_train):
    together = tiny_train(keys_for_seeds([0, 1, 2]))
    for index, seed in enumerate([0, 1, 2]):
        alone = tiny_train(keys_for_seeds([seed]))
        for a, b in zip(leaves(together.runner.params), leaves(alone.runner.params)):
            np.testing.assert_allclose(a[index], b[0], rtol=1e-5, atol=1e-6)


def test_metrics_are_per_update_only(tiny_train):
    result = tiny_train(keys_for_seeds([0, 1, 2]))  # three seeds: the program compiled above
    assert result.metrics["loss"].shape == (3, TINY.num_updates)
    assert all(value.shape == (3, TINY.num_updates) for value in result.metrics.values())
    assert np.array_equal(
        np.asarray(result.metrics["env_steps"][0]), TINY.batch_size * np.arange(1, TINY.num_updates + 1)
    )


def test_host_callback_sees_every_update_and_can_stop(cartpole):
    seen = []

    def callback(metrics):
        seen.append(int(metrics["update"][0]))
        return len(seen) < 2  # stop after the second update

    train = make_train(TINY.replace(total_timesteps=TINY.batch_size * 5), cartpole, callback=callback)
    result = train(keys_for_seeds([0]))
    assert seen == [1, 2]
    assert int(result.runner.update_index[0]) == 2
    assert np.isnan(np.asarray(result.metrics["loss"][0, 2:])).all()


@pytest.mark.slow
def test_vmapped_init_and_training_do_not_deadlock_on_the_default_thread_pool():
    """An orthogonal init (QR) vmapped over seeds hangs XLA:CPU at 0% CPU; ours must finish."""
    script = textwrap.dedent("""
        import jax
        from purehr.envs.gymnax_adapter import GymnaxEnv
        from purehr.algorithms.ppo.config import PPOConfig
        from purehr.algorithms.trainer import make_train
        from purehr.engine.seeds import keys_for_seeds
        config = PPOConfig(total_timesteps=512, num_envs=4, num_steps=64, minibatch_size=64,
                           num_epochs=1, actor_hidden=(32, 32), critic_hidden=(32, 32))
        result = make_train(config, GymnaxEnv("CartPole-v1"))(keys_for_seeds(range(8)))
        jax.block_until_ready(result)
        print("finished")
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NPROC", "XLA_FLAGS")}
    completed = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True, timeout=240, env=env
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "finished" in completed.stdout


def test_the_cartpole_task_reaches_400_held_out_with_its_default_config_at_two_fifths_of_its_budget():
    """The suite's task (PureJaxRL's CartPole settings) at 200k of its 500k steps, judged by the
    generic held-out evaluation (100 fixed episodes, greedy policy) against its random floor.
    At 150k (a third) seeds 0-2 held 384, 347 and 395 on an AMD EPYC (this project's CI machine,
    2026-12-04; float32 rounds otherwise there, so its seeds are other draws) and more elsewhere;
    at 200k they held 500, 492 and 500 there."""
    task = get_task("gymnax:CartPole-v1")
    env = task.make_env()
    with at_level_1():  # a learning run: its training, not its compile, is most of the cost
        train = make_train(task.default_config.replace(total_timesteps=200_000), env)
        result = train(keys_for_seeds([0, 1, 2]))

    @jax.jit
    def heldout(params):
        return task.heldout_evaluation(env, env.default_params, train.algorithm.policy(params))["return_mean"]

    returns = np.asarray(jax.vmap(heldout)(result.runner.params))
    random = task.floors[0].make_policy(env, env.default_params)
    floor = float(jax.jit(lambda: task.heldout_evaluation(env, env.default_params, random)["return_mean"])())
    assert floor < 30 and returns.mean() >= 400, (returns, floor)


def test_pendulum_runs_through_the_adapter_with_box_actions():
    env = GymnaxEnv("Pendulum-v1")
    assert env.action_space().shape == (1,) and float(env.action_space().high) == 2.0
    config = PPOConfig(
        total_timesteps=2048 * 4, num_envs=8, num_steps=256, minibatch_size=256, actor_hidden=(32,), critic_hidden=(32,)
    )
    result = make_train(config, env)(keys_for_seeds([0]))
    returns = np.asarray(result.metrics["mean_episode_return"][0])
    # Pendulum truncates at 200 steps: every rollout of 8 x 256 steps completes 8 episodes
    assert np.all(np.asarray(result.metrics["episodes_completed"][0]) >= 8)
    assert np.all((returns < 0) & (returns > -2000))


def test_unknown_gymnax_name_is_refused():
    with pytest.raises(ValueError, match="NotAnEnv-v0"):
        GymnaxEnv("NotAnEnv-v0")
