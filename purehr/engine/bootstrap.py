"""Values of a batch's selected rows alone: the truncation bootstrap V(final observation) is
needed only where a time limit cut an episode, a few rows of a rollout's thousands, so PPO and
PQN value those rows and not the whole batch (docs/protocol.md, "Engine facts")."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def values_where(value: Callable[[jax.Array], jax.Array], where: jax.Array, rows: jax.Array, chunk: int) -> jax.Array:
    """``value(rows)`` [N] where ``where`` [N] holds, 0 elsewhere, computed on the selected rows
    only: they are gathered to the front and valued ``chunk`` at a time in a ``while_loop``
    that stops after the last one (no pass at all when none is selected; under a vmap the loop
    runs until every batch member's rows are done)."""
    size = where.shape[0]
    chunks = -(-size // chunk)
    count = jnp.sum(where, dtype=jnp.int32)
    # the selected rows' indices first; the padding points past the end, and drops
    selected = jnp.nonzero(where, size=chunks * chunk, fill_value=size)[0]

    def value_chunk(carry):
        start, values = carry
        indices = jax.lax.dynamic_slice(selected, (start,), (chunk,))
        chunk_values = value(rows[jnp.minimum(indices, size - 1)])
        return start + chunk, values.at[indices].set(chunk_values, mode="drop")

    _, values = jax.lax.while_loop(
        lambda carry: carry[0] < count, value_chunk, (jnp.int32(0), jnp.zeros((size,), jnp.float32))
    )
    return values
