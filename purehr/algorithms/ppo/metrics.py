"""The names of the per-update metrics PPO reports, in the order updates.csv has them
(docs/protocol.md). No JAX here: ``purehr.run.store.columns`` builds the fixed CSV columns from
these names without importing the algorithm."""

from __future__ import annotations

from purehr.algorithms.base import ROLLOUT_METRICS, MetricNames

LOSS_STATISTICS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
"""The statistics ``purehr.algorithms.ppo.loss.ppo_loss`` returns beside the loss, in order."""
GRADIENT_STATISTICS = ("grad_norm",)
"""Measured on each minibatch's gradients beside the loss statistics."""
VALUE_STATISTICS = ("explained_variance",)
"""How much of the return targets' variance the critic explained at rollout time, before the
update (1 - Var[target - V] / Var[target]; CleanRL's definition): near 1 a good critic, at or
below 0 one no better than a constant."""

METRIC_NAMES = MetricNames(
    rollout=ROLLOUT_METRICS,
    learning=LOSS_STATISTICS + GRADIENT_STATISTICS + VALUE_STATISTICS,
    meanings={
        "mean_step_reward": "mean reward per environment step of the update's rollout",
        "mean_episode_return": "mean return of the episodes that ended in the rollout (NaN if none)",
        "episodes_completed": "episodes that ended in the rollout",
        "train_success_rate": "share of the rollout's ended episodes that succeeded (NaN if none)",
        "loss": "PPO's total loss (policy + vf_coef x value - ent_coef x entropy), mean over minibatches",
        "policy_loss": "the clipped surrogate objective's loss",
        "value_loss": "half the mean squared error of the value against its GAE target (not clipped)",
        "entropy": "mean entropy of the policy's action distribution",
        "approx_kl": "mean (ratio - 1) - log ratio: the KL estimate of the rollout's policy from the updated one",
        "clip_fraction": "share of samples whose probability ratio left [1 - clip_range, 1 + clip_range]",
        "grad_norm": "global norm of each minibatch's gradients, before clipping",
        "explained_variance": "1 - Var[target - V] / Var[target] at rollout time",
    },
)
"""PPO's metrics for the protocol (``purehr.algorithms.base.MetricNames``)."""
