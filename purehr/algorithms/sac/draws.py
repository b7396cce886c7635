"""An update's random numbers from one hash call: keys, uniforms, normals and row indices
carved out of one ``jax.random.bits`` draw.

Why: on the CPU every ``jax.random`` call is a threefry hash lowered as a loop of five rounds
(JAX rolls it there to compile faster), about sixty thunks each under the seed vmap, and a SAC
update of one environment step and one gradient step made nine of them (key splits, the
action noise, the uniform warm-up actions, the sampled rows, the actor noise): half of its
1,157 thunks on rejax's Pendulum config. A key split is itself the hash of a counter, as are
random bits, so disjoint stretches of one draw are as independent as the keys of one split.

The maps from bits are JAX's own (``jax.random.uniform``: the top 23 bits as the mantissa of a
float in [1, 2), minus 1; ``jax.random.normal``: sqrt(2) erfinv of a uniform in (-1, 1));
row indices are the bits modulo the row count (bias below count / 2**32 relative: 2e-5 for a
100,000-row buffer; ``jax.random.randint`` spends a second word to avoid it).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

FOLD_WORDS = 4096
"""SAC's gradient steps draw in the update's one draw when they need at most this many words
(rejax's Pendulum config: 768), in a second draw inside the learning branch otherwise (Brax's
settings: 98,304, half of its updates warm-up ones, which would hash them for nothing): a
wasted hash of a few thousand words costs about what a second hash loop's thunks do."""


def split_bits(key: jax.Array, shapes: dict[str, tuple[int, ...]]) -> dict[str, jax.Array]:
    """One ``jax.random.bits`` draw cut into uint32 arrays of ``shapes`` (by name, in order)."""
    sizes = [math.prod(shape) for shape in shapes.values()]
    words = jax.random.bits(key, (sum(sizes),), jnp.uint32)
    starts = np.cumsum([0, *sizes])
    return {
        name: words[start : start + size].reshape(shape)
        for (name, shape), start, size in zip(shapes.items(), starts, sizes, strict=False)
    }


def as_keys(bits: jax.Array, like: jax.Array) -> jax.Array:
    """Words [..., 2] as PRNG keys of ``like``'s kind: raw uint32 keys as they are, typed keys
    wrapped with ``like``'s implementation."""
    if jax.dtypes.issubdtype(like.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(bits, impl=jax.random.key_impl(like))
    return bits


def key_words(like: jax.Array) -> tuple[int, ...]:
    """The words one key of ``like``'s kind takes (2 for threefry)."""
    if jax.dtypes.issubdtype(like.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(like).shape[-1:]
    return like.shape[-1:]


def uniform(bits: jax.Array, low: float, high: float) -> jax.Array:
    """float32 in [low, high), as ``jax.random.uniform`` makes them from the same bits."""
    mantissa = jax.lax.shift_right_logical(bits, np.uint32(32 - 23)) | np.array(1.0, np.float32).view(np.uint32)
    unit = jax.lax.bitcast_convert_type(mantissa, jnp.float32) - np.float32(1.0)
    return jnp.maximum(np.float32(low), unit * np.float32(high - low) + np.float32(low))


def normal(bits: jax.Array) -> jax.Array:
    """Standard normal float32, as ``jax.random.normal`` makes them from the same bits."""
    low = np.nextafter(np.float32(-1.0), np.float32(0.0))
    return np.float32(np.sqrt(2.0)) * jax.lax.erf_inv(uniform(bits, low, 1.0))


def below(bits: jax.Array, count: jax.Array) -> jax.Array:
    """int32 in [0, max(count, 1)): the bits modulo the count."""
    return (bits % jnp.maximum(count, 1).astype(jnp.uint32)).astype(jnp.int32)
