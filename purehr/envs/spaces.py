"""Space descriptions, so networks and adapters can size themselves from an environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class Box:
    low: float | np.ndarray
    high: float | np.ndarray
    shape: tuple[int, ...]
    dtype: jnp.dtype = jnp.float32

    def sample(self, key: jax.Array) -> jax.Array:
        low = jnp.broadcast_to(jnp.asarray(self.low, self.dtype), self.shape)
        high = jnp.broadcast_to(jnp.asarray(self.high, self.dtype), self.shape)
        finite_low = jnp.where(jnp.isfinite(low), low, -1.0)
        finite_high = jnp.where(jnp.isfinite(high), high, 1.0)
        return jax.random.uniform(key, self.shape, self.dtype, finite_low, finite_high)

    def contains(self, x: jax.Array) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.all((x >= self.low) & (x <= self.high)) & (x.shape == self.shape)

    @property
    def flat_dim(self) -> int:
        return int(np.prod(self.shape))


@dataclass(frozen=True)
class Discrete:
    n: int

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, (), 0, self.n)

    def contains(self, x: jax.Array) -> jax.Array:
        return (x >= 0) & (x < self.n)

    @property
    def shape(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class MultiDiscrete:
    nvec: tuple[int, ...]

    def sample(self, key: jax.Array) -> jax.Array:
        keys = jax.random.split(key, len(self.nvec))
        return jnp.stack([jax.random.randint(k, (), 0, n) for k, n in zip(keys, self.nvec)])

    def contains(self, x: jax.Array) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.all((x >= 0) & (x < jnp.asarray(self.nvec)))

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.nvec),)


@dataclass(frozen=True)
class Dict:
    spaces: Mapping[str, Box] = field(default_factory=dict)

    def sample(self, key: jax.Array) -> dict[str, jax.Array]:
        keys = jax.random.split(key, len(self.spaces))
        return {name: space.sample(k) for k, (name, space) in zip(keys, self.spaces.items())}

    def contains(self, x: Mapping[str, jax.Array]) -> jax.Array:
        return jnp.all(jnp.stack([self.spaces[name].contains(x[name]) for name in self.spaces]))

    @property
    def flat_dim(self) -> int:
        return sum(space.flat_dim for space in self.spaces.values())


def flatten_observation(observation) -> jax.Array:
    """One vector per observation; dict leaves in sorted-key order (jax's pytree order)."""
    return jnp.concatenate([jnp.ravel(leaf) for leaf in jax.tree.leaves(observation)])


ACTION_MASK = "action_mask"
"""The ``Dict`` observation entry that marks the legal actions (docs/environments.md)."""


def action_mask_slice(space) -> slice | None:
    """Where a ``Dict`` observation's ``"action_mask"`` lies in the flat observation (dict
    leaves flatten in sorted-key order); None for an observation without one."""
    if not isinstance(space, Dict) or ACTION_MASK not in space.spaces:
        return None
    start = sum(space.spaces[name].flat_dim for name in sorted(space.spaces) if name < ACTION_MASK)
    return slice(start, start + space.spaces[ACTION_MASK].flat_dim)


def observation_batch_size(observation, space) -> int | None:
    """None for one observation of ``space``, N for a batch of N (a leading axis of length N on
    every leaf), so a policy can take either; anything else (a missing key, a wrong length, leaves
    that disagree on N) is refused with ``ValueError`` naming the leaf. Reads only shapes and
    dtypes, so it also takes traced arrays."""
    batches = {label: _leaf_batch(label, value, shape) for label, shape, value in _labelled_leaves(observation, space)}
    if len(set(batches.values())) > 1:
        raise ValueError(
            f"observation leaves disagree on the batch: {batches} (None = a single observation); "
            "expected every leaf single, or every leaf with the same leading batch size"
        )
    return next(iter(batches.values()))


def _labelled_leaves(observation, space) -> list[tuple[str, tuple[int, ...], Any]]:
    """(label, expected shape, value) per leaf of ``space``: ``observation`` or
    ``observation['key']``; a dict observation must have exactly the space's keys."""
    if not isinstance(space, Dict):
        return [("observation", tuple(space.shape), observation)]
    if not isinstance(observation, Mapping):
        raise ValueError(
            f"observation is a {type(observation).__name__}; expected a dict with keys {sorted(space.spaces)}"
        )
    missing = sorted(set(space.spaces) - set(observation))
    extra = sorted(set(observation) - set(space.spaces))
    if missing or extra:
        values = sum(int(np.size(leaf)) for leaf in jax.tree.leaves(observation))
        wrong = "; ".join(([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else []))
        raise ValueError(
            f"observation has keys {sorted(observation)}: {wrong} ({values} values): expected one observation of "
            f"{flat_dim(space)} values or a batch, with exactly the keys {sorted(space.spaces)}"
        )
    return [(f"observation[{name!r}]", tuple(sub.shape), observation[name]) for name, sub in space.spaces.items()]


def _leaf_batch(label: str, value: Any, shape: tuple[int, ...]) -> int | None:
    """None when ``value`` has ``shape``, N when it has (N, *shape); numbers only."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # an array, or a tracer: no conversion
        array_shape, dtype = tuple(value.shape), np.dtype(value.dtype)
    else:
        try:
            array = np.asarray(value)
        except Exception:  # e.g. a ragged list
            raise ValueError(f"{label} is not an array of numbers: {value!r}") from None
        array_shape, dtype = array.shape, array.dtype
    if dtype.kind not in "biuf":
        raise ValueError(f"{label} has dtype {dtype}; expected numbers")
    if array_shape == shape:
        return None
    if len(array_shape) == len(shape) + 1 and array_shape[1:] == shape:
        return array_shape[0]
    raise ValueError(
        f"{label} has shape {array_shape}; expected {shape} (one observation) "
        f"or (N, {', '.join(map(str, shape))}) (a batch of N)"
    )


def flat_dim(space) -> int:
    if isinstance(space, (Box, Dict)):
        return space.flat_dim
    if isinstance(space, Discrete):
        return 1
    if isinstance(space, MultiDiscrete):
        return len(space.nvec)
    raise TypeError(f"unknown space {space!r}")
