"""A user's own network: ``network = "module:factory"`` or ``"path/to/file.py:factory"`` in any
algorithm's config names a function ``factory(observation_space, action_space) -> flax module``,
called with the spaces as the environment gives them (``purehr.envs.spaces``: a ``Box`` of any
shape, a ``Dict`` of them; unflattened).

The module it returns is a **torso** ``observation -> features [N, F]`` (the algorithm adds its
heads: PPO's policy and value heads, PQN's Q head and masking, SAC's actor and twin-critic heads,
and observation normalisation), or, with a class attribute ``whole_network = True``, PPO's or
PQN's **whole network** (PPO: ``observation -> (policy outputs [N, P], value [N])``; PQN:
``observation -> Q [N, sum(nvec)]``). A **recurrent torso** declares its carry: a method
``initial_carry() -> pytree`` (one environment's, unbatched; it may not read parameters) and
``__call__(carry, observation) -> (carry, features)``; the algorithm resets the carry to
``initial_carry()`` where an episode starts (PPO only).

The algorithms keep storing flat observations (rollouts, minibatches, masks and normalisation
read them as before, so default programs are unchanged); ``StructuredInput`` turns the flat
rows back into the environment's structure for the user's module: every leaf [N, *leaf shape]
with one batch axis N (a single observation is a batch of 1), dtypes as the space declares.

``describe`` is what a run records of it (module, factory, file, source digest); a restore in
a fresh process loads the same spec again and checks the digest."""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np

from purehr.envs import spaces


@dataclass(frozen=True)
class LoadedNetwork:
    """A spec's factory and where it came from."""

    spec: str
    factory: Any
    module: str
    file: str | None
    source_digest: str


def load_network(spec: str) -> LoadedNetwork:
    """Imports ``spec``'s module (a file path, or a module on the Python path or in the current
    directory, as ``python -m`` finds one) and finds its factory; ``ValueError`` naming the spec
    when either is missing. Keyed on the source: the same spec and unchanged file give the same
    factory (and module classes) for the process, so equal configs build equal modules; a file
    edited since is imported again (a new module: no program of the old source is reused)."""
    module_name, _, attribute = spec.rpartition(":")
    try:
        if module_name.endswith(".py"):
            file = _network_file(module_name)
            digest = _file_digest(file)
            return _load(spec, _import_file(file, digest), attribute, digest)
        module = _import_module(module_name)
        return _load(spec, module, attribute, _IMPORTED_DIGESTS[module_name])
    except ValueError:
        raise
    except Exception as error:
        raise ValueError(
            f"network {spec!r}: importing {module_name!r} raised {type(error).__name__}: {error}"
        ) from error


@functools.cache
def _load(spec: str, module, attribute: str, digest: str) -> LoadedNetwork:
    """``module``'s factory ``attribute`` as imported from the source of ``digest``."""
    factory = getattr(module, attribute, None)
    if not callable(factory):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        where = spec.rpartition(":")[0]
        raise ValueError(f"network {spec!r}: {where} has no function {attribute!r}; its callables: {found}")
    file = inspect.getsourcefile(module)
    return LoadedNetwork(spec, factory, module.__name__, file and str(Path(file).resolve()), digest)


RECORDED_FILES: dict[str, Path] = {}
"""A relative network file as a run or a saved model named it -> the absolute file it recorded
(``remember_recorded``): where the relative path is not found from the current directory, a
resume, restore or load reads the recorded file instead."""


def remember_recorded(record: dict | None) -> None:
    """Lets a relative file spec of ``record`` (``describe``'s, from a manifest or a saved model)
    resolve from another working directory: to the file it recorded, where that still exists."""
    if not isinstance(record, dict) or not isinstance(record.get("spec"), str):
        return
    module, file = record["spec"].rpartition(":")[0], record.get("file")
    relative = module.endswith(".py") and not Path(module).expanduser().is_absolute()
    if relative and isinstance(file, str) and Path(file).is_file():
        RECORDED_FILES[module] = Path(file)


