"""The rollout draws its randomness before the step scan: the draws are the ones distrax would
make, resets given beforehand behave as the wrapper's own, every environment and step gets a
reset of its own, and truncated episodes bootstrap from V(their final observation)."""

import distrax
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purehr.algorithms.ppo.algorithm import make_ppo
from purehr.algorithms.ppo.config import PPOConfig
from purehr.engine.bootstrap import values_where
from purehr.engine.distributions import Categorical, MultiCategorical, TanhGaussian, sampling_noise
from purehr.engine.networks import ActorCritic
from purehr.envs import spaces
from purehr.envs.base import Environment
from purehr.envs.wrappers import AutoResetWrapper

KEY = jax.random.PRNGKey(11)


def test_sampling_draws_what_distrax_draws_from_the_same_key():
    logits = jax.random.normal(jax.random.PRNGKey(1), (6, 5))
    assert np.array_equal(Categorical(logits).sample(KEY), distrax.Categorical(logits=logits).sample(seed=KEY))

    mean, log_std = jax.random.normal(jax.random.PRNGKey(2), (6, 2)), jnp.full((6, 2), -0.4)
    ours = TanhGaussian(mean, log_std, -jnp.ones(2), jnp.ones(2)).sample(KEY)
    theirs = distrax.MultivariateNormalDiag(mean, jnp.exp(log_std)).sample(seed=KEY)
    assert np.array_equal(ours, theirs)

    multi = MultiCategorical(jax.random.normal(jax.random.PRNGKey(3), (6, 9)), (4, 2, 3))
    assert np.array_equal(multi.sample(KEY), jax.random.categorical(KEY, multi._padded().logits, axis=-1))


def test_noise_drawn_for_a_whole_rollout_has_each_steps_shape():
    space = spaces.MultiDiscrete(np.array([4, 2, 3]))
    noise = sampling_noise(space, KEY, (7, 6))  # [steps, envs, components, widest]
    assert noise.shape == (7, 6, 3, 4)
    step = MultiCategorical(jnp.zeros((6, 9)), (4, 2, 3))
    assert noise[0].shape == step.noise(KEY).shape
    actions = step.sample_from_noise(noise[0])
    assert actions.shape == (6, 3) and np.all(np.asarray(actions) < np.array([4, 2, 3]))
    box = sampling_noise(spaces.Box(-1.0, 1.0, (2,)), KEY, (7, 6))
    assert box.shape == (7, 6, 2) and abs(float(box.std()) - 1.0) < 0.3  # standard normal


@struct.dataclass
class CountdownState:
    t: jax.Array
    tag: jax.Array


class Countdown(Environment):
    """Observation [t / length, tag]: every episode is truncated after ``length`` steps, and
    ``tag`` is drawn at reset, so each episode's start shows which reset it came from."""

    name = "countdown"

    def __init__(self, length: int):
        self.length = length

    @property
    def default_params(self):
        return None

    def reset(self, key, params=None):
        tag = jax.random.uniform(key)
        return jnp.stack([jnp.float32(0.0), tag]), CountdownState(jnp.int32(0), tag)

    def step(self, key, state, action, params=None):
        t = state.t + 1
        observation = jnp.stack([t / self.length, state.tag]).astype(jnp.float32)
        return (
            observation,
            CountdownState(t, state.tag),
            jnp.float32(1.0),
            jnp.bool_(False),
            t >= self.length,
            {"success": jnp.bool_(False)},
        )

    def observation_space(self, params=None):
        return spaces.Box(0.0, 1.0, (2,))

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def max_episode_steps(self, params=None) -> int:
        return self.length


def test_a_reset_given_beforehand_is_the_wrappers_own_reset():
    env = AutoResetWrapper(Countdown(length=1))  # every step ends an episode
    _, state = env.reset(KEY)
    step_key, reset_key = jax.random.split(KEY)
    own = env.step(KEY, state, jnp.int32(0))
    given = env.step_with_reset(step_key, state, jnp.int32(0), Countdown(1).reset(reset_key))
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), own, given))
    assert float(own[0][1]) == float(jax.random.uniform(reset_key))  # continued from that reset


LENGTH, ENVS, STEPS = 3, 4, 10
CONFIG = PPOConfig(
    total_timesteps=ENVS * STEPS,
    num_envs=ENVS,
    num_steps=STEPS,
    minibatch_size=ENVS * STEPS,
    num_epochs=1,
    actor_hidden=(8,),
    critic_hidden=(8,),
)


def test_rollout_bootstraps_truncations_from_the_final_observation():
    ppo = make_ppo(CONFIG, Countdown(LENGTH))
    runner = ppo.init(KEY)
    rollout = jax.jit(ppo.rollout)(runner)
    trajectory, next_values = rollout.trajectory, np.asarray(rollout.next_values)
    observation = np.asarray(trajectory.observation)  # [T, E, 2]
    done = np.asarray(trajectory.done)
    assert done.any() and not np.asarray(trajectory.terminated).any()

    def value(obs):
        return np.asarray(ppo.network.apply(runner.params, jnp.asarray(obs, jnp.float32), method=ActorCritic.value))

    for t, e in zip(*np.nonzero(done)):  # final observation: [1, this episode's tag], not the reset's
        final = np.array([1.0, observation[t, e, 1]], np.float32)
        np.testing.assert_allclose(next_values[t, e], value(final[None])[0], rtol=1e-5, atol=1e-6)
    for t, e in zip(*np.nonzero(~done[:-1])):  # inside an episode: V of the next step's observation
        np.testing.assert_allclose(next_values[t, e], value(observation[t + 1, e][None])[0], rtol=1e-5, atol=1e-6)
    last = np.asarray(rollout.observation)
    for e in np.nonzero(~done[-1])[0]:
        np.testing.assert_allclose(next_values[-1, e], value(last[e][None])[0], rtol=1e-5, atol=1e-6)

    # every episode start after a reset carries a tag of its own: one reset per step and env
    starts = observation[1:][done[:-1]][:, 1]
    assert len(starts) >= ENVS and len(np.unique(starts)) == len(starts)
    assert not np.isin(starts, observation[0, :, 1]).any()


def test_values_where_values_only_the_selected_rows_in_chunks_under_a_vmap():
    """Members of one vmapped batch select none, fewer than a chunk, exactly two chunks and
    more (a loop of several passes): each gets value(row) at its selected rows and 0 elsewhere,
    and nothing of an unselected row (NaN here) reaches the result."""
    size, chunk = 12, 4
    rows = jax.random.normal(KEY, (4, size, 3))
    selected_counts = (0, 3, 8, 11)
    where = np.zeros((4, size), bool)
    for member, count in enumerate(selected_counts):
        where[member, np.random.default_rng(member).choice(size, count, replace=False)] = True
    rows = jnp.where(jnp.asarray(where)[..., None], rows, jnp.nan)

    def value(batch):
        assert batch.shape == (chunk, 3)  # one chunk at a time
        return jnp.sum(batch**2, axis=-1) + 1.0

    got = np.asarray(jax.jit(jax.vmap(lambda w, r: values_where(value, w, r, chunk)))(jnp.asarray(where), rows))
    expected = np.where(where, np.nansum(np.asarray(rows) ** 2, axis=-1) + 1.0, 0.0)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert np.isfinite(got).all()
