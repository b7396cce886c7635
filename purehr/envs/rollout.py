"""Run whole episodes of a policy, vmapped over episodes: the held-out evaluation, floors and
showcase of every environment without a protocol of its own (gymnax, Brax, XLand-MiniGrid,
a user's environment; ``docs/environments.md``)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs import spaces
from purehr.envs.base import Environment
from purehr.envs.policies import RecurrentPolicy, as_recurrent, batched_from_the_start
from purehr.types import Policy

HELDOUT_SEED = 20261201
HELDOUT_STREAM = 0x48454C44
"""The held-out episodes' keys: ``split(fold_in(PRNGKey(HELDOUT_SEED), HELDOUT_STREAM), n)``.
Training draws every key by ``split`` from ``PRNGKey(seed)`` and never folds this stream in,
so no training reset shares a key with a held-out one; every checkpoint, seed and floor is
judged on the same episodes."""


def run_episodes(
    env: Environment,
    env_params,
    policy: Policy | RecurrentPolicy,
    key: jax.Array,
    num_episodes: int,
    num_steps: int | None = None,
) -> dict[str, jax.Array]:
    """Per-episode return, length and success of ``policy`` over the first episode from each
    of ``num_episodes`` resets (later steps are masked out). Each episode starts from the
    policy's ``initial_state`` (``as_recurrent``; a feed-forward policy carries none)."""
    policy = as_recurrent(policy)
    num_steps = env.max_episode_steps(env_params) if num_steps is None else num_steps

    def one_episode(episode_key):
        reset_key, run_key = jax.random.split(episode_key)
        observation, state = env.reset(reset_key, env_params)

        def step(carry, t):
            observation, state, memory, key, running, total, length, success = carry
            key, action_key, step_key = jax.random.split(key, 3)
            action, memory = policy.step(memory, observation, t, action_key)
            observation, state, reward, terminated, truncated, info = env.step(step_key, state, action, env_params)
            total = total + jnp.where(running, reward, 0.0)
            length = length + running.astype(jnp.int32)
            success = jnp.logical_or(success, jnp.logical_and(running, info["success"]))
            running = jnp.logical_and(running, jnp.logical_not(jnp.logical_or(terminated, truncated)))
            return (observation, state, memory, key, running, total, length, success), None

        start = (
            observation,
            state,
            policy.initial_state,
            run_key,
            jnp.bool_(True),
            jnp.float32(0.0),
            jnp.int32(0),
            jnp.bool_(False),
        )
        start = batched_from_the_start(start, policy, observation)
        (_, _, _, _, _, total, length, success), _ = jax.lax.scan(step, start, jnp.arange(num_steps))
        return {"return": total, "length": length, "success": success}

    return jax.vmap(one_episode)(jax.random.split(key, num_episodes))


def heldout_key(seed: int = HELDOUT_SEED) -> jax.Array:
    return jax.random.fold_in(jax.random.PRNGKey(seed), HELDOUT_STREAM)


def defines_success(env: Environment) -> bool:
    """Whether ``info["success"]`` means something for ``env`` (wrappers looked through)."""
    return bool(getattr(getattr(env, "unwrapped", env), "defines_success", True))


def heldout_evaluation(
    env: Environment, env_params, policy: Policy | RecurrentPolicy, num_episodes: int = 100, seed: int = HELDOUT_SEED
) -> dict[str, jax.Array]:
    """The generic held-out evaluation (pure, jittable): ``num_episodes`` fixed episodes
    (``heldout_key(seed)``), each run to its end or the time limit. Returns ``return_mean``,
    ``return_std`` (population), ``return_min``, ``episode_length`` (mean steps) and
    ``success_rate`` (NaN where the environment defines no success: ``defines_success``)."""
    episodes = run_episodes(env, env_params, policy, heldout_key(seed), num_episodes)
    returns = episodes["return"]
    success = jnp.mean(episodes["success"].astype(jnp.float32))
    return {
        "success_rate": success if defines_success(env) else jnp.float32(jnp.nan),
        "return_mean": jnp.mean(returns),
        "return_std": jnp.std(returns),
        "return_min": jnp.min(returns),
        "episode_length": jnp.mean(episodes["length"].astype(jnp.float32)),
    }


