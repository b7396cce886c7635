"""Reference policies of the HRV task: the greedy oracle (the ceiling of docs/hrv_task.md)
and the floors PPO must clear (doing nothing, acting at random)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from purehr.envs.hrv.env import (
    CONTENT_CONDENSE,
    CONTENT_EXPAND,
    CONTENT_KEEP,
    MOD_DECREASE,
    MOD_INCREASE,
    MOD_KEEP,
    STYLE_NONE,
    HRVParams,
    HRWritingEnv,
    context_gain,
)
from purehr.types import Policy


def oracle_action(obs: dict[str, jax.Array], params: HRVParams) -> jax.Array:
    """The greedy ceiling of ``docs/hrv_task.md``: style 0; expand when every remaining gap exceeds
    two (keep-sized) steps, condense when all gaps are within one; then move each dimension
    whose gap exceeds half of the step it would actually take (step_scale of the chosen
    content op x step_size x gain(context)), so no move overshoots past the target."""
    current, target = obs["current_hrv"], obs["target_hrv"]
    gain = context_gain(obs["generation_context"], params)
    gap = target - current
    abs_gap = jnp.abs(gap)
    keep_step = params.step_scale[CONTENT_KEEP] * params.step_size * gain
    remaining = abs_gap > 0.5 * keep_step
    expand = jnp.any(remaining) & jnp.all(jnp.where(remaining, abs_gap > 2.0 * keep_step, True))
    condense = jnp.all(abs_gap <= keep_step)
    content_op = jnp.where(expand, CONTENT_EXPAND, jnp.where(condense, CONTENT_CONDENSE, CONTENT_KEEP))
    step = params.step_scale[content_op] * params.step_size * gain
    modification = jnp.where(abs_gap > 0.5 * step, jnp.where(gap > 0, MOD_INCREASE, MOD_DECREASE), MOD_KEEP)
    head = jnp.stack([jnp.asarray(STYLE_NONE), content_op])
    return jnp.concatenate([head, modification]).astype(jnp.int32)


def oracle_policy(env: HRWritingEnv, params: HRVParams | None = None) -> Policy:
    """``oracle_action`` as a policy ``(obs, t, key) -> action`` (ignores t and key)."""
    params = env.default_params if params is None else params
    return lambda obs, t, key: oracle_action(obs, params)


def random_policy(env: HRWritingEnv, params: HRVParams | None = None) -> Policy:
    """Uniform over the MultiDiscrete action space: the floor PPO must clear. One vector
    ``randint`` rather than ``MultiDiscrete.sample``'s draw per component, which makes the
    evaluation scan slower to compile."""
    nvec = jnp.asarray(env.action_space(params).nvec, jnp.int32)
    return lambda obs, t, key: jax.random.randint(key, nvec.shape, 0, nvec, jnp.int32)


def no_op_policy(env: HRWritingEnv, params: HRVParams | None = None) -> Policy:
    """Style none, keep the length, keep every dimension: the text drifts only with noise."""
    action = jnp.asarray([STYLE_NONE, CONTENT_KEEP] + [MOD_KEEP] * env.hrv_dim, jnp.int32)
    return lambda obs, t, key: action
