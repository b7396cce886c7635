"""Every episode loop carries the policy's state (``purehr.envs.policies``): a recurrent policy
starts each episode from its ``initial_state`` and steps once per step, so a policy that counts
its steps in its state acts exactly as the same behaviour written with ``t``; a feed-forward
policy runs as it did (the empty state adds nothing), and calling a recurrent one as a
feed-forward one is refused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from purehr.envs import rollout, spaces
from purehr.envs.base import Environment
from purehr.envs.hrv import HRWritingEnv, oracle_action
from purehr.envs.hrv import evaluation as hrv_evaluation
from purehr.envs.hrv import random_policy as hrv_random_policy
from purehr.envs.policies import RecurrentPolicy, as_recurrent
from purehr.envs.swing import SwingEnv, make_structured_policy
from purehr.envs.swing import heldout_evaluation as swing_heldout_evaluation
from purehr.envs.swing.controller import DEFAULT_CONTROLLER, structured_action

KEY = jax.random.PRNGKey(5)


@struct.dataclass
class LengthState:
    t: jax.Array
    length: jax.Array


class RandomLength(Environment):
    """Episodes of 2 to 6 steps (the length drawn at reset), the reward the action itself, so
    an episode's return is the sum of the actions taken in it. Observation [t, length]."""

    name = "random_length"

    @property
    def default_params(self):
        return None

    def reset(self, key, params=None):
        length = jax.random.randint(key, (), 2, 7)
        return jnp.stack([0.0, length]).astype(jnp.float32), LengthState(jnp.int32(0), length)

    def step(self, key, state, action, params=None):
        t = state.t + 1
        done = t >= state.length
        observation = jnp.stack([t, state.length]).astype(jnp.float32)
        return observation, LengthState(t, state.length), jnp.float32(action), done, jnp.bool_(False), {"success": done}

    def observation_space(self, params=None):
        return spaces.Box(0.0, 8.0, (2,))

    def action_space(self, params=None):
        return spaces.Box(-100.0, 100.0, ())

    def max_episode_steps(self, params=None) -> int:
        return 8


STARTS = jnp.asarray([0, 3], jnp.int32)  # the policies below run vmapped over their start


def counter(start: jax.Array) -> RecurrentPolicy:
    """Acts its step count (a pytree state), starting from ``start``."""
    return RecurrentPolicy(
        {"count": start},
        lambda state, observation, t, key: (state["count"].astype(jnp.float32), {"count": state["count"] + 1}),
    )


def by_step(start: jax.Array):
    """``counter(start)`` written with the step index."""
    return lambda observation, t, key: (t + start).astype(jnp.float32)


def same(a, b) -> bool:
    """Bit for bit, leaf by leaf (NaN equal to NaN)."""
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(leaves_a) == len(leaves_b) and all(
        np.array_equal(x, y, equal_nan=True) for x, y in zip(leaves_a, leaves_b)
    )


def generic_run(make_policy):
    """run_episodes on the held-out episodes, heldout_evaluation and record_episode of
    ``make_policy(start)`` for each of ``STARTS`` (a leading axis of 2 on every leaf)."""
    env = RandomLength()

    def run(start):
        policy = make_policy(start)
        return (
            rollout.run_episodes(env, None, policy, rollout.heldout_key(), 6),  # the held-out episodes
            rollout.heldout_evaluation(env, None, policy, num_episodes=6),
            rollout.record_episode(env, None, policy),
        )

    return jax.device_get(jax.jit(jax.vmap(run))(STARTS))


@pytest.fixture(scope="module")
def counted():
    return generic_run(counter)


def test_each_vmapped_episode_counts_its_own_steps_from_the_initial_state(counted):
    episodes, metrics, rows = jax.tree.map(lambda x: x[1], counted)  # start 3
    lengths = episodes["length"]
    assert len(set(lengths.tolist())) > 1, lengths  # episodes of different lengths in one vmap
    # actions 3, 4, ..., 3 + L - 1 in an episode of L steps: each episode restarts at 3
    returns = 3 * lengths + lengths * (lengths - 1) / 2
    np.testing.assert_array_equal(episodes["return"], returns)
    assert metrics["episode_length"] == pytest.approx(lengths.mean())
    assert metrics["return_mean"] == pytest.approx(returns.mean())
    # the recorded episode: the count advances every step of the horizon, the episode is the active prefix
    np.testing.assert_array_equal(rows["action"], 3.0 + np.arange(8))
    assert rows["active"].sum() == lengths[0] and rows["active"][: lengths[0]].all()


