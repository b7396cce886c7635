"""PQN's loss: every branch's Q of the action taken regressed to the transition's lambda-return."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from purehr.algorithms.pqn.network import Branches


class Batch(NamedTuple):
    """A batch of transitions [N, ...] (a minibatch: [M, ...])."""

    observation: jax.Array  # flat [N, obs]
    action: jax.Array  # int32 [N, D]: each branch's choice
    target: jax.Array  # float32 [N]: the lambda-return


def q_loss(
    params, apply: Callable, branches: Branches, read_mask: Callable | None, minibatch: Batch
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """0.5 x mean over transitions and branches of (Q_d(s, a_d) - G)^2, as purejaxql's
    ``0.5 * square(chosen - target).mean()`` for one branch. The target is a constant (no
    gradient): the returns were computed from the rollout's Q values, before the epochs.
    Returns (loss, {"loss", "q_mean", "target_mean"})."""
    mask = None if read_mask is None else read_mask(minibatch.observation)
    view = branches.view(apply(params, minibatch.observation), mask)  # [M, D, W]
    chosen = branches.chosen(view, minibatch.action)  # [M, D]
    target = jax.lax.stop_gradient(minibatch.target)[:, None]
    loss = 0.5 * jnp.mean(jnp.square(chosen - target))
    return loss, {"loss": loss, "q_mean": chosen.mean(), "target_mean": minibatch.target.mean()}
