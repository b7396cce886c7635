"""A ``lax.cond`` that stays a branch under the seed vmap: SAC's warm-up updates skip their
gradient steps with it.

Under ``vmap`` a ``lax.cond`` whose predicate is batched becomes a ``select``: both branches
run for every seed and one result is kept. SAC's predicate (the update is past the warm-up) is
the update counter compared with a constant, the same for every seed of a loop, but it is a
field of the per-seed state, so it is batched all the same, and every warm-up update computed
its gradient steps to throw them away (Brax's settings: half of all updates). ``cond_any``'s
batching rule (``jax.custom_batching.custom_vmap``) takes the predicate over the whole batch:
the true branch runs, vmapped, for every member when any member's predicate holds, the false
branch otherwise, as one real ``cond``. Its result for a member is therefore the true branch's
whenever any member's holds: a caller that must honour each member's own predicate selects
per member afterwards (SAC keeps a warm-up seed's learned fields), which makes ``cond_any``
exact for a batch whose members disagree. Unbatched it is a plain ``lax.cond``; under a further
vmap outside, that vmap's usual rule applies (a ``select`` over its axis).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap


def cond_any(predicate: jax.Array, true_fn: Callable[[Any], Any], false_fn: Callable[[Any], Any], operands: Any):
    """``true_fn(operands)`` if ``predicate`` (bool []) else ``false_fn(operands)``; under vmap,
    ``true_fn`` for every member when the predicate holds for any member. Both functions return
    the same structure; neither may close over traced values (pass them in ``operands``)."""

    @custom_vmap
    def branch(predicate, operands):
        return jax.lax.cond(predicate, true_fn, false_fn, operands)

    @branch.def_vmap
    def batched(axis_size, in_batched, predicate, operands):
        predicate_batched, operands_batched = in_batched
        in_axes = (jax.tree.map(lambda batched: 0 if batched else None, operands_batched),)
        take = jnp.any(predicate) if predicate_batched else predicate
        out = jax.lax.cond(
            take,
            jax.vmap(true_fn, in_axes=in_axes, axis_size=axis_size),
            jax.vmap(false_fn, in_axes=in_axes, axis_size=axis_size),
            operands,
        )
        return out, jax.tree.map(lambda _: True, out)

    return branch(predicate, operands)
