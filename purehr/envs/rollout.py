"""Run whole episodes of a policy, vmapped over episodes: the generic evaluator for
environments without a held-out protocol of their own (gymnax suites)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from purehr.envs.base import Environment
from purehr.types import Policy


def run_episodes(
    env: Environment, env_params, policy: Policy, key: jax.Array, num_episodes: int, num_steps: int | None = None
) -> dict[str, jax.Array]:
    """Per-episode return, length and success of ``policy(obs, t, key)`` over the first
    episode from each of ``num_episodes`` resets (later steps are masked out)."""
    num_steps = env.max_episode_steps(env_params) if num_steps is None else num_steps

    def one_episode(episode_key):
        reset_key, run_key = jax.random.split(episode_key)
        observation, state = env.reset(reset_key, env_params)

        def step(carry, t):
            observation, state, key, running, total, length, success = carry
            key, action_key, step_key = jax.random.split(key, 3)
            action = policy(observation, t, action_key)
            observation, state, reward, terminated, truncated, info = env.step(step_key, state, action, env_params)
            total = total + jnp.where(running, reward, 0.0)
            length = length + running.astype(jnp.int32)
            success = jnp.logical_or(success, jnp.logical_and(running, info["success"]))
            running = jnp.logical_and(running, jnp.logical_not(jnp.logical_or(terminated, truncated)))
            return (observation, state, key, running, total, length, success), None

        start = (observation, state, run_key, jnp.bool_(True), jnp.float32(0.0), jnp.int32(0), jnp.bool_(False))
        (_, _, _, _, total, length, success), _ = jax.lax.scan(step, start, jnp.arange(num_steps))
        return {"return": total, "length": length, "success": success}

    return jax.vmap(one_episode)(jax.random.split(key, num_episodes))
