"""Held-out evaluation of any swing policy, on the device, in one vmapped scan.

The 100 starts are NumPy constants drawn at trace time from
``numpy.random.default_rng(20260901)`` (first all angles, theta ~ U(-5, 5) degrees, then all
rates, theta' ~ U(-0.1, 0.1) rad/s), so the whole evaluation is a pure function of the
policy and the environment params: the trainer calls it inside its training scan with the
PPO parameters as traced values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs.base import freeze_after_done
from purehr.envs.policies import RecurrentPolicy, as_recurrent, batched_from_the_start
from purehr.envs.swing.env import ACTION_SIZE, SwingEnv
from purehr.envs.swing.physics import SwingParams
from purehr.types import Policy

HELDOUT_SEED = 20260901
START_ANGLE_DEG = 5.0
START_RATE = 0.1


def heldout_starts(num_episodes: int = 100, seed: int = HELDOUT_SEED):
    """(theta, theta_dot) of the fixed held-out starts, NumPy float64 arrays."""
    rng = np.random.default_rng(seed)
    theta = np.deg2rad(rng.uniform(-START_ANGLE_DEG, START_ANGLE_DEG, num_episodes))
    theta_dot = rng.uniform(-START_RATE, START_RATE, num_episodes)
    return theta, theta_dot


def zero_policy(obs: jax.Array, t: jax.Array, key: jax.Array) -> jax.Array:
    """Hold the neutral pose: the swing can only lose energy."""
    return jnp.zeros(ACTION_SIZE, obs.dtype)


def random_policy(obs: jax.Array, t: jax.Array, key: jax.Array) -> jax.Array:
    """Uniform targets in [-1, 1]^2, a fresh draw every step."""
    return jax.random.uniform(key, (ACTION_SIZE,), obs.dtype, -1.0, 1.0)


def _swing_env(env) -> SwingEnv:
    base = getattr(env, "unwrapped", env)
    if not hasattr(base, "reset_to"):
        raise TypeError(f"{env!r} has no reset_to(theta, theta_dot, params); pass a SwingEnv")
    return base


def rollout(
    env: SwingEnv, env_params: SwingParams, policy: Policy | RecurrentPolicy, theta0, theta_dot0, key: jax.Array
) -> dict[str, jax.Array]:
    """One episode over the full horizon, one row per control step (post-step values).

    After the episode ends (success) the state is frozen; ``active`` marks the rows that
    belong to the episode (a prefix, the terminal step included). The policy starts from its
    ``initial_state`` (``as_recurrent``) and its state advances every step, like ``t``.
    """
    env = _swing_env(env)
    policy = as_recurrent(policy)
    obs, state = env.reset_to(theta0, theta_dot0, env_params)

    def body(carry, t):
        obs, state, memory, done = carry
        action, memory = policy.step(memory, obs, t, jax.random.fold_in(key, t))
        next_obs, next_state, reward, terminated, truncated, info = env.step(key, state, action, env_params)
        finished = done | terminated | truncated
        row = dict(
            info,
            reward=reward,
            active=~done,
            theta_dot=next_state.plant.theta_dot,
            command=next_state.plant.command,
            action=jnp.asarray(action),
        )
        frozen = freeze_after_done(done, obs, next_obs), freeze_after_done(done, state, next_state)
        return (*frozen, memory, finished), row

    steps = jnp.arange(env.max_episode_steps(env_params), dtype=jnp.int32)
    start = batched_from_the_start((obs, state, policy.initial_state, jnp.zeros((), bool)), policy, obs)
    _, rows = jax.lax.scan(body, start, steps)
    return rows


def heldout_evaluation(
    env: SwingEnv,
    env_params: SwingParams | None,
    policy: Policy | RecurrentPolicy,
    num_episodes: int = 100,
    seed: int = HELDOUT_SEED,
) -> dict[str, jax.Array]:
    """Metrics of ``policy`` on the fixed starts (pure, jittable; see ``docs/interfaces.md``).

    ``return_std`` is the population standard deviation over episodes; ``effort`` is the
    mean over episodes of sum(command_speed * dt); ``negative_tension_rate`` pools all
    episode steps; ``peak_energy`` is the mean over episodes of the highest ``energy_norm``
    reached (0 hanging still, 1 at the top), a learning signal before any rotation. An
    episode stops accumulating after its successful step.
    """
    env = _swing_env(env)
    env_params = env.default_params if env_params is None else env_params
    theta0, theta_dot0 = heldout_starts(num_episodes, seed)
    dtype = jnp.result_type(float)
    episode_keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.PRNGKey(seed), i))(jnp.arange(num_episodes))
    rows = jax.vmap(lambda th, thd, k: rollout(env, env_params, policy, th, thd, k))(
        jnp.asarray(theta0, dtype), jnp.asarray(theta_dot0, dtype), episode_keys
    )

    active = rows["active"]
    success_steps = rows["success"] & active
    succeeded = jnp.any(success_steps, axis=1)
    returns = jnp.sum(jnp.where(active, rows["reward"], 0.0), axis=1)
    rotation_time = jnp.sum(jnp.where(success_steps, rows["time"], 0.0), axis=1)
    successes = jnp.sum(succeeded)
    min_tension = jnp.min(jnp.where(active, rows["tension"], jnp.inf), axis=1)
    effort = jnp.sum(jnp.where(active, rows["command_speed"], 0.0), axis=1) * env_params.dt
    negative = jnp.sum(active & (rows["tension"] < 0)) / jnp.sum(active)
    peak_energy = jnp.max(jnp.where(active, rows["energy_norm"], -jnp.inf), axis=1)
    return {
        "success_rate": jnp.mean(succeeded.astype(dtype)),
        "return_mean": jnp.mean(returns),
        "return_std": jnp.std(returns),
        "time_to_rotation": jnp.where(successes > 0, jnp.sum(rotation_time) / jnp.maximum(successes, 1), jnp.nan),
        "effort": jnp.mean(effort),
        "min_tension_mean": jnp.mean(min_tension),
        "min_tension_worst": jnp.min(min_tension),
        "negative_tension_rate": negative.astype(dtype),
        "peak_energy": jnp.mean(peak_energy),
    }
