"""SAC's correlated exploration noise (``purehr.algorithms.sac.exploration``) and n-step targets
(``purehr.algorithms.sac.n_step``): the AR(1) process's stationary variance and lag-k
autocorrelation, white noise bit for bit at b = 0, a checkpointed and resumed run with the
noise on bit-identical to an uninterrupted one, and the n-step sum against a hand-computed one
with episode ends inside the window."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.sac.algorithm import make_sac
from purehr.algorithms.sac.config import SACConfig
from purehr.algorithms.sac.exploration import ar1_sequence, initial_noise
from purehr.algorithms.sac.loss import Transition
from purehr.algorithms.sac.n_step import n_step_transitions, window_rows
from purehr.engine.seeds import keys_for_seeds
from purehr.run.store.checkpoints import SeedCheckpoints, stored_form
from purehr.tasks import get_task


@pytest.mark.parametrize("b", [0.9, 0.5])
def test_ar1_noise_is_stationary_standard_normal_with_lag_k_correlation_b_to_the_k(b):
    """8,192 independent processes x 40 steps: at every step the variance is 1 and the mean 0
    (sampling sd 0.016 and 0.011), the correlation of steps k apart b^k (sd <= 0.011)."""
    envs, steps = 8192, 40
    key_start, key_steps = jax.random.split(jax.random.key(7))
    start = initial_noise(key_start, envs, 1)
    _, noise = ar1_sequence(start, jax.random.normal(key_steps, (steps, envs, 1)), b)
    noise = np.asarray(noise[..., 0], np.float64)  # [T, E]
    np.testing.assert_allclose(noise.var(axis=1)[[0, steps // 2, -1]], 1.0, atol=0.07)
    np.testing.assert_allclose(noise.mean(axis=1)[[0, -1]], 0.0, atol=0.05)
    for lag in (1, 3, 10):
        correlation = np.mean(noise[:-lag] * noise[lag:]) / np.mean(noise**2)
        assert abs(correlation - b**lag) < 0.03, (lag, correlation, b**lag)


def test_ar1_at_b_zero_is_the_fresh_normals_bit_for_bit():
    start = jax.random.normal(jax.random.key(1), (16, 2))
    fresh = jax.random.normal(jax.random.key(2), (8, 16, 2))
    last, noise = ar1_sequence(start, fresh, 0.0)
    np.testing.assert_array_equal(np.asarray(noise), np.asarray(fresh))
    np.testing.assert_array_equal(np.asarray(last), np.asarray(fresh[-1]))


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (dict(action_noise_correlation=1.0), "action_noise_correlation=1.0"),
        (dict(action_noise_correlation=-0.1), "action_noise_correlation=-0.1"),
        (dict(n_step=0), "n_step=0"),
        (dict(n_step=2.5), "n_step=2.5"),
        (dict(n_step=100, num_envs=16, buffer_size=1000), "n_step=100"),
    ],
)
def test_bad_noise_or_n_step_is_refused_by_name(fields, named):
    with pytest.raises(ValueError, match=named):
        SACConfig(**fields)


def _window(rewards, links, terminated):
    """Windows [S, n] of 1-d observations: row k+1 starts where row k ended exactly where
    ``links[s][k]``; rewards and terminations as given; next observations 100 + k."""
    rewards = np.asarray(rewards, np.float32)
    samples, n = rewards.shape
    next_observation = np.tile(100.0 + np.arange(n, dtype=np.float32), (samples, 1))
    observation = np.zeros((samples, n), np.float32)
    observation[:, 1:] = np.where(links, next_observation[:, :-1], -1.0)  # -1: a reset observation
    return Transition(
        jnp.asarray(observation[..., None]),
        jnp.zeros((samples, n, 1)),
        jnp.asarray(rewards),
        jnp.asarray(terminated),
        jnp.asarray(next_observation[..., None]),
    )


def test_n_step_target_sums_rewards_up_to_the_first_episode_end():
    g = 0.9
    window = _window(
        rewards=[[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]],
        links=[[True, True, True], [True, False, True], [True, True, True]],
        terminated=[[False] * 4, [False] * 4, [False, True, False, False]],
    )
    batch, discount = n_step_transitions(window, jnp.float32(g))
    # no end: all four rewards, bootstrap from the 4th next observation after gamma^4;
    # a truncation after the 2nd (the 3rd row starts from a reset): two rewards, gamma^2, from
    # the 2nd's final observation; a termination at the 2nd: two rewards, no bootstrap.
    np.testing.assert_allclose(batch.reward, [1 + 2 * g + 3 * g**2 + 4 * g**3, 1 + 2 * g, 1 + 2 * g], rtol=1e-6)
    np.testing.assert_allclose(discount, [g**4, g**2, g**2], rtol=1e-6)
    np.testing.assert_array_equal(batch.next_observation[:, 0], [103.0, 101.0, 101.0])
    np.testing.assert_array_equal(batch.terminated, [False, False, True])
    np.testing.assert_array_equal(window_rows(jnp.array([9, 3]), 3, 4, 10), [[9, 3, 7], [3, 7, 1]])


SMALL = SACConfig(
    total_timesteps=512,
    num_envs=4,
    num_steps=8,
    gradient_steps=2,
    sample_size=16,
    buffer_size=256,  # wraps after 8 updates
    learning_starts=64,
    actor_hidden=(16,),
    critic_hidden=(16,),
    action_noise_correlation=0.95,
    n_step=3,
)


def test_resume_with_correlated_noise_and_n_step_is_bit_identical(tmp_path):
    """Six updates straight, against three, an Orbax checkpoint (the protocol's store), a
    restore into a fresh state and three more: every leaf equal; the noise is in the stored
    form with the option on and absent from a default (white) state's, as before the option."""
    env = get_task("swing").make_env()
    sac = make_sac(SMALL, env)
    init = jax.jit(jax.vmap(sac.init))
    update = jax.jit(jax.vmap(sac.update))
    state = init(keys_for_seeds([0, 1]))
    assert "exploration_noise" not in stored_form(jax.eval_shape(make_sac(SACConfig(), env).init, jax.random.key(0)))
    start_noise = np.asarray(state.exploration_noise)
    for _ in range(3):
        state, _ = update(state)
    store = SeedCheckpoints(tmp_path / "checkpoints", asynchronous=False)
    digest = store.save(3, state)
    assert "exploration_noise" in stored_form(state)
    straight = state
    for _ in range(3):
        straight, _ = update(straight)
    resumed = store.restore(3, init(keys_for_seeds([5, 6])), digest)
    for _ in range(3):
        resumed, _ = update(resumed)
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(resumed), jax.device_get(straight))
    assert not np.array_equal(np.asarray(straight.exploration_noise), start_noise)