def test_generic_loops_run_a_step_counter_as_the_step_index(counted):
    assert same(counted, generic_run(by_step))
    at_zero, at_three = jax.tree.map(lambda x: x[0], counted), jax.tree.map(lambda x: x[1], counted)
    assert not same(at_zero[1], at_three[1])  # the initial state is used


def test_swing_heldout_runs_a_step_counter_as_the_phase_law_step_index():
    env = SwingEnv()
    params = env.default_params
    counted = RecurrentPolicy(
        jnp.int32(0), lambda count, obs, t, key: (structured_action(obs, count, params, DEFAULT_CONTROLLER), count + 1)
    )
    evaluate = lambda policy: jax.device_get(  # noqa: E731
        jax.jit(lambda: swing_heldout_evaluation(env, params, policy, num_episodes=3))()
    )
    recurrent, feed_forward = evaluate(counted), evaluate(make_structured_policy(params))
    assert recurrent["success_rate"] > 0  # the controller's phase law does rotate: a behaviour, compared
    assert same(recurrent, feed_forward)


@pytest.fixture(scope="module")
def hrv_env():
    return HRWritingEnv(8)


def hrv_act(env):
    """Every third step at random (from the policy's key), else the greedy oracle."""
    params = env.default_params
    draw = hrv_random_policy(env, params)
    return lambda obs, step, key: jnp.where(step % 3 == 0, draw(obs, step, key), oracle_action(obs, params))


def hrv_run(env, policy):
    """The checkpoint evaluation (clean and noisy, one vmap) and the showcase of ``policy``."""
    params = env.default_params
    return jax.device_get(
        jax.jit(
            lambda: (
                hrv_evaluation.checkpoint_evaluation(env, params, policy, num_episodes=8),
                hrv_evaluation.record_showcase(env, params, policy),
            )
        )()
    )


@pytest.fixture(scope="module")
def hrv_feed_forward(hrv_env):
    return hrv_run(hrv_env, hrv_act(hrv_env))


def test_hrv_evaluations_run_a_step_counter_as_the_step_index(hrv_env, hrv_feed_forward):
    act = hrv_act(hrv_env)
    counted = RecurrentPolicy(jnp.int32(0), lambda count, obs, t, key: (act(obs, count, key), count + 1))
    assert same(hrv_run(hrv_env, counted), hrv_feed_forward)
    metrics, _ = hrv_feed_forward
    assert metrics["success_rate"] > 0 and metrics["noisy_success_rate"] > 0
    assert 1 < metrics["episode_length"] < hrv_env.default_params.max_episode_length  # episodes end apart


def test_a_feed_forward_policy_is_unchanged_by_carrying_a_state(hrv_env, hrv_feed_forward, counted):
    wrapped = as_recurrent(hrv_act(hrv_env))
    assert jax.tree.leaves(wrapped.initial_state) == [] and as_recurrent(wrapped) is wrapped
    assert same(hrv_run(hrv_env, wrapped), hrv_feed_forward)  # the same program: loaded from the compile cache
    assert same(generic_run(by_step), generic_run(lambda start: as_recurrent(by_step(start))))

    # a state carried but unused (one more int per episode) leaves every value as it was
    def carried(start):
        policy = by_step(start)
        return RecurrentPolicy(jnp.float32(0.0), lambda s, obs, t, key: (policy(obs, t, key), s + obs[0]))

    assert same(generic_run(carried), counted)


def test_a_recurrent_policy_called_as_a_feed_forward_one_is_refused():
    with pytest.raises(TypeError, match="policy.step"):
        counter(jnp.int32(0))(jnp.zeros(2), jnp.int32(0), KEY)
