"""The minibatch shuffle: a random permutation from single-operand sorts of packed keys.

``jax.random.permutation`` sorts (random key, index) pairs. On the CPU backend a sort of two
operands compares through a compiled comparator call per comparison, while a sort of one
uint32 operand takes XLA's native fast path: for 5 seeds x 10,000 indices the three rounds below
take 4.8 ms, jax.random.permutation's two 17 ms (docs/protocol.md, "Engine facts"; measured
by benchmarks/shuffle.py). So each round packs a random key and the position
into one uint32, ``(random bits << index_bits) | position``, sorts that, and reads the positions
back from the low bits.

Rounds compose lexicographically: the final order is the order of (last round's key, ...,
first round's key, index), one uniform key of ``rounds x (32 - index_bits)`` bits. The
permutation is uniform except where two indices draw the same composite key (their order is
then their index order); like ``jax.random.permutation``, we draw at least 3 log2(n) bits, which
leaves about 1 / (2n) tied pairs expected per permutation.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

MIN_KEY_BITS = 8
"""Below this many random bits per round (more than 2**24 indices) the packing gains little:
``jax.random.permutation`` is used instead."""


def shuffle_rounds(n: int) -> tuple[int, int]:
    """(index bits, rounds) for a permutation of ``n`` indices: the rounds' random bits add
    up to at least 3 log2(n)."""
    index_bits = max(1, (n - 1).bit_length())
    key_bits = 32 - index_bits
    return index_bits, max(1, math.ceil(3 * math.log2(max(n, 2)) / key_bits))


def random_permutation(key: jax.Array, n: int) -> jax.Array:
    """A random permutation of ``range(n)`` (int32 [n]); see the module docstring."""
    if n < 1:
        raise ValueError(f"n={n}: expected a positive number of indices to permute")
    index_bits, rounds = shuffle_rounds(n)
    if 32 - index_bits < MIN_KEY_BITS:
        return jax.random.permutation(key, n)
    position = jnp.arange(n, dtype=jnp.uint32)
    low_bits = jnp.uint32((1 << index_bits) - 1)
    high_bits = jnp.uint32(0xFFFFFFFF ^ ((1 << index_bits) - 1))
    random_bits = jax.random.bits(key, (rounds, n), jnp.uint32)  # one draw for every round
    permutation = position
    for round_bits in random_bits:
        packed = (round_bits & high_bits) | position
        order = jax.lax.sort(packed) & low_bits  # positions, in the order of this round's keys
        permutation = permutation[order]
    return permutation.astype(jnp.int32)
