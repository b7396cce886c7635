"""SAC's replay buffer: a circular buffer of transitions held in the training state, so it lives
on the device inside the scan, is vmapped over seeds, and is checkpointed and resumed bit for bit
with the rest of the state (it is a plain pytree of arrays and two int32 counters).

Written here rather than taken from flashbax (0.1.3 installs beside jax 0.10.2 and flax 0.12.8
without changing them, and its state is a pytree too): the whole of what SAC needs is the ~40
lines below (write a batch at the cursor modulo the capacity, draw uniform indices below the
fill), while flashbax would be a core dependency for every user, not only SAC's, and brings
chex and tensorstore with it; its flat buffer stores trajectories and samples (s, s') pairs
from consecutive rows, which across an auto-reset needs the final observation stored anyway;
and its states and sampling order are its own, so a change in a release would change our
checkpoints' layout and our runs' bits. Sampling is uniform with replacement (SAC's).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from purehr.algorithms.sac.draws import below


@struct.dataclass
class ReplayBuffer:
    """``data``: a pytree of [capacity, ...] arrays; ``position``: the row the next transition is
    written to; ``size``: how many rows hold transitions (at most ``capacity``)."""

    data: Any
    position: jax.Array  # int32 []
    size: jax.Array  # int32 []

    @property
    def capacity(self) -> int:
        return jax.tree.leaves(self.data)[0].shape[0]


def init_buffer(example: Any, capacity: int) -> ReplayBuffer:
    """An empty buffer for ``capacity`` transitions shaped like ``example`` (one transition,
    no leading axis): zeros of its shapes and dtypes."""
    data = jax.tree.map(lambda x: jnp.zeros((capacity, *jnp.shape(x)), jnp.asarray(x).dtype), example)
    return ReplayBuffer(data, jnp.int32(0), jnp.int32(0))


def insert_indices(position: jax.Array, count: int, capacity: int) -> jax.Array:
    """The rows [count] a batch of ``count`` transitions is written to: from ``position`` on,
    wrapping past the end to row 0."""
    return (position + jnp.arange(count, dtype=jnp.int32)) % capacity


def add(buffer: ReplayBuffer, batch: Any) -> ReplayBuffer:
    """``batch`` (a pytree of [N, ...], N <= capacity) written after the newest transition,
    overwriting the oldest once the buffer is full."""
    count = jax.tree.leaves(batch)[0].shape[0]
    capacity = buffer.capacity
    if count > capacity:
        raise ValueError(f"a batch of {count} transitions for a buffer of {capacity}: expected at most {capacity}")
    rows = insert_indices(buffer.position, count, capacity)
    data = jax.tree.map(lambda stored, new: stored.at[rows].set(new.astype(stored.dtype)), buffer.data, batch)
    return ReplayBuffer(
        data,
        ((buffer.position + count) % capacity).astype(jnp.int32),
        jnp.minimum(buffer.size + count, capacity).astype(jnp.int32),
    )


def sample_indices(bits: jax.Array, size: jax.Array) -> jax.Array:
    """Rows drawn uniformly with replacement from the ``size`` filled ones, one per uint32 of
    ``bits`` (``purehr.algorithms.sac.draws``: the update's one draw): int32 of ``bits.shape``
    (all 0 while the buffer is empty: callers take no gradient step then)."""
    return below(bits, size)


def gather(buffer: ReplayBuffer, rows: jax.Array) -> Any:
    """The transitions at ``rows`` (any shape): a pytree of [*rows.shape, ...]."""
    return jax.tree.map(lambda stored: stored[rows], buffer.data)
