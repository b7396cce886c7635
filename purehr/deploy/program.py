"""The deterministic policy as a program of named, batched arrays: what every exported format
holds. Inputs: one array per observation leaf (a ``Dict`` observation's fields in its flat
order, the sorted keys, ``"action_mask"`` among them where the environment has one), then a
recurrent policy's carry; outputs: the environment's action, then the next carry. Every array
has a leading batch axis of any size (``"batch"``). Observation normalisation is part of the
network's parameters, so it is inside the program."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs import spaces
from purehr.envs.policies import as_recurrent

BATCH = "batch"
"""The name of every array's leading axis, of any size."""


@dataclass(frozen=True)
class TensorSpec:
    """One named input or output: ``shape`` [batch, ...] (``BATCH`` first), ``dtype`` a NumPy name,
    ``role`` observation, carry or action; ``field`` the observation key (a Dict observation)."""

    name: str
    shape: tuple[Any, ...]
    dtype: str
    role: str
    field: str | None = None

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "role": self.role} | (
            {"field": self.field} if self.field is not None else {}
        )


@dataclass(frozen=True)
class PolicyProgram:
    """``function(*inputs) -> tuple(outputs)`` over batched arrays, in ``inputs``/``outputs`` order;
    ``initial_carry``: each carry input's value at an episode's start, for one episode."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    function: Callable[..., tuple[jax.Array, ...]]
    initial_carry: tuple[np.ndarray, ...]
    observation_space: Any
    action_space: Any

    @property
    def recurrent(self) -> bool:
        return bool(self.initial_carry)

    def abstract_inputs(self, batch) -> list[jax.ShapeDtypeStruct]:
        """The inputs' shapes with ``batch`` (an int or a symbolic dimension) as the batch axis."""
        return [jax.ShapeDtypeStruct((batch, *spec.shape[1:]), np.dtype(spec.dtype)) for spec in self.inputs]


def observation_fields(observation_space) -> list[tuple[str | None, Any]]:
    """(key, space) per observation leaf in the flat order (a Dict's sorted keys; None: an array observation)."""
    if isinstance(observation_space, spaces.Dict):
        return [(key, observation_space.spaces[key]) for key in sorted(observation_space.spaces)]
    return [(None, observation_space)]


def policy_program(policy, observation_space, action_space) -> PolicyProgram:
    """The program of ``policy`` (a deterministic ``Policy`` or ``RecurrentPolicy`` of one
    observation; it is called with ``t = 0`` and a fixed key, which a deterministic policy does
    not read: the parity check compares against the actions taken with the real ones)."""
    recurrent = as_recurrent(policy)
    fields = observation_fields(observation_space)
    carry_leaves, carry_tree = jax.tree.flatten(recurrent.initial_state)
    inputs = [
        TensorSpec(
            key or "observation",
            (BATCH, *tuple(int(n) for n in space.shape)),
            np.dtype(getattr(space, "dtype", np.float32)).name,
            "observation",
            key,
        )
        for key, space in fields
    ]
    carry_names = ["carry"] if len(carry_leaves) == 1 else [f"carry_{i}" for i in range(len(carry_leaves))]
    inputs += [
        TensorSpec(name, (BATCH, *np.shape(leaf)), np.dtype(jnp.asarray(leaf).dtype).name, "carry")
        for name, leaf in zip(carry_names, carry_leaves)
    ]

    def one(observation_leaves, carry):
        observation = (
            dict(zip([key for key, _ in fields], observation_leaves))
            if isinstance(observation_space, spaces.Dict)
            else observation_leaves[0]
        )
        state = jax.tree.unflatten(carry_tree, list(carry))
        action, state = recurrent.step(state, observation, jnp.int32(0), jax.random.PRNGKey(0))
        return (jnp.asarray(action), *jax.tree.leaves(state))

    def function(*arrays):
        return tuple(jax.vmap(one)(list(arrays[: len(fields)]), list(arrays[len(fields) :])))

    example = [jax.ShapeDtypeStruct((1, *spec.shape[1:]), np.dtype(spec.dtype)) for spec in inputs]
    shapes = jax.eval_shape(function, *example)
    outputs = [TensorSpec("action", (BATCH, *shapes[0].shape[1:]), np.dtype(shapes[0].dtype).name, "action")]
    outputs += [
        TensorSpec(name.replace("carry", "carry_out"), (BATCH, *shape.shape[1:]), np.dtype(shape.dtype).name, "carry")
        for name, shape in zip(carry_names, shapes[1:])
    ]
    initial = tuple(np.asarray(leaf) for leaf in carry_leaves)
    return PolicyProgram(tuple(inputs), tuple(outputs), function, initial, observation_space, action_space)
