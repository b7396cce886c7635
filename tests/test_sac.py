"""SAC (purehr.algorithms.sac): the replay buffer's rows, the soft target's bootstrap on
truncations and not terminations, the temperature's direction, a config error row, and one
learning threshold on gymnax's Pendulum through make_train (one compiled run, shared)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import at_level_1

from purehr.algorithms.registry import get_algorithm
from purehr.algorithms.sac.algorithm import make_sac
from purehr.algorithms.sac.buffer import add, gather, init_buffer, insert_indices, sample_indices
from purehr.algorithms.sac.config import SACConfig
from purehr.algorithms.sac.loss import soft_targets, temperature_loss
from purehr.algorithms.sac.n_step import n_step_transitions, window_rows
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.tasks import get_task


def test_buffer_wraps_around_and_samples_filled_rows():
    buffer = init_buffer({"x": jnp.float32(0), "y": jnp.zeros(2, jnp.int32)}, capacity=5)
    buffer = add(buffer, {"x": jnp.arange(3.0), "y": jnp.arange(6).reshape(3, 2)})
    assert (int(buffer.position), int(buffer.size)) == (3, 3)
    buffer = add(buffer, {"x": jnp.arange(3.0, 7.0), "y": jnp.arange(6, 14).reshape(4, 2)})
    # rows 3, 4, 0, 1 took 3, 4, 5, 6: the two oldest (0 and 1) overwritten, 2 kept
    np.testing.assert_array_equal(insert_indices(jnp.int32(3), 4, 5), [3, 4, 0, 1])
    np.testing.assert_array_equal(buffer.data["x"], [5.0, 6.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(buffer.data["y"][:, 0], [10, 12, 4, 6, 8])
    assert (int(buffer.position), int(buffer.size)) == (2, 5)
    np.testing.assert_array_equal(gather(buffer, jnp.array([[0, 4], [2, 2]]))["x"], [[5.0, 4.0], [2.0, 2.0]])
    # uniform over the filled rows only: 3 filled of 5 -> rows 0..2, each about a third
    rows = np.asarray(sample_indices(jax.random.bits(jax.random.PRNGKey(0), (3000,), jnp.uint32), jnp.int32(3)))
    assert rows.min() == 0 and rows.max() == 2
    assert np.all(np.abs(np.bincount(rows) / 3000 - 1 / 3) < 0.05)


def test_soft_target_bootstraps_truncations_not_terminations():
    # reward 1, gamma 0.9, alpha 0.2; the min of the twins minus alpha log pi
    targets = soft_targets(
        reward=jnp.array([1.0, 1.0, 1.0]),
        terminated=jnp.array([False, True, False]),
        next_q=jnp.array([[2.0, 3.0], [2.0, 3.0], [5.0, -1.0]]),
        next_log_prob=jnp.array([0.5, 0.5, 0.0]),
        alpha=jnp.float32(0.2),
        gamma=jnp.float32(0.9),
    )
    np.testing.assert_allclose(targets, [1.0 + 0.9 * (2.0 - 0.1), 1.0, 1.0 + 0.9 * -1.0], rtol=1e-6)


@pytest.mark.parametrize("log_prob, direction", [(2.0, 1.0), (-3.0, -1.0)])
def test_temperature_rises_below_target_entropy_and_falls_above(log_prob, direction):
    # target entropy -1: entropy -2 (log pi 2) is below it -> alpha up; entropy 3 above -> down
    grad = jax.grad(temperature_loss)(jnp.float32(0.0), jnp.full((4,), log_prob), jnp.float32(-1.0))
    assert np.sign(-float(grad)) == direction  # a gradient-descent step moves log alpha this way


@pytest.mark.parametrize(
    "fields, named",
    [
        (dict(num_envs=4, num_steps=8, buffer_size=16), "buffer_size"),
        (dict(gamma=1.5), "gamma"),
        (dict(tau=-0.1), "tau"),
        (dict(learning_starts=-1), "learning_starts"),
        (dict(critic_hidden=()), "critic_hidden"),
        (dict(actor_learning_rate="3e-4"), "actor_learning_rate"),
        (dict(gradient_steps=0), "gradient_steps"),
    ],
)
def test_config_error_names_the_field(fields, named):
    with pytest.raises(ValueError, match=rf"SACConfig\.{named}="):
        SACConfig(**fields)


def test_discrete_actions_are_refused_by_name():
    env = get_task("gymnax:CartPole-v1").make_env()
    with pytest.raises(ValueError, match=r"SAC needs a continuous \(Box\) action space.*Discrete"):
        make_sac(SACConfig(), env)


PENDULUM = SACConfig(
    total_timesteps=6_000,
    num_envs=4,
    num_steps=8,
    gradient_steps=32,
    sample_size=128,
    buffer_size=8_192,  # no wraparound: the buffer holds every step in order
    learning_starts=1_000,
    actor_hidden=(64, 64),
    critic_hidden=(64, 64),
    actor_learning_rate=1e-3,
    critic_learning_rate=1e-3,
    temperature_learning_rate=1e-3,
)


@pytest.fixture(scope="module")
def pendulum_run():
    task = get_task("gymnax:Pendulum-v1")
    env = task.make_env()
    with at_level_1():  # a learning run: its training, not its compile, is most of the cost
        trainer = make_train(PENDULUM, env)
        result = trainer(keys_for_seeds([0]))
    return task, env, trainer, result


def test_sac_learns_pendulum_through_make_train(pendulum_run):
    task, env, trainer, result = pendulum_run
    assert get_algorithm("sac").config_class() is SACConfig
    evaluate = jax.jit(
        lambda params: task.heldout_evaluation(
            env, env.default_params, trainer.algorithm.policy(params), num_episodes=8
        )
    )
    trained = jax.tree.map(lambda x: x[0], result.runner.actor_params)
    untrained = jax.jit(trainer.algorithm.init)(keys_for_seeds([0])[0]).actor_params
    # hanging and random policies score about -1,200; solved ones -150 (measured -160 at 5k steps)
    assert float(evaluate(untrained)["return_mean"]) < -900
    assert float(evaluate(trained)["return_mean"]) > -500
    assert int(result.metrics["diverged_at_update"][0, -1]) == 0
    warmup = PENDULUM.warmup_updates
    assert np.all(np.isnan(np.asarray(result.metrics["critic_loss"][0, :warmup])))
    assert np.all(np.isfinite(np.asarray(result.metrics["critic_loss"][0, warmup:])))


def test_buffer_keeps_the_final_observation_of_truncated_episodes(pendulum_run):
    """Pendulum ends by its 200-step time limit only: nothing is stored as terminated, and the
    stored next observation is the next row's observation except at each 200th step, where it is
    the episode's final one, not the reset's."""
    _, _, _, result = pendulum_run
    data = jax.tree.map(lambda x: np.asarray(x[0]), result.runner.buffer.data)
    steps = int(result.runner.buffer.size[0]) // PENDULUM.num_envs
    per_env = lambda x: x[: steps * PENDULUM.num_envs].reshape(steps, PENDULUM.num_envs, -1)  # noqa: E731
    observation, next_observation = per_env(data.observation), per_env(data.next_observation)
    assert not data.terminated.any()
    differs = np.any(next_observation[:-1] != observation[1:], axis=-1)  # [steps - 1, E]
    expected = (np.arange(1, steps) % 200 == 0)[:, None].repeat(PENDULUM.num_envs, axis=1)
    np.testing.assert_array_equal(differs, expected)


def test_n_step_windows_follow_one_environment_in_the_buffer_and_stop_at_episode_ends(pendulum_run):
    """On the trained buffer (rows written time-major, E apart per environment): a row's 8-step
    window runs to the 200-step time limit or to the newest row, whichever comes first, and its
    reward is the discounted sum of that environment's stored rewards."""
    _, _, _, result = pendulum_run
    buffer = jax.tree.map(lambda x: x[0], result.runner.buffer)
    n, envs, gamma = 8, PENDULUM.num_envs, np.float32(0.9)
    rows = jnp.arange(int(buffer.size), dtype=jnp.int32)
    window = gather(buffer, window_rows(rows, n, envs, buffer.capacity))
    batch, discount = n_step_transitions(window, jnp.float32(gamma))
    t = np.arange(int(buffer.size)) // envs
    length = np.minimum.reduce([np.full_like(t, n), 200 - t % 200, t.max() + 1 - t])
    np.testing.assert_allclose(discount, gamma**length, rtol=1e-6)
    reward = np.asarray(buffer.data.reward)
    expected = [sum(gamma**k * reward[r + k * envs] for k in range(m)) for r, m in zip(range(len(t)), length)]
    np.testing.assert_allclose(batch.reward, expected, rtol=1e-5, atol=1e-4)
