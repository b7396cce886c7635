"""The names of the per-update metrics SAC reports, in the order updates.csv has them
(docs/protocol.md). No JAX here: ``purehr.run.store.columns`` builds the fixed CSV columns from
these names without importing the algorithm."""

from __future__ import annotations

from purehr.algorithms.base import ROLLOUT_METRICS, MetricNames

LOSS_STATISTICS = ("critic_loss", "actor_loss", "temperature_loss", "alpha", "entropy", "q_mean")
"""What ``purehr.algorithms.sac.loss`` reports per gradient step, averaged over the update's
gradient steps (NaN in the warm-up updates, which take none)."""

METRIC_NAMES = MetricNames(
    rollout=ROLLOUT_METRICS,
    learning=LOSS_STATISTICS,
    meanings={
        "mean_step_reward": "mean reward per environment step of the update's steps",
        "mean_episode_return": "mean return of the episodes that ended in the update (NaN if none)",
        "episodes_completed": "episodes that ended in the update",
        "train_success_rate": "share of the update's ended episodes that succeeded (NaN if none)",
        "critic_loss": "half the summed squared errors of the twin critics against the soft target, mean over samples",
        "actor_loss": "mean of alpha x log pi(a|s) - min of the twin Q(s, a), a drawn from the policy",
        "temperature_loss": "-log alpha x (log pi + target entropy), mean over samples",
        "alpha": "the entropy temperature exp(log alpha) each gradient step used, mean over the update's steps",
        "entropy": "-log pi of the policy's sampled (squashed) actions, mean over samples",
        "q_mean": "mean of the twin critics' Q(s, a) on the sampled transitions",
    },
)
"""SAC's metrics for the protocol (``purehr.algorithms.base.MetricNames``)."""
