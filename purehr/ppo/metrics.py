"""The names of the per-update metrics PPO reports, in the order updates.csv has them
(docs/protocol.md). No JAX here: ``purehr.run.columns`` builds the fixed CSV columns from
these names without importing the algorithm."""

from __future__ import annotations

ROLLOUT_METRICS = ("mean_step_reward", "mean_episode_return", "episodes_completed", "train_success_rate")
"""What every rollout reports (``purehr.ppo.algorithm``); its counters of bad actions and
states and the environment's diagnostics follow them, as a task's own columns."""
LOSS_STATISTICS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
"""The statistics ``purehr.ppo.loss.ppo_loss`` returns beside the loss, in order."""
GRADIENT_STATISTICS = ("grad_norm",)
"""Measured on each minibatch's gradients beside the loss statistics."""
VALUE_STATISTICS = ("explained_variance",)
"""How much of the return targets' variance the critic explained at rollout time, before the
update (1 - Var[target - V] / Var[target]; CleanRL's definition): near 1 a good critic, at or
below 0 one no better than a constant."""
