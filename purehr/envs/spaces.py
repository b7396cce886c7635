"""Space descriptions, so networks and adapters can size themselves from an environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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


def observation_batch_size(observation, space) -> int | None:
    """None for one observation of ``space``, N for a batch of N (a leading axis of length N
    on every leaf), so a policy can take either; anything else is refused with its size."""
    leaves = [np.shape(leaf) for leaf in jax.tree.leaves(observation)]
    expected = flat_dim(space)
    total = sum(int(np.prod(shape)) for shape in leaves)
    if total == expected:
        return None
    leading = {shape[0] for shape in leaves if len(shape) > 0}
    if len(leading) == 1 and all(len(shape) > 0 for shape in leaves):
        size = leading.pop()
        if size > 0 and total == size * expected:
            return size
    raise ValueError(
        f"observation with leaf shapes {leaves} ({total} values): expected one observation of "
        f"{expected} values or a batch with a leading axis on every leaf ({space})"
    )


def flat_dim(space) -> int:
    if isinstance(space, (Box, Dict)):
        return space.flat_dim
    if isinstance(space, Discrete):
        return 1
    if isinstance(space, MultiDiscrete):
        return len(space.nvec)
    raise TypeError(f"unknown space {space!r}")
