"""PPO building blocks against independent references."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.ppo.config import PPOConfig
from purehr.engine.distributions import MultiCategorical, TanhGaussian, make_distribution
from purehr.engine.gae import generalized_advantages
from purehr.engine.seeds import raw_seed_keys
from purehr.envs import spaces


def reference_gae(rewards, values, final_values, terminated, truncated, gamma, lam):
    """Textbook loop, one environment: bootstrap V(final obs) on truncation, 0 on termination."""
    T = len(rewards)
    advantages = np.zeros(T)
    next_advantage = 0.0
    for t in reversed(range(T)):
        done = terminated[t] or truncated[t]
        if terminated[t]:
            next_value = 0.0
        elif truncated[t]:
            next_value = final_values[t]  # value of the observation the episode ended on
        else:
            next_value = final_values[t]  # the next observation of the same episode
        delta = rewards[t] + gamma * next_value - values[t]
        next_advantage = delta + gamma * lam * (0.0 if done else 1.0) * next_advantage
        advantages[t] = next_advantage
    return advantages


def test_gae_matches_python_loop_with_truncation_and_termination():
    rng = np.random.default_rng(0)
    T, N = 12, 3
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    next_values = rng.normal(size=(T, N))
    terminated = np.zeros((T, N), bool)
    truncated = np.zeros((T, N), bool)
    terminated[4, 0] = True  # env 0: a terminal success mid-rollout
    truncated[7, 1] = True  # env 1: a time-limit truncation
    terminated[2, 2] = True  # env 2: both kinds in one column
    truncated[9, 2] = True
    gamma, lam = 0.97, 0.9
    advantages, targets = generalized_advantages(
        jnp.asarray(rewards, jnp.float32),
        jnp.asarray(values, jnp.float32),
        jnp.asarray(next_values, jnp.float32),
        jnp.asarray(terminated),
        jnp.asarray(terminated | truncated),
        gamma,
        lam,
    )
    for env in range(N):
        expected = reference_gae(
            rewards[:, env], values[:, env], next_values[:, env], terminated[:, env], truncated[:, env], gamma, lam
        )
        np.testing.assert_allclose(np.asarray(advantages[:, env]), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(targets), np.asarray(advantages) + values, rtol=1e-5, atol=1e-5)
    # the truncated step bootstraps: its delta uses next_values, unlike the terminated one
    assert abs(float(advantages[7, 1]) - (rewards[7, 1] + gamma * next_values[7, 1] - values[7, 1])) < 1e-5
    assert abs(float(advantages[4, 0]) - (rewards[4, 0] - values[4, 0])) < 1e-5


def test_tanh_gaussian_log_density_matches_numerical_change_of_variables():
    mean = jnp.array([0.3, -1.2])
    log_std = jnp.array([-0.5, 0.4])
    dist = TanhGaussian(mean, log_std, jnp.array([-1.0, -1.0]), jnp.array([1.0, 1.0]))
    latents = np.array([[0.1, -0.7], [2.5, 1.9], [-3.0, 0.0], [6.0, -5.5]])
    h = 1e-4
    for u in latents:
        action = np.tanh(u)
        jacobian = (np.tanh(u + h) - np.tanh(u - h)) / (2 * h)  # d action / d latent, numerically
        std = np.exp(np.asarray(log_std))
        gaussian = -0.5 * ((u - np.asarray(mean)) / std) ** 2 - np.log(std) - 0.5 * math.log(2 * math.pi)
        expected = np.sum(gaussian - np.log(jacobian))
        assert np.allclose(action, dist.to_env_action(jnp.asarray(u, jnp.float32)), atol=1e-6)
        assert abs(float(dist.log_prob(jnp.asarray(u, jnp.float32))) - expected) < 2e-3 * max(1, abs(expected))


def test_tanh_log_density_stays_finite_where_tanh_saturates():
    dist = TanhGaussian(jnp.zeros(1), jnp.zeros(1), -jnp.ones(1), jnp.ones(1))
    latent = jnp.array([12.0])  # tanh(12) == 1.0 in float32: atanh would be inf
    assert float(jnp.tanh(latent)[0]) == 1.0
    expected = -0.5 * 144 - 0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - 12 - math.log1p(math.exp(-24)))
    assert abs(float(dist.log_prob(latent)) - expected) < 1e-3


def test_tanh_gaussian_rescales_to_the_box():
    box = spaces.Box(low=-2.0, high=2.0, shape=(1,))
    dist = make_distribution(box, jnp.zeros(1), jnp.zeros(1))
    assert np.allclose(dist.to_env_action(jnp.array([50.0])), [2.0])
    assert np.allclose(dist.to_env_action(jnp.array([0.0])), [0.0])


def test_multidiscrete_log_prob_and_entropy_by_hand():
    logits = jnp.array([0.0, math.log(2.0), 0.0, 1.0, 0.0])  # components of sizes 3 and 2
    dist = MultiCategorical(logits, (3, 2))
    p2 = math.e / (math.e + 1)
    expected_log_prob = math.log(0.5) + math.log(p2)
    assert abs(float(dist.log_prob(jnp.array([1, 0]))) - expected_log_prob) < 1e-6
    expected_entropy = 1.5 * math.log(2.0) - (p2 * math.log(p2) + (1 - p2) * math.log(1 - p2))
    assert abs(float(dist.entropy()) - expected_entropy) < 1e-6
    assert dist.mode().tolist() == [1, 0]
    samples = jax.vmap(dist.sample)(jax.random.split(jax.random.PRNGKey(0), 4000))
    assert abs(float(jnp.mean(samples[:, 0] == 1)) - 0.5) < 0.03
    assert abs(float(jnp.mean(samples[:, 1] == 0)) - p2) < 0.03


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(minibatch_size=300), "minibatch_size=300"),
        (dict(total_timesteps=0), "total_timesteps=0"),
        (dict(num_envs=-1), "num_envs=-1"),
        (dict(actor_hidden=()), "actor_hidden"),
        (dict(activation="gelu"), "activation='gelu'"),
        (dict(gamma=1.5), "gamma=1.5"),
    ],
)
def test_bad_config_names_the_value(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PPOConfig(**changes)


def test_unknown_config_field_is_refused():
    with pytest.raises(ValueError, match="not_a_field"):
        PPOConfig().replace(not_a_field=1)


def test_num_updates_reaches_the_budget():
    config = PPOConfig(total_timesteps=1_000_000)
    assert config.num_updates == 489 and config.num_updates * config.batch_size >= 1_000_000


@pytest.mark.parametrize(
    "keys", [jnp.zeros((3,), jnp.uint32), jnp.zeros((3, 2), jnp.float32), jnp.zeros((2, 3), jnp.uint32)]
)
def test_wrong_key_shape_is_refused(keys):
    with pytest.raises(ValueError, match="expected a leading seed axis"):
        raw_seed_keys(keys)


def test_typed_keys_are_accepted():
    raw = raw_seed_keys(jax.random.split(jax.random.key(0), 3))
    assert raw.shape == (3, 2) and raw.dtype == jnp.uint32
