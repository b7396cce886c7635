"""Seeds as PRNG keys: every algorithm and the protocol turn integer seeds into raw keys here,
one per seed (``PRNGKey(uint32(seed))``), so a seed means the same run everywhere."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def raw_seed_keys(keys) -> jax.Array:
    """Already-made PRNG keys (raw or typed), one per seed, checked and returned raw: uint32 of
    shape (seeds, 2). Integer seeds go through ``keys_for_seeds`` first."""
    keys = jnp.asarray(keys) if not isinstance(keys, jax.Array) else keys
    if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        keys = jax.random.key_data(keys)
    if keys.ndim != 2 or keys.shape[-1] != 2 or keys.dtype != jnp.uint32:
        raise ValueError(
            f"keys of shape {tuple(keys.shape)} and dtype {keys.dtype}: expected a leading seed axis "
            "of raw PRNG keys, shape (num_seeds, 2) uint32, e.g. "
            "jax.vmap(jax.random.PRNGKey)(jnp.arange(5))"
        )
    return keys


MAX_SEED = 2**32 - 1
"""The largest seed: a seed becomes ``PRNGKey(uint32(seed))`` (``keys_for_seeds``)."""


def validate_seeds(seeds) -> list[int]:
    """The seeds ``keys_for_seeds`` takes, as ints: at least one, each an integer from 0 to
    ``MAX_SEED``, none repeated; else ``ValueError`` naming them."""
    seeds = list(seeds)
    if not seeds or any(not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0 for s in seeds):
        raise ValueError(f"seeds={seeds}: expected a non-empty list of non-negative integers")
    too_large = [int(s) for s in seeds if s > MAX_SEED]
    if too_large:
        raise ValueError(
            f"seeds={[int(s) for s in seeds]}: {', '.join(map(str, too_large))} is above {MAX_SEED:,}; "
            "expected seeds from 0 to 2**32 - 1 (each seeds a PRNG key from a uint32)"
        )
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={seeds}: each seed may appear once")
    return [int(s) for s in seeds]


def keys_for_seeds(seeds) -> jax.Array:
    """Integer seeds -> one raw PRNG key each, ``PRNGKey(seed)``: uint32 of shape (seeds, 2)."""
    return jax.vmap(jax.random.PRNGKey)(jnp.asarray(list(seeds), jnp.uint32))
