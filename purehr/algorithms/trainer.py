"""The driver of any algorithm: ``make_train`` runs every seed of an algorithm's update (the one
whose config class the config is) in one jitted ``lax.scan`` over updates
(``purehr.engine.loop.run_updates``), with the seed keys and the host callback around it. The
multi-task runner in ``purehr.run`` drives the same loop with its checkpoint hooks; that is why
the scan over updates is outside and the vmap over seeds inside (see docs/protocol.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purehr.algorithms.base import Algorithm, AlgorithmConfig
from purehr.algorithms.registry import make_algorithm
from purehr.engine.compile_options import training_compiler_options
from purehr.engine.loop import Hook, HostSlot, UpdateLoop, call_host, every, run_updates
from purehr.engine.seeds import raw_seed_keys
from purehr.envs.base import Environment
from purehr.types import EnvParamsSchedule, HostCallback


def host_env_steps(update, config: AlgorithmConfig) -> np.ndarray:
    """Environment steps after each logged update, counted on the host in int64: the device
    counts updates only (int32 would wrap past 2**31 steps; see ``PPOConfig._check_budget``).
    A skipped update (update 0) has 0 steps."""
    return np.asarray(update, np.int64) * config.batch_size


@struct.dataclass
class TrainResult:
    runner: Any  # leading seed axis
    metrics: dict[str, jax.Array]  # [seed, update]; env_steps is numpy int64, from the host


class _CallbackHooks:
    """``make_train``'s ``callback`` as the ``HostHooks`` its program calls: the metrics of
    the update, with ``env_steps`` counted on the host. An exception the callback raises is
    kept and stops the scan (raised inside the io_callback it would reach the caller as an
    XLA ``INTERNAL`` error); ``Trainer.__call__`` raises it once the program has returned."""

    def __init__(self, callback: HostCallback, config: AlgorithmConfig):
        self.callback, self.config = callback, config
        self.error: BaseException | None = None

    def on_update(self, loop: str, metrics: dict) -> bool | None:
        try:
            return self.callback(dict(metrics, env_steps=host_env_steps(metrics["update"], self.config)))
        except BaseException as error:  # kept whole: Trainer.__call__ raises it
            error.add_note(
                f"raised by make_train's callback after update {int(metrics['update'][0])}; training stopped there"
            )
            self.error = error
            return False

    def raise_kept_error(self) -> None:
        error, self.error = self.error, None
        if error is not None:
            raise error


@dataclass(frozen=True)
class Trainer:
    """What ``make_train`` returns: ``trainer(keys) -> TrainResult``. ``jitted(raw_keys,
    seed_hparams)`` is the jitted program itself (lower and compile it to time compilation),
    ``algorithm`` the per-seed pieces (``algorithm.policy(params)`` acts with trained parameters)."""

    config: AlgorithmConfig
    algorithm: Algorithm
    jitted: Callable[[jax.Array, Any | None], TrainResult]
    hparams: Any | None = None
    callback_hooks: _CallbackHooks | None = field(default=None, repr=False, compare=False)
    """Where the callback's exception waits for ``__call__`` (calling ``jitted`` yourself, read
    ``callback_hooks.error`` after it)."""

    def __call__(self, keys) -> TrainResult:
        keys = raw_seed_keys(keys)
        seed_hparams = None
        if self.hparams is not None:
            leaves = jax.tree.leaves(self.hparams)
            if any(jnp.shape(leaf) not in ((), (keys.shape[0],)) for leaf in leaves):
                raise ValueError(
                    f"hparams leaves must be scalars or have the seed axis {keys.shape[0]}; "
                    f"got shapes {[jnp.shape(leaf) for leaf in leaves]}"
                )
            seed_hparams = jax.tree.map(
                lambda x: jnp.broadcast_to(jnp.asarray(x, jnp.float32), (keys.shape[0],)), self.hparams
            )
        result = self.jitted(keys, seed_hparams)
        if self.callback_hooks is not None:
            jax.block_until_ready(result)
            jax.effects_barrier()  # every callback of the program has run
            self.callback_hooks.raise_kept_error()
        if not getattr(result.metrics["update"], "is_fully_addressable", True):
            return result  # spread over hosts (purehr.devices.distributed): env_steps = update * batch_size
        steps = host_env_steps(result.metrics["update"], self.config)
        return result.replace(metrics=dict(result.metrics, env_steps=steps))


def make_train(
    config: AlgorithmConfig,
    env: Environment,
    env_params=None,
    *,
    callback: HostCallback | None = None,
    callback_interval: int = 1,
    env_params_schedule: EnvParamsSchedule | None = None,
    hparams: Any | None = None,
    runner_constraint: Callable[[Any], Any] | None = None,
) -> Trainer:
    """Every seed of ``config``'s algorithm on ``env`` in one jitted call: ``make_train(...)(keys)``.

    Args:
      config, env, env_params, env_params_schedule: as for ``purehr.algorithms.registry.make_algorithm``.
      callback: runs on the host every ``callback_interval`` updates with that update's
        metrics (NumPy, [seeds], plus ``env_steps``); returning ``False`` stops training at
        the next update and keeps the state reached. An exception it raises stops training
        there too and is raised by ``trainer(keys)`` (with a note naming the update).
      hparams: the config's hyperparameter pytree (``PPOHyperparams``) whose leaves are scalars
        or [seeds] (a sweep); default the config's.
      runner_constraint: pins the seed-batched runner's layout inside the jit (see
        ``purehr.devices.distributed.make_sharded_train``, which shards seeds across devices).

    Returns:
      A ``Trainer``: ``trainer(keys)`` with keys [seeds, 2] uint32 (``keys_for_seeds``) returns
      ``TrainResult(runner, metrics)``: the final ``RunnerState`` [seeds, ...] and every
      update's metrics [seeds, num_updates] (NaN, or 0 for integers, after a stop).
    """
    if not isinstance(callback_interval, int) or callback_interval < 1:
        raise ValueError(f"callback_interval={callback_interval!r}: expected a positive integer")
    algorithm = make_algorithm(config, env, env_params, env_params_schedule)
    hooks = ()
    callback_hooks = None
    if callback is not None:
        callback_hooks = _CallbackHooks(callback, config)
        host = HostSlot(callback_hooks)
        call_back = functools.partial(host.on_update, "")
        hooks = (
            Hook(
                every(callback_interval),
                lambda runner, metrics: call_host(call_back, metrics, keep_going=True),
                stops=True,
            ),
        )
    constrain = runner_constraint if runner_constraint is not None else (lambda runner: runner)
    loop = UpdateLoop(jax.vmap(algorithm.update), algorithm.num_updates, hooks, constrain)

    def train_seeds(keys: jax.Array, seed_hparams: Any | None) -> TrainResult:
        if seed_hparams is None:
            runner = jax.vmap(algorithm.init)(keys)
        else:
            runner = jax.vmap(algorithm.init)(keys, seed_hparams)
        (runner,), (output,) = run_updates([loop], [constrain(runner)], algorithm.num_updates)
        return TrainResult(runner, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), output.metrics))

    jitted = jax.jit(train_seeds, compiler_options=training_compiler_options())
    return Trainer(config, algorithm, jitted, hparams, callback_hooks)
