"""Record one swing episode as arrays (the showcase traces the replay video draws)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from purehr.envs.policies import RecurrentPolicy
from purehr.envs.swing.env import SwingEnv
from purehr.envs.swing.evaluation import rollout
from purehr.envs.swing.physics import SwingParams
from purehr.types import Policy

# The keys of a swing showcase trace (docs/interfaces.md), one row per control step.
TRACE_KEYS = (
    "time",
    "theta",
    "theta_dot",
    "squat",
    "lean",
    "energy_norm",
    "tension",
    "command_speed",
    "reward",
    "success",
)


def record_episode(
    env: SwingEnv,
    env_params: SwingParams | None,
    policy: Policy | RecurrentPolicy,
    theta0=0.0,
    theta_dot0=0.0,
    key: jax.Array | None = None,
) -> dict[str, jax.Array]:
    """The full horizon from (theta0, theta_dot0), one row per control step (jittable).

    Rows after a success repeat the successful step (reward 0 there), so every trace has
    ``horizon`` rows; the episode's own rows are those up to the first ``success``. A
    recurrent policy starts from its ``initial_state`` (``rollout`` carries its state).
    """
    base = getattr(env, "unwrapped", env)
    env_params = base.default_params if env_params is None else env_params
    key = jax.random.PRNGKey(0) if key is None else key
    rows = rollout(base, env_params, policy, theta0, theta_dot0, key)
    active = rows["active"]
    last_episode_row = jnp.maximum(jnp.cumsum(active.astype(jnp.int32)) - 1, 0)
    rows = jax.tree.map(lambda x: x[last_episode_row], rows)
    return {
        "time": rows["time"],
        "theta": rows["swing_angle"],
        "theta_dot": rows["theta_dot"],
        "squat": rows["command"][:, 0],
        "lean": rows["command"][:, 1],
        "energy_norm": rows["energy_norm"],
        "tension": rows["tension"],
        "command_speed": rows["command_speed"],
        "reward": jnp.where(active, rows["reward"], 0.0),
        "success": rows["success"],
    }
