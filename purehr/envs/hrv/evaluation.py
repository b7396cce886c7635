"""Held-out evaluation of any HRV policy, on the device, in one vmapped scan; the protocol's
checkpoint evaluation (plus the noisy-observation probe) and the showcase episode."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from purehr.envs.base import freeze_after_done
from purehr.envs.hrv.env import HRVParams, HRWritingEnv
from purehr.envs.policies import RecurrentPolicy, as_recurrent, batched_from_the_start
from purehr.types import Policy

HRV_EVAL_SEED = 20260902
"""Seed of the 100 held-out evaluation episodes (targets, starts, audiences, noise). Fixed
so every checkpoint, seed and baseline is judged on the same episodes; it differs from any
training seed the protocol uses (0..4)."""
HRV_OBSERVATION_NOISE_STD = 0.02
"""Std of the Gaussian noise added to the observed ``current_hrv`` for the robustness probe
(``noisy_success_rate``): the size of the final curriculum stage's precision, about half a
step. The greedy oracle keeps 100% success at precision 0.05 and 99% at 0.02 under it
(episodes get longer: 6.2 -> 7.3 and 7.4 -> 29.7 steps)."""
HRV_SHOWCASE_SEED = 20260903
"""Seed of the one episode a checkpoint records as its showcase."""


def _pearson(x: jax.Array, y: jax.Array) -> jax.Array:
    """Pearson r; 0 when either vector is flat (hrv_dim = 1, or all dims equal): no
    alignment information rather than NaN."""
    x_centred, y_centred = x - jnp.mean(x), y - jnp.mean(y)
    denominator = jnp.sqrt(jnp.sum(x_centred**2) * jnp.sum(y_centred**2))
    return jnp.where(denominator > 1e-12, jnp.sum(x_centred * y_centred) / jnp.maximum(denominator, 1e-12), 0.0)


def heldout_evaluation(
    env: HRWritingEnv,
    env_params: HRVParams,
    policy: Policy | RecurrentPolicy,
    num_episodes: int = 100,
    seed: int = HRV_EVAL_SEED,
    observation_noise: float | jax.Array = 0.0,
) -> dict[str, jax.Array]:
    """Run ``num_episodes`` fixed episodes (from ``seed``) to the end, all vmapped in one
    ``lax.scan`` of ``max_episode_length`` steps; pure and jittable (``policy`` may close
    over traced network parameters, ``env_params`` and ``observation_noise`` may be traced;
    ``num_episodes`` and ``seed`` are Python ints). Episodes stop accumulating once they end.
    The episodes depend on ``env_params`` (difficulty sets the target spread): pass the
    final curriculum stage's params to evaluate on it.

    ``observation_noise`` is the std of Gaussian noise added to ``current_hrv`` before the
    policy sees it (the environment is unaffected): the robustness probe. A recurrent policy
    starts each episode from its ``initial_state`` (``as_recurrent``).

    Returns ``success_rate, return_mean, return_std, final_distance`` (mean L2 to target at
    the episode's end), ``alignment`` (mean Pearson r of final HRV and target) and
    ``episode_length`` (mean steps).
    """
    # raw uint32 keys: the policy receives them, and they work with every library's sampler
    episode_keys = jax.random.split(jax.random.PRNGKey(seed), num_episodes)
    policy = as_recurrent(policy)
    episodes = jax.vmap(lambda key: _run_episode(env, env_params, policy, observation_noise, key))(episode_keys)
    return {
        "success_rate": jnp.mean(episodes["success"].astype(jnp.float32)),
        "return_mean": jnp.mean(episodes["return"]),
        "return_std": jnp.std(episodes["return"]),
        "final_distance": jnp.mean(episodes["distance"]),
        "alignment": jnp.mean(episodes["alignment"]),
        "episode_length": jnp.mean(episodes["length"].astype(jnp.float32)),
    }


EpisodeCarry = tuple
"""(observation, state, policy state, done, return, length, distance, success) of one
held-out episode."""


def _run_episode(
    env: HRWritingEnv,
    env_params: HRVParams,
    policy: RecurrentPolicy,
    observation_noise: float | jax.Array,
    key: jax.Array,
) -> dict[str, jax.Array]:
    """One held-out episode from ``key``, scanned for the full horizon (scalars: return,
    length, final distance, success, alignment)."""
    reset_key, rollout_key = jax.random.split(key)
    obs, state = env.reset(reset_key, env_params)
    zero = jnp.zeros((), jnp.float32)
    initial = (
        obs,
        state,
        policy.initial_state,
        jnp.zeros((), bool),
        zero,
        jnp.zeros((), jnp.int32),
        jnp.linalg.norm(state.current_hrv - state.target_hrv),
        jnp.zeros((), bool),
    )
    per_step = _per_step_inputs(rollout_key, env.max_episode_steps(env_params), env.hrv_dim)
    one_step = _episode_step(env, env_params, policy, observation_noise)
    *_, hrv_noise = per_step  # the first step's reading, as one_step takes it: varies with the noise level too
    initial = batched_from_the_start(initial, policy, _noisy_reading(obs, observation_noise * hrv_noise[0], env_params))
    (_, state, _, _, episode_return, length, distance, success), _ = jax.lax.scan(one_step, initial, per_step)
    return {
        "return": episode_return,
        "length": length,
        "distance": distance,
        "success": success,
        "alignment": _pearson(state.current_hrv, state.target_hrv),
    }


def _per_step_inputs(rollout_key: jax.Array, num_steps: int, hrv_dim: int) -> tuple[jax.Array, ...]:
    """(step index, policy key, step key, observation noise (hrv_dim,)) per step, each with a
    leading (num_steps,) axis: drawn up front, a smaller scan body compiles faster than one
    that splits keys every step."""
    policy_keys, step_keys, noise_key = jnp.split(
        jax.random.split(rollout_key, 2 * num_steps + 1), [num_steps, 2 * num_steps]
    )
    noise = jax.random.normal(noise_key[0], (num_steps, hrv_dim), jnp.float32)
    return jnp.arange(num_steps, dtype=jnp.int32), policy_keys, step_keys, noise


def _episode_step(
    env: HRWritingEnv, env_params: HRVParams, policy: RecurrentPolicy, observation_noise: float | jax.Array
) -> Callable[[EpisodeCarry, tuple[jax.Array, ...]], tuple[EpisodeCarry, None]]:
    """The scan body: the policy acts on the (noisy) reading; an ended episode stays as it
    ended (the policy's state advances every step, like ``t``: the steps after the end are
    discarded)."""

    def one_step(carry: EpisodeCarry, per_step: tuple[jax.Array, ...]) -> tuple[EpisodeCarry, None]:
        obs, state, memory, done, episode_return, length, distance, success = carry
        t, policy_key, step_key, noise = per_step
        seen = _noisy_reading(obs, observation_noise * noise, env_params)
        action, memory = policy.step(memory, seen, t, policy_key)
        next_obs, next_state, reward, terminated, truncated, info = env.step(step_key, state, action, env_params)
        live = jnp.logical_not(done)
        carry = (
            freeze_after_done(done, obs, next_obs),
            freeze_after_done(done, state, next_state),
            memory,
            done | terminated | truncated,
            episode_return + jnp.where(live, reward, 0.0),
            length + live.astype(jnp.int32),
            jnp.where(live, info["distance"], distance),
            jnp.where(live, info["success"], success),
        )
        return carry, None

    return one_step


def _noisy_reading(obs: dict[str, jax.Array], hrv_noise: jax.Array, env_params: HRVParams) -> dict[str, jax.Array]:
    """The observation with ``hrv_noise`` (hrv_dim,) added to ``current_hrv``; the gap the
    policy sees, when observed, is the one of the noisy reading."""
    seen = dict(obs, current_hrv=obs["current_hrv"] + hrv_noise)
    if "gap" in obs:
        seen["gap"] = obs["gap"] - hrv_noise / env_params.step_size
    return seen


def checkpoint_evaluation(
    env: HRWritingEnv,
    env_params: HRVParams,
    policy: Policy | RecurrentPolicy,
    num_episodes: int = 100,
    seed: int = HRV_EVAL_SEED,
    observation_noise: float = HRV_OBSERVATION_NOISE_STD,
) -> dict[str, jax.Array]:
    """``heldout_evaluation`` plus ``noisy_success_rate``: the same held-out episodes
    with N(0, observation_noise^2) added to the observed ``current_hrv`` (the environment is
    unaffected). Both runs are one vmap over the noise level (the clean one at exactly 0)."""
    levels = jnp.asarray([0.0, observation_noise], jnp.float32)
    both = jax.vmap(
        lambda noise: heldout_evaluation(
            env, env_params, policy, num_episodes=num_episodes, seed=seed, observation_noise=noise
        )
    )(levels)
    metrics = {name: value[0] for name, value in both.items()}
    metrics["noisy_success_rate"] = both["success_rate"][1]
    return metrics


def record_showcase(env: HRWritingEnv, env_params: HRVParams, policy: Policy | RecurrentPolicy) -> dict[str, jax.Array]:
    """One fixed episode, one row per step (rows after the end repeat the last state); a
    recurrent policy starts from its ``initial_state``."""
    policy = as_recurrent(policy)
    observation, state = env.reset(jax.random.PRNGKey(HRV_SHOWCASE_SEED), env_params)

    def step(carry, t):
        observation, state, memory, done = carry
        action, memory = policy.step(memory, observation, t, jax.random.PRNGKey(0))
        next_observation, next_state, reward, terminated, truncated, info = env.step(
            jax.random.fold_in(jax.random.PRNGKey(HRV_SHOWCASE_SEED), t), state, action, env_params
        )
        row = {
            "current_hrv": jnp.where(done, state.current_hrv, next_state.current_hrv),
            "target_hrv": state.target_hrv,
            "distance": jnp.where(done, jnp.linalg.norm(state.current_hrv - state.target_hrv), info["distance"]),
            "reward": jnp.where(done, 0.0, reward),
            "success": jnp.logical_and(jnp.logical_not(done), info["success"]),
        }
        # as recorded since the first runs: the carry freezes from the episode's last step on
        # (the ending step's own state is not carried), so later rows repeat the state before it
        done = done | terminated | truncated
        return (
            freeze_after_done(done, observation, next_observation),
            freeze_after_done(done, state, next_state),
            memory,
            done,
        ), row

    start = batched_from_the_start((observation, state, policy.initial_state, jnp.bool_(False)), policy, observation)
    _, rows = jax.lax.scan(step, start, jnp.arange(env.max_episode_steps(env_params)))
    return rows