def _network_file(path: str) -> Path:
    file = Path(path).expanduser().resolve()
    if not file.is_file() and path in RECORDED_FILES:
        file = RECORDED_FILES[path]
    if not file.is_file():
        raise ValueError(
            f"network file {path!r} ({file}) does not exist; expected a Python file (a relative path is "
            "read from the current directory)"
        )
    return file


def _file_digest(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def _import_module(name: str):
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # after the installed packages: it never shadows one
    try:
        module = importlib.import_module(name)
    except ImportError as error:
        raise ValueError(
            f"network module {name!r} does not import ({error}); expected it on the Python path or in the "
            "current directory, or give its file: path/to/file.py:factory"
        ) from error
    digest = source_digest(module)
    if _IMPORTED_DIGESTS.setdefault(name, digest) != digest:  # edited since this process imported it
        module = importlib.reload(module)
        _IMPORTED_DIGESTS[name] = source_digest(module)
    return module


_IMPORTED_DIGESTS: dict[str, str] = {}
"""A dotted network module's source digest when this process imported it."""


def _import_file(file: Path, digest: str):
    """The module of ``file`` as its bytes are now (``digest``): its own name per source."""
    name = f"purehr_user_network_{hashlib.sha256(str(file).encode()).hexdigest()[:12]}_{digest[:12]}_{file.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses (flax modules) look their module up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def source_digest(module) -> str:
    """SHA-256 of a module's file (its bytes; "unread" when it has none)."""
    try:
        return hashlib.sha256(Path(inspect.getsourcefile(module)).read_bytes()).hexdigest()
    except (TypeError, OSError):
        return hashlib.sha256(b"unread").hexdigest()


def build_network(spec: str, observation_space, action_space) -> nn.Module:
    """The user's module for these spaces; ``TypeError`` naming the spec when the factory does
    not return a flax module."""
    loaded = load_network(spec)
    try:
        module = loaded.factory(observation_space, action_space)
    except Exception as error:
        raise ValueError(
            f"network {spec!r}: its factory raised {type(error).__name__}: {error} for the observation space "
            f"{space_shapes(observation_space)} and the action space {action_space!r}"
        ) from error
    if not isinstance(module, nn.Module):
        raise TypeError(f"network {spec!r}: its factory returned {module!r}; expected a flax.linen.Module")
    return module


def is_recurrent(module: nn.Module) -> bool:
    return callable(getattr(module, "initial_carry", None))


def is_whole(module: nn.Module) -> bool:
    return bool(getattr(module, "whole_network", False))


def describe(spec: str | None, params=None) -> dict[str, Any] | None:
    """What a run records of the network: spec, module, factory, file, source digest and, given
    the parameters (or their shapes), every parameter's shape by path."""
    if spec is None:
        return None
    loaded = load_network(spec)
    record = {
        "spec": spec,
        "module": spec.rpartition(":")[0],  # as named: a dotted module, or the file's path
        "factory": spec.rpartition(":")[2],
        "file": loaded.file,
        "source_digest": loaded.source_digest,
    }
    if params is not None:
        record["parameter_shapes"] = parameter_shapes(params)
    return record


def parameter_shapes(params) -> dict[str, list[int]]:
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {jax.tree_util.keystr(path): list(np.shape(leaf)) for path, leaf in flat}


def space_shapes(space) -> Any:
    """The shapes a space gives, for messages: (3, 4) or {'key': (3, 4), ...}."""
    if isinstance(space, spaces.Dict):
        return {name: tuple(sub.shape) for name, sub in space.spaces.items()}
    return tuple(space.shape)


def _leaves(space) -> list[tuple[str | None, tuple[int, ...], Any]]:
    """(key or None, shape, dtype) per leaf, in ``flatten_observation``'s (sorted-key) order."""
    if isinstance(space, spaces.Dict):
        return [(name, tuple(space.spaces[name].shape), _dtype(space.spaces[name])) for name in sorted(space.spaces)]
    return [(None, tuple(space.shape), _dtype(space))]


def _dtype(space):
    return getattr(space, "dtype", jnp.float32)


def unflatten(flat: jax.Array, space) -> Any:
    """Flat observations [N, obs] -> the space's structure, each leaf [N, *shape]."""
    leaves, start = {}, 0
    for name, shape, dtype in _leaves(space):
        size = math.prod(shape)
        leaves[name] = flat[:, start : start + size].reshape((flat.shape[0], *shape)).astype(dtype)
        start += size
    return leaves[None] if None in leaves else leaves


class StructuredInput(nn.Module):
    """Flat observations [..., obs] -> the user's ``torso`` on them in the environment's
    structure, batched [N, ...] -> its output with the leading axes back [..., F] (a recurrent
    torso: ``(carry [..., *], flat [..., obs]) -> (carry, features)``)."""

    torso: nn.Module
    observation_space: Any

    def __call__(self, *inputs):
        flat = inputs[-1]
        batch = flat.shape[:-1]
        observation = unflatten(flat.reshape((-1, flat.shape[-1])), self.observation_space)
        if len(inputs) == 1:
            return _unbatched(self.torso(observation), batch)
        carry = jax.tree.map(lambda leaf, like: leaf.reshape((-1, *np.shape(like))), inputs[0], self.initial_carry())
        carry, features = self.torso(carry, observation)
        return _unbatched(carry, batch), _unbatched(features, batch)

    def initial_carry(self):
        return self.torso.initial_carry()


def _unbatched(tree, batch: tuple[int, ...]):
    return jax.tree.map(lambda x: x.reshape((*batch, *x.shape[1:])), tree)


def check_fits(spec: str, init, observation_space, action_space, expected: str, check_output) -> Any:
    """Traces ``init()`` (shapes only, nothing compiles) and ``check_output`` of its result;
    a failure is refused before compiling, naming the spaces' shapes and what was ``expected``;
    so is an init that draws an orthogonal matrix (``refuse_orthogonal``). Returns the
    parameters' shapes."""
    try:
        traced, shapes = jax.make_jaxpr(init, return_shape=True)()
        check_output(shapes)
    except Exception as error:
        raise ValueError(
            f"network {spec!r} does not fit the environment: observation {space_shapes(observation_space)}, "
            f"action space {action_space!r}; expected {expected}. {type(error).__name__}: {error}"
        ) from error
    refuse_orthogonal(spec, traced.jaxpr)
    return shapes


ORTHOGONAL_PRIMITIVES = frozenset({"qr", "householder_product", "geqrf", "geqp3", "orgqr"})
"""The QR decomposition's primitives: how an orthogonal initialiser draws its matrix."""


def refuse_orthogonal(spec: str, jaxpr) -> None:
    """``ValueError`` naming the fix when the traced init (``jaxpr``, sub-programs included)
    holds a QR decomposition: an orthogonal initialiser, which deadlocks XLA's CPU thread pool
    under purehr's vmap over seeds (found here, before anything runs vmapped)."""
    found = sorted(_primitives(jaxpr) & ORTHOGONAL_PRIMITIVES)
    if found:
        raise ValueError(
            f"network {spec!r}: its initialisation computes a QR decomposition ({', '.join(found)}): an orthogonal "
            "initialiser (flax's nn.initializers.orthogonal, the default recurrent_kernel_init of its LSTM and GRU "
            "cells), which deadlocks under purehr's vmap over seeds on a CPU; expected a Gaussian initialiser: "
            "kernel_init=nn.initializers.lecun_normal() or a scaled normal "
            "(nn.initializers.variance_scaling(gain**2, 'fan_in', 'normal')); docs/how-to/own_network.md"
        )


def _primitives(jaxpr) -> set[str]:
    """Every primitive's name in ``jaxpr`` and the programs its equations hold (jit, cond, scan)."""
    names = set()
    for equation in jaxpr.eqns:
        names.add(equation.primitive.name)
        for value in equation.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(inner, jax.extend.core.ClosedJaxpr):
                    names |= _primitives(inner.jaxpr)
                elif isinstance(inner, jax.extend.core.Jaxpr):
                    names |= _primitives(inner)
    return names
