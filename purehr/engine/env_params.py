"""The environment parameters an update trains on, the same for every algorithm: the learner's
discount written into them (potential-based shaping is policy-invariant only when the
environment's gamma is the learner's) and a curriculum's stage for the update, if any."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from purehr.types import EnvParamsSchedule


def with_discount(env_params, gamma):
    """``env_params`` with the learner's ``gamma`` where they have one (in their own dtype)."""
    if hasattr(env_params, "gamma"):
        return env_params.replace(gamma=jnp.asarray(gamma, jnp.asarray(env_params.gamma).dtype))
    return env_params


def make_env_params_at(env_params, env_params_schedule: EnvParamsSchedule | None) -> Callable[[Any, Any], Any]:
    """``env_params_at(update_index, hparams)``: the params that update trains on (``hparams.gamma``
    written in, then the schedule's stage for ``update_index``)."""

    def env_params_at(update_index, hparams):
        params = with_discount(env_params, hparams.gamma)
        if env_params_schedule is not None:
            params = env_params_schedule(params, update_index)
        return params

    return env_params_at
