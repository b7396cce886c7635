"""The learning rate an optimiser takes (PPO and PQN): constant, or decayed linearly to 0 over
the budget, as PureJaxRL's ``linear_schedule`` does."""

from __future__ import annotations

from collections.abc import Callable

import jax


def learning_rate_schedule(
    learning_rate: jax.Array, anneal: bool, steps_per_update: int, num_updates: int
) -> jax.Array | Callable[[jax.Array], jax.Array]:
    """``learning_rate`` (a traced hyperparameter), or with ``anneal`` optax's schedule of the
    optimiser's step count: the rate falls once per update (``steps_per_update`` optimiser
    steps, every minibatch of every epoch), from ``learning_rate`` at the first to 1 /
    ``num_updates`` of it at the last."""
    if not anneal:
        return learning_rate

    def annealed(count):
        update = count // steps_per_update
        return learning_rate * (1.0 - update / num_updates)

    return annealed