def record_episode(env: Environment, env_params, policy: Policy | RecurrentPolicy) -> dict[str, jax.Array]:
    """The first held-out episode step by step (a checkpoint's showcase): ``reward``,
    ``action``, ``success`` and ``active`` (the steps inside the episode), [max steps, ...];
    for an environment with ``render(state, params)`` (jittable, an RGB uint8 image [H, W, 3]),
    also ``frame``, the state each action was taken in, which the run's replay video plays."""
    policy = as_recurrent(policy)
    reset_key, run_key = jax.random.split(jax.random.split(heldout_key(), 1)[0])
    observation, state = env.reset(reset_key, env_params)
    render = frame_renderer(env, state, env_params)

    def step(carry, t):
        observation, state, memory, key, running = carry
        key, action_key, step_key = jax.random.split(key, 3)
        action, memory = policy.step(memory, observation, t, action_key)
        frame = {} if render is None else {"frame": jnp.asarray(render(state, env_params), jnp.uint8)}
        observation, state, reward, terminated, truncated, info = env.step(step_key, state, action, env_params)
        row = {"reward": reward, "action": jnp.asarray(action), "success": info["success"], "active": running}
        row.update(frame)
        running = jnp.logical_and(running, jnp.logical_not(jnp.logical_or(terminated, truncated)))
        return (observation, state, memory, key, running), row

    steps = jnp.arange(env.max_episode_steps(env_params))
    start = (observation, state, policy.initial_state, run_key, jnp.bool_(True))
    start = batched_from_the_start(start, policy, observation)
    _, rows = jax.lax.scan(step, start, steps)
    return rows


def frame_renderer(env: Environment, state, env_params):
    """``env.render`` where it is the documented hook: jittable, returning an image [H, W, 3];
    else None. A ``render`` of another kind (a host-side drawing, a text board) is left alone
    with a warning: the run trains as before, without a replay."""
    render = getattr(env, "render", None)
    if not callable(render):
        return None
    try:
        image = jax.eval_shape(render, state, env_params)
    except Exception as error:  # not traceable: a host-side render
        reason = f"it cannot be traced ({type(error).__name__})"
    else:
        if getattr(image, "ndim", None) == 3 and image.shape[-1] == 3:
            return render
        reason = f"it returns {getattr(image, 'shape', image)!r}, not an image [H, W, 3]"
    warnings.warn(
        f"{type(env).__name__}.render(state, params) is not the replay hook ({reason}): no replay frames recorded",
        stacklevel=2,
    )
    return None


def random_policy(action_space, observation_space=None) -> Policy:
    """A fresh uniform draw from ``action_space`` every step (the random floor); for an
    observation with an ``"action_mask"`` (``observation_space`` a ``Dict`` with one), a
    uniform draw among the legal actions ("random-among-legal")."""
    if spaces.action_mask_slice(observation_space) is None:
        return lambda observation, t, key: action_space.sample(key)
    widths = (action_space.n,) if isinstance(action_space, spaces.Discrete) else tuple(action_space.nvec)
    bounds = np.cumsum(widths)[:-1].tolist()

    def among_legal(observation, t, key):
        legal = jnp.asarray(observation[spaces.ACTION_MASK]) > 0.5
        logits = jnp.split(jnp.where(legal, 0.0, -1e9), bounds, axis=-1)  # one per component
        keys = jax.random.split(key, len(widths))
        choices = jnp.stack([jax.random.categorical(k, component) for k, component in zip(keys, logits)], axis=-1)
        return choices[..., 0] if isinstance(action_space, spaces.Discrete) else choices

    return among_legal


def zero_policy(action_space: spaces.Box) -> Policy:
    """The zero action, clipped into the box (the continuous-action floor: doing nothing)."""
    zero = jnp.clip(
        jnp.zeros(action_space.shape, action_space.dtype),
        jnp.asarray(action_space.low, action_space.dtype),
        jnp.asarray(action_space.high, action_space.dtype),
    )
    return lambda observation, t, key: zero
