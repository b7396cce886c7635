"""The functional environment interface every purehr task implements.

Environments hold no state: ``reset`` and ``step`` are pure functions of a key, a state and
a params pytree, so they can be jitted, vmapped over seeds and scanned over time, and the
params (difficulty, physics constants) can change inside a training scan.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs import spaces
from purehr.types import StepResult

StateT = TypeVar("StateT")
ParamsT = TypeVar("ParamsT")


class Environment(Generic[StateT, ParamsT]):
    """Base class. ``info`` always holds the same keys with the same shapes (scan needs it);
    it includes ``success`` (bool) for every task."""

    name: str = "environment"
    defines_success: bool = True
    """False where ``info["success"]`` is always False because the environment has no notion of
    success (most gymnax and Brax tasks): evaluations then report ``success_rate`` as NaN."""

    @property
    def default_params(self) -> ParamsT:
        raise NotImplementedError

    def reset(self, key: jax.Array, params: ParamsT | None = None) -> tuple[Any, StateT]:
        raise NotImplementedError

    def step(self, key: jax.Array, state: StateT, action: jax.Array, params: ParamsT | None = None) -> StepResult:
        raise NotImplementedError

    def observation_space(self, params: ParamsT | None = None):
        raise NotImplementedError

    def action_space(self, params: ParamsT | None = None):
        raise NotImplementedError

    def max_episode_steps(self, params: ParamsT | None = None) -> int:
        raise NotImplementedError

    def diagnostics(self, info: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """Task-specific per-step scalars to average into the training log (see docs/protocol.md)."""
        return {}


TRAINING_NEEDS = ("name", "default_params", "reset", "step", "observation_space", "action_space", "diagnostics")
"""What training reads of an environment (the wrappers, ``make_ppo``): ``check_environment``
names what is missing before anything is traced."""
_OWN_IMPLEMENTATION = ("default_params", "reset", "step", "observation_space", "action_space")
"""What an ``Environment`` subclass must define itself (the base's versions raise)."""


def check_environment(env: Any) -> None:
    """``TypeError`` naming what ``env`` lacks of ``TRAINING_NEEDS`` (a duck-typed environment
    without ``name`` used to fail deep in the wrappers), or, for a subclass of ``Environment``,
    what it left unimplemented."""
    shown = type(env).__name__
    missing = [attribute for attribute in TRAINING_NEEDS if not _has(env, attribute)]
    if missing:
        raise TypeError(
            f"{shown} lacks {missing}, which training needs of an environment (purehr.envs.base.Environment: "
            f"{', '.join(TRAINING_NEEDS)}); subclass Environment to inherit name and diagnostics"
        )
    if isinstance(env, Environment):
        unimplemented = sorted(
            attribute
            for attribute in _OWN_IMPLEMENTATION
            if getattr(type(env), attribute, None) is getattr(Environment, attribute)
        )
        if unimplemented:
            raise TypeError(f"{shown} does not implement {unimplemented} (purehr.envs.base.Environment leaves them)")
    if not isinstance(env.name, str) or not env.name:
        raise TypeError(f"{shown}.name is {env.name!r}; expected a non-empty string (the logs name the task by it)")
    check_step_outputs(env)


_CHECKED_STEPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Environments whose reset and step outputs were checked (``make_ppo`` checks every build)."""
FLAG = ("b", ())
"""terminated, truncated, info["success"]: a bool scalar (a float flag made GAE bootstrap part
of the next value; a float success would be averaged as a rate)."""
NUMBER = ("biuf", ())


def check_step_outputs(env: Any) -> None:
    """``TypeError`` naming the first output of ``reset`` or ``step`` (observation, next state,
    reward, terminated, truncated, info["success"]) whose dtype or shape is not what training
    takes, read from ``jax.eval_shape`` (one trace, nothing compiled). A wrong shape otherwise
    surfaced as a flax traceback or JAX's "carry[5]" deep inside the training scan."""
    try:
        if env in _CHECKED_STEPS:
            return
    except TypeError:  # an unhashable environment: checked at every call
        pass
    params = env.default_params
    observation_space, action_space = env.observation_space(params), env.action_space(params)

    def first_step(key):
        observation, state = env.reset(key, params)
        return (observation, state), env.step(key, state, action_space.sample(key), params)

    (first_observation, state), step = jax.eval_shape(first_step, jax.random.PRNGKey(0))
    shown = type(env).__name__
    _check_observation(f"{shown}.reset", first_observation, observation_space)
    if not (isinstance(step, tuple) and len(step) == 6):
        raise TypeError(
            f"{shown}.step returns {_described(step)}; expected (observation, state, reward, terminated, "
            "truncated, info)"
        )
    observation, next_state, reward, terminated, truncated, info = step
    _check_observation(f"{shown}.step", observation, observation_space)
    _check_state(f"{shown}.step", state, next_state)
    _check_leaf(f"{shown}.step: reward", reward, NUMBER, "a float or integer dtype and shape ()")
    _check_leaf(f"{shown}.step: terminated", terminated, FLAG)
    _check_leaf(f"{shown}.step: truncated", truncated, FLAG)
    if not isinstance(info, Mapping) or "success" not in info:
        raise TypeError(f"{shown}.step: info is {_described(info)}; expected a dict holding 'success' (bool)")
    _check_leaf(f"{shown}.step: info['success']", info["success"], FLAG)
    try:
        _CHECKED_STEPS[env] = True
    except TypeError:
        pass


def _check_observation(where: str, observation: Any, space: Any) -> None:
    """Each leaf of the shape its Box says (other spaces are named by ``check_spaces``)."""
    if isinstance(space, spaces.Box):
        expected = [("observation", observation, tuple(space.shape))]
    elif isinstance(space, spaces.Dict) and all(isinstance(s, spaces.Box) for s in space.spaces.values()):
        if not isinstance(observation, Mapping) or set(observation) != set(space.spaces):
            raise TypeError(
                f"{where}: observation is {_described(observation)}; expected a dict with the keys "
                f"{sorted(space.spaces)} of observation_space"
            )
        expected = [(f"observation[{k!r}]", observation[k], tuple(s.shape)) for k, s in space.spaces.items()]
    else:
        return
    for label, leaf, shape in expected:
        _check_leaf(
            f"{where}: {label}", leaf, ("biuf", shape), f"{shape}, the shape of observation_space", shape_only=True
        )


def _check_state(where: str, state: Any, next_state: Any) -> None:
    """The next state as ``reset`` returned it: the scan over steps carries it."""
    before, structure = jax.tree_util.tree_flatten_with_path(state)
    after, next_structure = jax.tree_util.tree_flatten_with_path(next_state)
    if structure != next_structure:
        raise TypeError(
            f"{where}: the next state is {next_structure}; expected the structure reset returned, {structure}"
        )
    for (path, old), (_, new) in zip(before, after):
        if (old.shape, old.dtype) != (new.shape, new.dtype):
            raise TypeError(
                f"{where}: the next state's {jax.tree_util.keystr(path)} has dtype {new.dtype} and shape "
                f"{tuple(new.shape)}; expected dtype {old.dtype} and shape {tuple(old.shape)}, as reset returned it"
            )


def _check_leaf(
    label: str, leaf: Any, rule: tuple[str, tuple], expected: str | None = None, shape_only: bool = False
) -> None:
    kinds, shape = rule
    if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
        raise TypeError(f"{label} is {_described(leaf)}; expected an array")
    dtype = np.dtype(leaf.dtype)
    if dtype.kind in kinds and tuple(leaf.shape) == shape:
        return
    if shape_only and dtype.kind in kinds:
        raise TypeError(f"{label} has shape {tuple(leaf.shape)}; expected {expected}")
    expected = expected or f"dtype {'bool' if kinds == 'b' else 'a number'} and shape {shape}"
    raise TypeError(f"{label} has dtype {dtype} and shape {tuple(leaf.shape)}; expected {expected}")


def _described(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return f"a {type(value).__name__}"


def _has(env: Any, attribute: str) -> bool:
    """Declared on the class (a property is not evaluated here), else found on the instance."""
    if hasattr(type(env), attribute):
        return True
    try:
        getattr(env, attribute)
    except AttributeError:
        return False
    return True


def check_env_params(env: Any, env_params: Any) -> None:
    """``TypeError`` unless ``env_params`` is of the type of ``env.default_params`` (a dict of
    fields is not: the environment reads them as attributes)."""
    default = env.default_params
    if default is None or isinstance(env_params, type(default)):
        return
    fields = [field.name for field in dataclasses.fields(default)] if dataclasses.is_dataclass(default) else []
    given = [name for name in env_params if name in fields] if isinstance(env_params, Mapping) else []
    example = f"env.default_params.replace({(given or fields)[0]}=...)" if fields else "env.default_params"
    raise TypeError(
        f"env_params is a {type(env_params).__name__}; expected the environment's parameters, a "
        f"{type(default).__name__} (e.g. {example})"
    )


def freeze_after_done(done: jax.Array, before: Any, after: Any) -> Any:
    """``before`` where the episode is already ``done``, else ``after``, leaf by leaf: an
    evaluation scan runs every episode for the full horizon, and an ended episode's
    observation and state stay as they were at its end."""
    return jax.tree.map(lambda old, new: jnp.where(done, old, new), before, after)


def varying_with(tree: Any, like: Any) -> Any:
    """``tree`` unchanged, each leaf made to depend on every leaf of ``like``: a scan's first
    carry built from constants, batched from the start under every vmap that batches ``like``.

    Why: JAX batches a scan's body once more each time a carry that started unbatched comes
    out batched (a fixed point), and the carries of an episode or of PPO's loss sums turn
    batched one after another: three passes over the body under each vmap (seeds, episodes)
    instead of one. The dependence is ``select(bits == bits, x, x)`` on integer bits, which
    XLA folds into ``x`` (and drops what only ``like`` needed): the compiled program is the
    same (docs/protocol.md, "Compilation")."""
    anchor = jnp.all(jnp.stack([_equals_itself(leaf) for leaf in jax.tree.leaves(like)]))
    return jax.tree.map(lambda leaf: jnp.where(anchor, leaf, leaf), tree)


def _equals_itself(value: Any) -> jax.Array:
    """True, as an integer comparison XLA folds to a constant (floats compared as their bits:
    NaN equals itself there)."""
    value = jnp.asarray(value)
    if value.dtype == jnp.bool_:
        value = value.astype(jnp.uint8)
    elif jnp.issubdtype(value.dtype, jnp.inexact):
        value = jax.lax.bitcast_convert_type(value, jnp.dtype(f"uint{value.dtype.itemsize * 8}"))
    return jnp.all(value == value)


def all_finite(tree: Any) -> jax.Array:
    """True when every floating leaf of ``tree`` is finite (integer leaves always are)."""
    flags = [
        jnp.all(jnp.isfinite(leaf))
        for leaf in jax.tree.leaves(tree)
        if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.inexact)
    ]
    return jnp.all(jnp.stack(flags)) if flags else jnp.bool_(True)


def all_finite_in_one_reduction(tree: Any) -> jax.Array:
    """``all_finite``, as one reduction over every floating leaf ravelled into one vector, where
    ``all_finite`` reduces each leaf apart: for a check run every update over many small leaves
    (SAC's freeze: 148 parameter and optimiser-state arrays, 148 reductions), at the cost of a copy."""
    leaves = [jnp.ravel(leaf) for leaf in jax.tree.leaves(tree) if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.inexact)]
    return jnp.all(jnp.isfinite(jnp.concatenate(leaves))) if leaves else jnp.bool_(True)


def end_if_not_finite(step: StepResult, finite: jax.Array) -> StepResult:
    """A step whose next state (or reward) is no longer finite ends the episode as terminated,
    never truncated, so PPO does not bootstrap a value from it; its reward is 0, its success
    False, non-finite observation entries read 0 and ``info["nonfinite_state"]`` says so. A
    finite step passes through unchanged (``nonfinite_state`` False)."""
    observation, state, reward, terminated, truncated, info = step
    observation = jax.tree.map(lambda x: jnp.where(jnp.isfinite(x), x, jnp.zeros((), x.dtype)), observation)
    info = dict(info, success=jnp.logical_and(info["success"], finite), nonfinite_state=jnp.logical_not(finite))
    return (
        observation,
        state,
        jnp.where(finite, reward, jnp.zeros((), reward.dtype)),
        jnp.logical_or(terminated, jnp.logical_not(finite)),
        jnp.logical_and(truncated, finite),
        info,
    )
