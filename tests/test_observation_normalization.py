"""Options added to match rejax's Pendulum setting: observation normalisation
(``PPOConfig.normalize_observations``), the swish activation, element-wise gradient clipping."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.ppo.config import PPOConfig
from purehr.algorithms.trainer import make_train
from purehr.engine.networks import (
    MLP,
    OBSERVATION_STATISTICS,
    POLICY_GAIN,
    VALUE_GAIN,
    ActorCritic,
    update_observation_statistics,
)
from purehr.engine.seeds import keys_for_seeds
from purehr.envs import spaces
from purehr.envs.base import Environment

EPISODE = 5


class Counter(Environment):
    """Observations known in advance: (t, (t - 1.5)^2 + 10) at step t of a 5-step episode, so
    every observation a rollout sees can be listed without running the environment."""

    name = "counter"

    @property
    def default_params(self):
        return None

    @staticmethod
    def _observation(t):
        t = t.astype(jnp.float32)
        return jnp.stack([t, (t - 1.5) ** 2 + 10.0])

    def reset(self, key, params=None):
        t = jnp.int32(0)
        return self._observation(t), t

    def step(self, key, state, action, params=None):
        t = state + 1
        return (
            self._observation(t),
            t,
            action.astype(jnp.float32),
            jnp.bool_(False),
            t >= EPISODE,
            {"success": jnp.bool_(False)},
        )

    def observation_space(self, params=None):
        return spaces.Box(-jnp.inf, jnp.inf, (2,))

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def max_episode_steps(self, params=None):
        return EPISODE


# 7 steps per update, not a multiple of the episode: each update's batch has its own mean,
# so a wrong combination of batches (or a shifted observation) shows
CONFIG = PPOConfig(
    total_timesteps=3 * 3 * 7,
    num_envs=3,
    num_steps=7,
    minibatch_size=7,
    num_epochs=2,
    actor_hidden=(8,),
    critic_hidden=(8,),
    normalize_observations=True,
)


@pytest.fixture(scope="module")
def trained():
    train = make_train(CONFIG, Counter())
    return train, train(keys_for_seeds([0, 1]))


def test_running_statistics_equal_numpy_over_every_observation_trained_on(trained):
    _, result = trained
    seen = np.arange(CONFIG.num_updates * CONFIG.num_steps) % EPISODE  # each env, in order
    observations = np.stack([seen, (seen - 1.5) ** 2 + 10.0], -1).astype(np.float64)
    statistics = result.runner.params[OBSERVATION_STATISTICS]["normalizer"]
    for seed in range(2):
        assert float(statistics["count"][seed]) == CONFIG.num_updates * CONFIG.batch_size
        np.testing.assert_allclose(statistics["mean"][seed], observations.mean(0), rtol=1e-6)
        np.testing.assert_allclose(statistics["var"][seed], observations.var(0), rtol=1e-5)


def _mlp_actor_critic(width: int, **options) -> ActorCritic:
    """The shipped MLP actor-critic (one hidden layer of ``width``, tanh) of 2 discrete outputs."""
    actor, critic = MLP((width,), "tanh", 2, POLICY_GAIN), MLP((width,), "tanh", 1, VALUE_GAIN)
    return ActorCritic(actor, critic, 2, False, **options)


def test_batched_updates_equal_one_pass_over_all_batches():
    rng = np.random.default_rng(0)
    batches = [
        rng.normal(loc, scale, (n, 3)).astype(np.float32)
        for loc, scale, n in [(5.0, 2.0, 40), (-3.0, 0.5, 7), (100.0, 10.0, 300)]
    ]
    variables = _mlp_actor_critic(4, normalize_observations=True).init(jax.random.PRNGKey(0), jnp.zeros(3))
    for batch in batches:
        variables = update_observation_statistics(variables, jnp.asarray(batch))
    everything = np.concatenate(batches).astype(np.float64)
    statistics = variables[OBSERVATION_STATISTICS]["normalizer"]
    np.testing.assert_allclose(statistics["mean"], everything.mean(0), rtol=1e-5)
    np.testing.assert_allclose(statistics["var"], everything.var(0), rtol=1e-4)


def test_the_saved_policy_normalises_with_the_trained_statistics(trained):
    train, result = trained
    params = jax.tree.map(lambda x: x[0], result.runner.params)
    statistics = params[OBSERVATION_STATISTICS]["normalizer"]
    assert np.all(np.abs(np.asarray(statistics["mean"])) > 1.0)  # far from the identity
    plain = _mlp_actor_critic(8)
    observations = jnp.asarray([[0.0, 12.25], [4.0, 16.25], [2.0, 10.25]])
    scaled = (observations - statistics["mean"]) / jnp.sqrt(statistics["var"] + 1e-8)
    logits, _, value = train.algorithm.network.apply(params, observations)
    plain_logits, _, plain_value = plain.apply({"params": params["params"]}, scaled)
    np.testing.assert_allclose(logits, plain_logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, plain_value, rtol=1e-5, atol=1e-6)
    policy = train.algorithm.policy(params)
    assert [int(policy(o, 0, jax.random.PRNGKey(0))) for o in observations] == list(np.argmax(plain_logits, -1))


def test_without_normalisation_the_variables_are_the_network_parameters_only():
    train = make_train(CONFIG.replace(normalize_observations=False), Counter())
    params = jax.eval_shape(train.algorithm.init, jax.random.PRNGKey(0)).params
    assert set(params) == {"params"}
    assert update_observation_statistics(params, jnp.ones((4, 2))) is params


def test_swish_is_x_times_sigmoid_x():
    mlp = MLP((5,), "swish", 1, 1.0)
    x = jnp.linspace(-3.0, 3.0, 4)
    variables = mlp.init(jax.random.PRNGKey(1), x)
    hidden, out = variables["params"]["Dense_0"], variables["params"]["Dense_1"]
    h = x @ hidden["kernel"] + hidden["bias"]
    expected = (h * nn.sigmoid(h)) @ out["kernel"] + out["bias"]
    np.testing.assert_allclose(mlp.apply(variables, x), expected, rtol=1e-6)
    PPOConfig(activation="swish")  # accepted by the config


def test_elementwise_gradient_clip_is_wired_to_the_optimizer():
    """Unclipped, both modes are the same optimiser bit for bit; at a bound that binds they differ.
    One program per mode: ``max_grad_norm`` is a hyperparameter, data in the state (``hparams``),
    so the loose and the tight bound run the same compiled call."""
    trainers = {
        mode: make_train(CONFIG.replace(normalize_observations=False, elementwise_grad_clip=mode), Counter())
        for mode in (False, True)
    }

    def final_params(max_grad_norm, elementwise_grad_clip=False):
        trainer = trainers[elementwise_grad_clip]
        hparams = jax.tree.map(lambda x: x[None], trainer.config.replace(max_grad_norm=max_grad_norm).hyperparams())
        return jax.tree.leaves(trainer.jitted(keys_for_seeds([0]), hparams).runner.params)

    loose_global, loose_element = (
        final_params(max_grad_norm=1e9),
        final_params(max_grad_norm=1e9, elementwise_grad_clip=True),
    )
    assert all(np.array_equal(a, b) for a, b in zip(loose_global, loose_element))
    tight_global, tight_element = (
        final_params(max_grad_norm=1e-3),
        final_params(max_grad_norm=1e-3, elementwise_grad_clip=True),
    )
    assert not all(np.array_equal(a, b) for a, b in zip(tight_global, tight_element))
