"""Reward scaling and return normalisation (issue 52, item 2: ``PPOConfig.reward_scaling``,
``PPOConfig.normalize_returns``): the arithmetic by hand, the default program unchanged, no new
state leaf by default, and learning with the normalisation on."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ctrl_c_from_a_callback

import purehr.algorithms.ppo.algorithm as ppo_algorithm
from purehr.algorithms.ppo.algorithm import make_ppo
from purehr.algorithms.ppo.config import PPOConfig
from purehr.algorithms.ppo.rewards import ReturnStatistics, initial_return_statistics, training_rewards
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.gymnax_adapter import GymnaxEnv
from purehr.run.store.checkpoints import stored_form
from purehr.tasks import get_task

KEY = jax.random.PRNGKey(0)
GAMMA = jnp.float32(0.5)
# a rollout of T=3 steps of E=2 environments; environment 0's episode ends at step 1
REWARDS = jnp.asarray([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
DONE = jnp.asarray([[False, False], [True, False], [False, False]])
# R_t = gamma R_{t-1} + r_t, reset after a step that ended its episode (by hand):
# env 0: 1, 0.5 + 3 = 3.5 (ended), 5; env 1: 2, 1 + 4 = 5, 2.5 + 6 = 8.5
RETURNS = [1.0, 2.0, 3.5, 5.0, 5.0, 8.5]
RETURNS_VAR = 53 / 9  # 139.5 / 6 - (25 / 6)^2
# the same rewards again, continuing from the carried returns 5 and 8.5, no episode ending:
# env 0: 2.5 + 1 = 3.5, 1.75 + 3 = 4.75, 2.375 + 5 = 7.375; env 1: 4.25 + 2 = 6.25, 7.125, 9.5625
SECOND_RETURNS = [3.5, 6.25, 4.75, 7.125, 7.375, 9.5625]

TINY = PPOConfig(
    total_timesteps=4 * 32 * 2,
    num_envs=4,
    num_steps=32,
    minibatch_size=64,
    num_epochs=1,
    actor_hidden=(8,),
    critic_hidden=(8,),
    gamma=0.99,
)


def test_rewards_are_divided_by_the_running_std_of_the_discounted_return_by_hand():
    statistics = initial_return_statistics(True, 2)
    rewards, statistics = training_rewards(REWARDS, DONE, statistics, GAMMA, 1.0)
    assert float(statistics.count) == 6
    assert float(statistics.mean) == pytest.approx(25 / 6, rel=1e-6)
    assert float(statistics.var) == pytest.approx(RETURNS_VAR, rel=1e-6)
    assert statistics.discounted_return.tolist() == [5.0, 8.5]  # what the next rollout continues
    np.testing.assert_allclose(rewards, np.asarray(REWARDS) / np.sqrt(RETURNS_VAR), rtol=1e-6)

    rewards, statistics = training_rewards(REWARDS, jnp.zeros_like(DONE), statistics, GAMMA, 1.0)
    every_return = np.asarray(RETURNS + SECOND_RETURNS)
    assert float(statistics.count) == 12
    assert float(statistics.mean) == pytest.approx(every_return.mean(), rel=1e-6)
    assert float(statistics.var) == pytest.approx(every_return.var(), rel=1e-6)
    assert statistics.discounted_return.tolist() == [7.375, 9.5625]
    np.testing.assert_allclose(rewards, np.asarray(REWARDS) / np.sqrt(every_return.var()), rtol=1e-6)


def test_reward_scaling_multiplies_the_rewards_before_their_normalisation():
    scaled, none = training_rewards(REWARDS, DONE, (), GAMMA, 10.0)
    assert none == () and np.asarray(scaled).tolist() == (10 * np.asarray(REWARDS)).tolist()
    normalised, statistics = training_rewards(REWARDS, DONE, initial_return_statistics(True, 2), GAMMA, 10.0)
    assert float(statistics.var) == pytest.approx(100 * RETURNS_VAR, rel=1e-6)  # the scaled returns' variance
    np.testing.assert_allclose(normalised, np.asarray(REWARDS) / np.sqrt(RETURNS_VAR), rtol=1e-6)


@pytest.fixture(scope="module")
def cartpole():
    return GymnaxEnv("CartPole-v1")


def test_the_default_update_program_is_the_one_without_the_options(cartpole, monkeypatch):
    """At the defaults, the update lowers to exactly the program of an update that never
    scales nor normalises (the code before the options): not a multiplication by 1 more."""
    ppo = make_ppo(TINY, cartpole)
    state = ppo.init(KEY)
    with_defaults = jax.jit(ppo.update).lower(state).as_text()
    scaled = make_ppo(TINY.replace(reward_scaling=2.0), cartpole)
    assert jax.jit(scaled.update).lower(state).as_text() != with_defaults  # the comparison can fail
    monkeypatch.setattr(ppo_algorithm, "training_rewards", lambda rewards, done, statistics, *_: (rewards, statistics))
    without_options = jax.jit(make_ppo(TINY, cartpole).update).lower(state).as_text()
    assert with_defaults == without_options


def test_the_return_statistics_are_a_state_leaf_only_when_normalising(cartpole):
    state = jax.eval_shape(make_ppo(TINY, cartpole).init, KEY)
    assert state.return_statistics == () and "return_statistics" not in stored_form(state)
    normalising = jax.eval_shape(make_ppo(TINY.replace(normalize_returns=True), cartpole).init, KEY)
    kept = stored_form(normalising)["return_statistics"]
    assert isinstance(kept, ReturnStatistics) and kept.discounted_return.shape == (TINY.num_envs,)
    assert set(stored_form(normalising)) == set(stored_form(state)) | {"return_statistics"}


@pytest.mark.slow
def test_cartpole_learns_far_above_its_random_floor_with_normalised_returns():
    """The CartPole task's defaults with ``normalize_returns`` at 60k of its 500k steps: seeds 0
    and 1 held 458 and 490 (random: 20.5)."""
    task = get_task("gymnax:CartPole-v1")
    env = task.make_env()
    config = task.default_config.replace(total_timesteps=60_000, normalize_returns=True)
    train = make_train(config, env)
    result = train(keys_for_seeds([0, 1]))
    counts = np.asarray(result.runner.return_statistics.count)
    assert counts.tolist() == [config.num_updates * config.batch_size] * 2  # updated once per rollout

    @jax.jit
    def heldout(params):
        return task.heldout_evaluation(env, env.default_params, train.algorithm.policy(params))["return_mean"]

    returns = np.asarray(jax.vmap(heldout)(result.runner.params))
    random = task.floors[0].make_policy(env, env.default_params)
    floor = float(jax.jit(lambda: task.heldout_evaluation(env, env.default_params, random)["return_mean"])())
    print("held-out returns", returns, "random floor", floor)
    assert floor < 30 and np.all(returns >= 200), (returns, floor)


SAVED_TASK = "gymnax:CartPole-v1"
SAVED = TINY.replace(
    total_timesteps=4 * 64 * 16,  # 16 updates of 4 x 64
    num_steps=64,
    minibatch_size=128,
    normalize_returns=True,
    reward_scaling=10.0,
    anneal_lr=False,
    checkpoint_interval=1024,  # checkpoints at 0, 1,024, ..., 4,096: every 4 updates
    eval_episodes=4,
    quick_eval_episodes=4,
)


def _checkpoint_digests(run, seed: int) -> list[str]:
    from purehr.run.store.files import read_csv

    return [row["state_digest"] for row in read_csv(run / SAVED_TASK / f"seed_{seed}" / "checkpoints.csv")]


@pytest.mark.slow
def test_a_normalising_run_interrupted_and_resumed_ends_bit_identical_and_its_model_round_trips(tmp_path, monkeypatch):
    """``normalize_returns`` with ``reward_scaling`` 10: the running return statistics are part
    of the checkpointed state, so a run Ctrl-C'd at update 6 of 16 and resumed from its
    checkpoint at update 4 ends with the uninterrupted run's checkpoint digests and final state
    (a resume that restarted the statistics would not); the statistics counted every
    transition once (16 updates x 256). A model saved from the run loads back with the same
    options, parameters and actions. About 15 s on 2 cores (one compiled program: the resume
    reuses it)."""
    import contextlib
    import io

    from purehr.model.facade import PPOModel
    from purehr.run import restore
    from purehr.run.host.recorder import RunRecorder
    from purehr.run.outcome import RunInterrupted
    from purehr.run.protocol import train_all_seeds

    configs, seeds = {SAVED_TASK: SAVED}, [0, 1]
    with contextlib.redirect_stderr(io.StringIO()):
        reference = train_all_seeds(
            tmp_path / "whole", tasks=[SAVED_TASK], seeds=seeds, configs=configs, progress=False
        )
    logged = RunRecorder.on_update

    def interrupting(self, task, metrics):
        if int(np.asarray(metrics["update"])[0]) == 6:
            ctrl_c_from_a_callback(self)
        return logged(self, task, metrics)

    with monkeypatch.context() as patch:
        patch.setattr(RunRecorder, "on_update", interrupting)
        with pytest.raises(RunInterrupted), contextlib.redirect_stderr(io.StringIO()):
            train_all_seeds(tmp_path / "cut", tasks=[SAVED_TASK], seeds=seeds, configs=configs, progress=False)
    assert len(_checkpoint_digests(tmp_path / "cut", 0)) < 5
    with contextlib.redirect_stderr(io.StringIO()):
        resumed = train_all_seeds(tmp_path / "cut", resume=True, progress=False)
    for seed in seeds:
        whole = _checkpoint_digests(tmp_path / "whole", seed)
        assert _checkpoint_digests(tmp_path / "cut", seed) == whole and len(whole) == 5, seed
    statistics = resumed.final_runners[SAVED_TASK].return_statistics
    assert np.asarray(statistics.count).tolist() == [16 * 256] * 2
    for ours, theirs in zip(
        jax.tree.leaves(statistics), jax.tree.leaves(reference.final_runners[SAVED_TASK].return_statistics)
    ):
        assert np.array_equal(np.asarray(ours), np.asarray(theirs))

    restored = restore(tmp_path / "cut", task=SAVED_TASK, seed=1)
    model = PPOModel(restored.env, restored.env_params, restored.config, restored.params, {}, seed=1)
    loaded = PPOModel.load(model.save(tmp_path / "model"))
    assert loaded.config.normalize_returns is True and loaded.config.reward_scaling == 10.0
    assert loaded.config == restored.config
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(loaded.params), jax.tree.leaves(model.params)))
    observations = jax.random.uniform(KEY, (64, 4), minval=-0.2, maxval=0.2)
    actions = np.asarray(loaded.predict(observations))
    assert np.array_equal(actions, np.asarray(model.predict(observations)))
