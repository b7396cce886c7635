"""The driver of the algorithm: ``make_train`` runs every seed of ``make_ppo``'s update in one
jitted ``lax.scan`` over updates (``purehr.ppo.loop.run_updates``), with the seed keys and the
host callback around it. The multi-task runner in ``purehr.run`` drives the same loop with its
checkpoint hooks; that is why the scan over updates is outside and the vmap over seeds inside
(see docs/protocol.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purehr.envs.base import Environment
from purehr.ppo.algorithm import PPO, RunnerState, make_ppo
from purehr.ppo.compile_options import training_compiler_options
from purehr.ppo.config import PPOConfig, PPOHyperparams
from purehr.ppo.loop import Hook, HostSlot, UpdateLoop, call_host, every, run_updates
from purehr.types import EnvParamsSchedule, HostCallback


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


def host_env_steps(update, config: PPOConfig) -> np.ndarray:
    """Environment steps after each logged update, counted on the host in int64: the device
    counts updates only (int32 would wrap past 2**31 steps; see ``PPOConfig._check_budget``).
    A skipped update (update 0) has 0 steps."""
    return np.asarray(update, np.int64) * config.batch_size


@struct.dataclass
class TrainResult:
    runner: RunnerState  # leading seed axis
    metrics: dict[str, jax.Array]  # [seed, update]; env_steps is numpy int64, from the host


class _CallbackHooks:
    """``make_train``'s ``callback`` as the ``HostHooks`` its program calls: the metrics of
    the update, with ``env_steps`` counted on the host. An exception the callback raises is
    kept and stops the scan (raised inside the io_callback it would reach the caller as an
    XLA ``INTERNAL`` error); ``Trainer.__call__`` raises it once the program has returned."""

    def __init__(self, callback: HostCallback, config: PPOConfig):
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
    ``ppo`` the per-seed pieces (``ppo.policy(params)`` acts with trained parameters)."""

    config: PPOConfig
    ppo: PPO
    jitted: Callable[[jax.Array, PPOHyperparams | None], TrainResult]
    hparams: PPOHyperparams | None = None
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
    config: PPOConfig,
    env: Environment,
    env_params=None,
    *,
    callback: HostCallback | None = None,
    callback_interval: int = 1,
    env_params_schedule: EnvParamsSchedule | None = None,
    hparams: PPOHyperparams | None = None,
    runner_constraint: Callable[[RunnerState], RunnerState] | None = None,
) -> Trainer:
    """Every seed of PPO on ``env`` in one jitted call: ``make_train(...)(keys)``.

    Args:
      config, env, env_params, env_params_schedule: as for ``make_ppo``.
      callback: runs on the host every ``callback_interval`` updates with that update's
        metrics (NumPy, [seeds], plus ``env_steps``); returning ``False`` stops training at
        the next update and keeps the state reached. An exception it raises stops training
        there too and is raised by ``trainer(keys)`` (with a note naming the update).
      hparams: ``PPOHyperparams`` whose leaves are scalars or [seeds] (a sweep); default the
        config's.
      runner_constraint: pins the seed-batched runner's layout inside the jit (see
        ``purehr.devices.distributed.make_sharded_train``, which shards seeds across devices).

    Returns:
      A ``Trainer``: ``trainer(keys)`` with keys [seeds, 2] uint32 (``keys_for_seeds``) returns
      ``TrainResult(runner, metrics)``: the final ``RunnerState`` [seeds, ...] and every
      update's metrics [seeds, num_updates] (NaN, or 0 for integers, after a stop).
    """
    if not isinstance(callback_interval, int) or callback_interval < 1:
        raise ValueError(f"callback_interval={callback_interval!r}: expected a positive integer")
    ppo = make_ppo(config, env, env_params, env_params_schedule)
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
    loop = UpdateLoop(jax.vmap(ppo.update), ppo.num_updates, hooks, constrain)

    def train_seeds(keys: jax.Array, seed_hparams: PPOHyperparams | None) -> TrainResult:
        if seed_hparams is None:
            runner = jax.vmap(ppo.init)(keys)
        else:
            runner = jax.vmap(ppo.init)(keys, seed_hparams)
        (runner,), (output,) = run_updates([loop], [constrain(runner)], ppo.num_updates)
        return TrainResult(runner, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), output.metrics))

    jitted = jax.jit(train_seeds, compiler_options=training_compiler_options())
    return Trainer(config, ppo, jitted, hparams, callback_hooks)
