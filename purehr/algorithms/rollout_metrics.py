"""What every algorithm reports of its rollout, the same columns whatever learns from it: the
episodes that ended (from the wrappers' statistics), the bad actions and states the environment
counted, and its own diagnostics."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from purehr.algorithms.base import ROLLOUT_METRICS


def rollout_metrics(trajectory) -> dict[str, jax.Array]:
    """Per-update scalars of a trajectory [T, E] (any record with ``reward``, ``episode_done``,
    ``episode_return``, ``episode_success``, ``nan_action``, ``invalid_action``,
    ``nonfinite_state`` and ``diagnostics``): never whole trajectories (they would stack across
    updates)."""
    episodes = trajectory.episode_done.sum()
    safe = jnp.maximum(episodes, 1)
    no_episode = episodes == 0
    metrics = {
        "mean_step_reward": trajectory.reward.mean(),
        "mean_episode_return": jnp.where(no_episode, jnp.nan, trajectory.episode_return.sum() / safe),
        "episodes_completed": episodes,
        "train_success_rate": jnp.where(no_episode, jnp.nan, trajectory.episode_success.sum() / safe),
    }
    assert tuple(metrics) == ROLLOUT_METRICS  # the names updates.csv has, in its order
    metrics["nan_actions"] = trajectory.nan_action.sum()
    metrics["invalid_actions"] = trajectory.invalid_action.sum()
    metrics["nonfinite_states"] = trajectory.nonfinite_state.sum()
    for name, values in trajectory.diagnostics.items():
        if name.startswith("min_"):
            metrics[name] = values.min()
        else:
            metrics[f"mean_{name}"] = values.mean()
    return metrics
