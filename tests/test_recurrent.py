"""The recurrent (GRU) policy: the update's sequence pass equals a step-by-step recomputation
of the rollout, the memory is zero exactly where episodes start, minibatches are whole
sequences, bad settings are refused, and on a memory task the GRU learns what an MLP cannot.
The resumed protocol run is tests/test_recurrent_run.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.ppo.algorithm import make_ppo
from purehr.algorithms.ppo.config import PPOConfig
from purehr.algorithms.ppo.loss import Batch
from purehr.algorithms.trainer import make_train
from purehr.engine.distributions import make_distribution
from purehr.engine.networks import RecurrentActorCritic
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.policies import RecurrentPolicy
from purehr.envs.rollout import heldout_evaluation
from purehr.envs.spaces import flatten_observation
from purehr.tasks import get_task

SMALL_GRU = dict(
    num_envs=4,
    num_steps=24,
    minibatch_size=48,  # two minibatches of two environments' whole sequences
    num_epochs=1,
    actor_hidden=(8,),
    critic_hidden=(8,),
    policy="gru",
    recurrent_width=6,
)


@pytest.fixture(scope="module", params=[False, True], ids=["readout-hidden", "readout-skip"])
def hrv_rollout(request):
    """A GRU PPO on hrv after one update (a carry that is not the initial one), and the rollout
    of the next update; episodes are capped at 10 steps so the rollout crosses resets. Both
    readouts: the heads read the hidden state, or [hidden, embedding] (``recurrent_skip``)."""
    env = get_task("hrv").env_class(max_episode_length=10)
    config = get_task("hrv").default_config.replace(total_timesteps=96 * 4, recurrent_skip=request.param, **SMALL_GRU)
    ppo = make_ppo(config, env)
    runner = ppo.init(jax.random.PRNGKey(3))
    runner, _ = jax.jit(ppo.update)(runner)
    return ppo, runner, jax.jit(ppo.rollout)(runner)


def one_step(network, params, hidden, observation):
    """(next hidden, the heads' readout) of one step, assembled by hand from the GRU's parts:
    the readout is the hidden state, or with ``skip`` the hidden state beside the embedding."""
    gates, embedded = network.apply(params, observation, method=RecurrentActorCritic.prepare)
    hidden, _ = network.apply(params, hidden, gates, method=RecurrentActorCritic.advance)
    return hidden, (np.concatenate([hidden, embedded]) if network.torso.skip else hidden)


def step_by_step(ppo, params, initial_hidden, observations, starts):
    """The independent reference: one environment at a time, one step at a time, the hidden
    state zeroed by hand where the stored flags say an episode starts. [T, E] outputs."""
    network = ppo.network
    action_space = ppo.env.action_space(ppo.env_params)
    values, hiddens = np.zeros(starts.shape), []
    actor_outputs = []
    for e in range(starts.shape[1]):
        hidden = np.asarray(initial_hidden[e])
        for t in range(starts.shape[0]):
            if starts[t, e]:
                hidden = np.zeros_like(hidden)
            hidden, readout = one_step(network, params, hidden, observations[t, e])
            hiddens.append(hidden)
            actor_output, _ = network.apply(params, readout, method=RecurrentActorCritic.policy)
            actor_outputs.append((t, e, actor_output))
            values[t, e] = network.apply(params, readout, method=RecurrentActorCritic.value)
    return values, actor_outputs, action_space


def test_the_update_recomputes_the_rollout_step_by_step(hrv_rollout):
    ppo, runner, rollout = hrv_rollout
    trajectory = rollout.trajectory
    starts = np.asarray(trajectory.memory)
    values, actor_outputs, action_space = step_by_step(
        ppo, runner.params, runner.policy_state[0], trajectory.observation, starts
    )
    np.testing.assert_allclose(trajectory.value, values, rtol=1e-5, atol=1e-6)  # what the rollout acted with
    for t, e, actor_output in actor_outputs:
        log_prob = make_distribution(action_space, actor_output, None).log_prob(trajectory.action[t, e])
        np.testing.assert_allclose(trajectory.log_prob[t, e], log_prob, rtol=1e-5, atol=1e-5)
    # the loss's pass: the whole batch as one minibatch of every environment's sequence
    zeros = jnp.zeros_like(trajectory.value)
    batch = ppo.core.batch(
        Batch(trajectory.observation, trajectory.action, trajectory.log_prob, zeros, zeros),
        trajectory.memory,
        runner.policy_state,
    )
    actor_output, log_std, value = ppo.core.apply(runner.params, batch.observation)
    np.testing.assert_allclose(np.swapaxes(value, 0, 1), values, rtol=1e-5, atol=1e-6)
    log_prob = make_distribution(action_space, actor_output, log_std).log_prob(batch.action)
    np.testing.assert_allclose(np.swapaxes(log_prob, 0, 1), trajectory.log_prob, rtol=1e-5, atol=1e-5)


def test_the_memory_starts_from_zero_exactly_where_an_episode_starts(hrv_rollout):
    ppo, runner, rollout = hrv_rollout
    trajectory = rollout.trajectory
    starts, done = np.asarray(trajectory.memory), np.asarray(trajectory.done)
    assert done.sum() >= 4  # 10-step episodes: every environment resets inside the rollout
    fresh_hidden, fresh_start = ppo.init(jax.random.PRNGKey(0)).policy_state
    assert not np.any(fresh_hidden) and np.all(fresh_start)  # init: every environment starts an episode
    np.testing.assert_array_equal(starts[0], runner.policy_state[1])  # the carried flags
    np.testing.assert_array_equal(starts[1:], done[:-1])  # auto-reset: the step after an end
    np.testing.assert_array_equal(rollout.policy_state[1], done[-1])  # carried into the next rollout
    # a start step's value is that of the zero memory, whatever the memory was before
    for t, e in zip(*np.nonzero(starts)):
        zero = jnp.zeros(ppo.network.torso.width)
        _, readout = one_step(ppo.network, runner.params, zero, trajectory.observation[t, e])
        expected = ppo.network.apply(runner.params, readout, method=RecurrentActorCritic.value)
        np.testing.assert_allclose(trajectory.value[t, e], expected, rtol=1e-5, atol=1e-6)
    # where no episode ended, the previous step's "final" observation is the observation read
    # next with the same memory: the two values of the 2E-row call agree
    continuing = ~done[:-1]
    np.testing.assert_allclose(
        trajectory.previous_final_value[1:][continuing], trajectory.value[1:][continuing], rtol=1e-5, atol=1e-6
    )


def test_minibatches_are_whole_sequences_of_permuted_environments(hrv_rollout):
    ppo = hrv_rollout[0]
    num_envs, num_steps = 4, 24
    ids = jnp.broadcast_to(jnp.arange(num_envs)[None, :], (num_steps, num_envs)).astype(jnp.float32)
    time = jnp.broadcast_to(jnp.arange(num_steps)[:, None], (num_steps, num_envs)).astype(jnp.float32)
    batch = ppo.core.batch(
        Batch(jnp.zeros((num_steps, num_envs, 3)), ids, time, ids, ids),
        jnp.zeros((num_steps, num_envs), bool),
        (jnp.arange(num_envs, dtype=jnp.float32)[:, None] * jnp.ones((1, 6)), None),
    )
    minibatches = ppo.core.minibatches(jax.random.PRNGKey(1), batch)
    assert minibatches.action.shape == (2, 2, num_steps)  # [K, E / K, T]
    envs = np.asarray(minibatches.action[..., 0]).ravel()
    assert sorted(envs) == list(range(num_envs))  # every environment once
    np.testing.assert_array_equal(minibatches.log_prob, np.broadcast_to(np.arange(num_steps), (2, 2, num_steps)))
    np.testing.assert_array_equal(
        minibatches.action, np.broadcast_to(minibatches.action[..., :1], (2, 2, num_steps))
    )  # one environment per row
    # the stored initial memory travels with its environment
    np.testing.assert_array_equal(minibatches.observation.initial_hidden[..., 0], minibatches.action[..., 0])


def test_the_evaluation_policy_carries_its_memory_from_a_zero_state(hrv_rollout):
    ppo, runner, _ = hrv_rollout
    policy = ppo.policy(runner.params)
    assert isinstance(policy, RecurrentPolicy)
    assert policy.initial_state.shape == (6,) and not np.any(policy.initial_state)
    observation, _ = ppo.env.reset(jax.random.PRNGKey(0), ppo.env_params)
    first, state = policy.step(policy.initial_state, observation, 0, jax.random.PRNGKey(0))
    second, _ = policy.step(state, observation, 1, jax.random.PRNGKey(0))
    flat = flatten_observation(observation)
    hidden = jnp.zeros(6)
    for action, t in ((first, 0), (second, 1)):  # each step: the memory, then the actor's mode
        hidden, readout = one_step(ppo.network, runner.params, hidden, flat)
        actor_output, _ = ppo.network.apply(runner.params, readout, method=RecurrentActorCritic.policy)
        distribution = make_distribution(ppo.env.action_space(ppo.env_params), actor_output, None)
        np.testing.assert_array_equal(action, distribution.to_env_action(distribution.mode()))
        if t == 0:
            np.testing.assert_allclose(state, hidden, rtol=1e-6)
    with pytest.raises(TypeError, match="acts with its state"):
        policy(observation, 0, jax.random.PRNGKey(0))


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(policy="lstm"), r"policy='lstm': expected one of \('mlp', 'gru'\)"),
        (dict(policy="gru", num_envs=6, num_steps=4, minibatch_size=6), "must divide num_envs=6"),
        (dict(policy="gru", recurrent_width=0), "recurrent_width=0: expected a positive integer"),
        (dict(policy="gru", recurrent_skip="yes"), "recurrent_skip='yes': expected True or False"),
    ],
)
def test_bad_recurrent_settings_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        PPOConfig(**changes)


@pytest.mark.slow
def test_a_gru_learns_memory_chain_where_an_mlp_stays_at_chance():
    """bsuite's MemoryChain (gymnax): the context is shown at the start, the query at the last
    step; answering needs the memory. Chance is a mean return of 0; a correct answer is +1."""
    task = get_task("gymnax:MemoryChain-bsuite")
    env = task.make_env()
    returns = {}
    for policy in ("mlp", "gru"):
        config = task.default_config.replace(
            total_timesteps=40_960,
            num_envs=16,
            num_steps=32,
            minibatch_size=128,
            policy=policy,
            recurrent_width=32,
            actor_hidden=(32,),
            critic_hidden=(32,),
            learning_rate=1e-3,
        )
        train = make_train(config, env)
        result = train(keys_for_seeds([0, 1]))
        evaluate = jax.jit(
            jax.vmap(
                lambda p: heldout_evaluation(env, env.default_params, train.algorithm.policy(p), 200)["return_mean"]
            )
        )
        returns[policy] = np.asarray(evaluate(result.runner.params))
    assert np.all(returns["gru"] >= 0.9), returns
    assert np.all(np.abs(returns["mlp"]) <= 0.35), returns
