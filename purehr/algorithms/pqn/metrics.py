"""The names of the per-update metrics PQN reports, in the order updates.csv has them. No JAX
here: the CSV columns and ``--help`` read these names without importing the algorithm."""

from __future__ import annotations

from purehr.algorithms.base import ROLLOUT_METRICS, MetricNames

LOSS_STATISTICS = ("loss", "q_mean", "target_mean")
"""What ``purehr.algorithms.pqn.loss.q_loss`` returns, in order (means over minibatches)."""
GRADIENT_STATISTICS = ("grad_norm",)
EXPLORATION_STATISTICS = ("epsilon",)

METRIC_NAMES = MetricNames(
    rollout=ROLLOUT_METRICS,
    learning=LOSS_STATISTICS + GRADIENT_STATISTICS + EXPLORATION_STATISTICS,
    meanings={
        "mean_step_reward": "mean reward per environment step of the update's rollout",
        "mean_episode_return": "mean return of the episodes that ended in the rollout (NaN if none)",
        "episodes_completed": "episodes that ended in the rollout",
        "train_success_rate": "share of the rollout's ended episodes that succeeded (NaN if none)",
        "loss": "half the mean squared error of each branch's Q of the action taken against its lambda-return",
        "q_mean": "mean Q of the actions taken (per branch), in scaled reward units",
        "target_mean": "mean lambda-return trained towards, in scaled reward units",
        "grad_norm": "global norm of each minibatch's gradients, before clipping",
        "epsilon": "the rollout's exploration epsilon (share of random legal actions)",
    },
)
"""PQN's metrics for the protocol (``purehr.algorithms.base.MetricNames``)."""
