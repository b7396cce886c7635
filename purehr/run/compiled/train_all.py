"""Every task and every seed in one compiled program.

    train_all(runners)                             one jax.jit, on purehr.engine.loop.run_updates
      per task: cond(update_index == 0) -> checkpoint the initial state (target 0)
      lax.scan over the longest task's updates     <- scan outside
        per task: cond(still has updates) -> vmap(update) over seeds   <- vmap inside
                  io_callback(log this update's metrics)   (hook, every update; False: stop)
                  cond(update crossed a checkpoint target, or was the last)   (hook)
                    -> held-out evaluation (full, with a showcase episode, at every
                       full_eval_interval-th target; quick between), vmapped over seeds, on device;
                       grouped (group_quick_evaluations): a quick checkpoint's state waits on the
                       host, and at the full checkpoint the group's parameters come back and are
                       evaluated at once, vmapped over the group (one evaluation's length)
                    -> with --pbt: fitness, and where due the exploit/explore step on the
                       seed axis (purehr.population), so the state saved is the one trained on
                    -> io_callback(save every seed's full state)

Predicates come from the update counter alone, which is the same for every seed of a task,
so each ``cond`` stays a real branch rather than a ``select`` running both sides. A task
whose budget is spent stops updating while the others go on. Resuming is the same program
started from restored runners: a task restored at update k simply runs out of updates k
iterations early.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.algorithms.base import Algorithm, AlgorithmConfig
from purehr.engine.loop import Hook, HostSlot, UpdateLoop, call_host, every, not_due, run_updates
from purehr.envs.base import Environment
from purehr.population import PopulationStep
from purehr.protocol_settings import ProtocolSettings
from purehr.tasks import Task


@dataclass(frozen=True)
class TaskSetup:
    task: Task
    env: Environment
    env_params: Any
    eval_env_params: Any
    config: AlgorithmConfig
    algorithm: Algorithm
    protocol: ProtocolSettings  # checkpoint and evaluation cadence
    population: PopulationStep | None = None  # population-based training (docs/pbt.md)
    schedule: Any = None  # what the environment-parameter schedule was built from (hashable), if any

    @property
    def name(self) -> str:
        return self.task.name

    def abstract_state(self) -> Any:
        """The shapes and dtypes of one seed's ``RunnerState`` (traced, nothing compiled): what a
        checkpoint is restored into."""
        return jax.eval_shape(self.algorithm.init, jax.random.PRNGKey(0))

    def evaluate(self, network_params, num_episodes: int | None = None) -> dict[str, jax.Array]:
        policy = self.algorithm.policy(network_params)
        episodes = self.protocol.eval_episodes if num_episodes is None else num_episodes
        metrics = self.task.heldout_evaluation(self.env, self.eval_env_params, policy, num_episodes=episodes)
        return dict(metrics, episodes=jnp.asarray(episodes, jnp.int32))

    def full_evaluation_due(self, update_index: jax.Array) -> jax.Array:
        """The initial state, every ``full_eval_interval``-th target and the last update get the
        full evaluation and a showcase; the targets between a quick one. Only meaningful at an
        update that saves (``crossed_target``)."""
        return full_evaluation_due(self.config, self.protocol, update_index)

    @property
    def groups_quick_evaluations(self) -> bool:
        """Whether the quick checkpoints are evaluated with their group at the next full one
        (``ProtocolSettings.group_quick_evaluations``; never under PBT, whose step reads each)."""
        grouped = self.protocol.group_quick_evaluations and self.protocol.full_eval_interval > 1
        return grouped and self.population is None

    def showcase(self, network_params) -> dict[str, jax.Array]:
        return self.task.record_showcase(self.env, self.eval_env_params, self.algorithm.policy(network_params))

    def crossed_target(self, update_index: jax.Array) -> jax.Array:
        """True when the update that brought the count to ``update_index`` crossed a target
        (or was the last one): the first update at or beyond each target saves. Looked up in
        the schedule the host computed in Python ints, so it stays exact at any budget (no
        int32 ``update * batch_size`` on the device)."""
        return checkpoint_due(self.config, self.protocol, update_index)


@functools.lru_cache(maxsize=32)
def checkpoint_schedule(config: AlgorithmConfig, protocol: ProtocolSettings) -> tuple[np.ndarray, np.ndarray]:
    """The updates after which a run saves, ascending (int32), and whether each gets the full
    evaluation (bool). Exact integer arithmetic on the host: update 0 (the initial state), the
    first update ``u`` with ``u * batch_size >= k * checkpoint_interval`` for every target
    ``k * checkpoint_interval <= total``, and the last update; full at update 0, the last, and
    every ``full_eval_interval``-th target (the protocol's settings; the batch and the updates are
    the algorithm's)."""
    batch, interval, last = config.batch_size, protocol.checkpoint_interval, config.num_updates
    if interval <= batch:  # every update passes at least one target
        updates = range(last + 1)
    else:
        targets = last * batch // interval
        updates = sorted({0, last} | {-(-k * interval // batch) for k in range(1, targets + 1)})
    full = [u in (0, last) or (u * batch // interval) % protocol.full_eval_interval == 0 for u in updates]
    return np.asarray(updates, np.int32), np.asarray(full, bool)


def quick_group_size(config: AlgorithmConfig, protocol: ProtocolSettings) -> int:
    """The most quick checkpoints between two full ones in the schedule (at least 1): the slots
    of a grouped evaluation."""
    _, full = checkpoint_schedule(config, protocol)
    longest = run = 0
    for is_full in full:
        run = 0 if is_full else run + 1
        longest = max(longest, run)
    return max(longest, 1)


def population_updates(config: AlgorithmConfig, protocol: ProtocolSettings, interval: int) -> tuple[int, ...]:
    """The checkpoint updates after which population-based training's step fires: every
    ``interval``-th checkpoint target, never the initial state or the last update (the final
    parameters are the ones trained)."""
    updates, _ = checkpoint_schedule(config, protocol)
    batch, every_steps = config.batch_size, protocol.checkpoint_interval
    last = config.num_updates
    return tuple(int(u) for u in updates if 0 < u < last and (u * batch // every_steps) % interval == 0)


def checkpoint_due(config: AlgorithmConfig, protocol: ProtocolSettings, update_index: jax.Array) -> jax.Array:
    """Whether the run saves after ``update_index`` updates (traceable; see ``checkpoint_schedule``)."""
    updates, _ = checkpoint_schedule(config, protocol)
    return jnp.asarray(updates)[_schedule_index(updates, update_index)] == update_index


def full_evaluation_due(config: AlgorithmConfig, protocol: ProtocolSettings, update_index: jax.Array) -> jax.Array:
    """Whether the checkpoint after ``update_index`` updates gets the full evaluation."""
    updates, full = checkpoint_schedule(config, protocol)
    return jnp.asarray(full)[_schedule_index(updates, update_index)]


def _schedule_index(updates: np.ndarray, update_index: jax.Array) -> jax.Array:
    """Where ``update_index`` is (or would be) in the ascending ``updates``, clamped to it."""
    position = jnp.searchsorted(jnp.asarray(updates), jnp.asarray(update_index, jnp.int32))
    return jnp.minimum(position, len(updates) - 1)


def make_train_all(setups: list[TaskSetup], host: HostSlot) -> Callable[[dict], dict]:
    """Returns ``train_all(runners) -> runners`` (runners: task name -> RunnerState with a
    leading seed axis), ready for ``jax.jit``; it calls ``host`` (its ``on_update`` after every
    update, its ``on_checkpoint`` at every checkpoint), whose target may change between calls."""
    longest = max(setup.algorithm.num_updates for setup in setups)

    def task_loop(setup: TaskSetup) -> UpdateLoop:
        showcase_seeds = jax.jit(jax.vmap(setup.showcase))  # traced once for full and quick (its shapes)
        grouped = setup.groups_quick_evaluations
        quick_evaluation = jax.vmap(lambda p: setup.evaluate(p, setup.protocol.quick_eval_episodes))
        if grouped:  # traced once for the quick branch's shapes and the group's evaluation
            quick_evaluation = jax.jit(quick_evaluation)

        def full(params):
            if grouped:  # the quick checkpoints since the last full one, before this one's save
                evaluate_group(setup, host, quick_evaluation, params)
            return jax.vmap(setup.evaluate)(params), showcase_seeds(params), jnp.bool_(True)

        def quick(params):
            no_showcase = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(showcase_seeds, params))
            if grouped:  # evaluated with its group at the next full checkpoint
                return not_due(jax.eval_shape(quick_evaluation, params)), no_showcase, jnp.bool_(False)
            return quick_evaluation(params), no_showcase, jnp.bool_(False)

        def save(runner, evaluation, showcase, has_showcase, params=None) -> None:
            if params is not None and not bool(has_showcase):
                host.forward("on_deferred_checkpoint")(setup.name, runner, params)
            else:
                host.on_checkpoint(setup.name, runner, evaluation, showcase if bool(has_showcase) else None)

        def checkpoint(runner, _metrics):
            if setup.protocol.full_eval_interval == 1:
                evaluation, showcase, recorded = full(setup.algorithm.network_params(runner))
            else:  # a real branch: the predicate comes from the update counter, the same for all seeds
                evaluation, showcase, recorded = jax.lax.cond(
                    setup.full_evaluation_due(runner.update_index[0]),
                    full,
                    quick,
                    setup.algorithm.network_params(runner),
                )
            if setup.population is not None:  # the saved state is the one the population continues from
                runner, record = setup.population(
                    runner,
                    evaluation,
                    setup.algorithm.diverged_at_update(runner),
                    setup.algorithm.population_fields,
                )
                evaluation = dict(evaluation, **record)
            params = (setup.algorithm.network_params(runner),) if grouped else ()
            call_host(save, runner, evaluation, showcase, recorded, *params)
            return runner if setup.population is not None else None  # else nothing for the scan to stack

        def log(_runner, metrics) -> jax.Array:
            return call_host(functools.partial(host.on_update, setup.name), metrics, keep_going=True)

        return UpdateLoop(
            jax.vmap(setup.algorithm.update),
            setup.algorithm.num_updates,
            # the log hook stops the task where the host says so (Ctrl-C); the update it logged
            # still checkpoints when due
            hooks=(
                Hook(every(1), log, stops=True),
                Hook(
                    setup.crossed_target,
                    checkpoint,
                    at_start=True,
                    replaces_runner=setup.population is not None,
                    reads_metrics=False,
                ),
            ),
        )

    loops = [task_loop(setup) for setup in setups]

    def train_all(runners: dict) -> dict:
        final, _ = run_updates(loops, [runners[setup.name] for setup in setups], longest)
        return {setup.name: runner for setup, runner in zip(setups, final)}

    return train_all


def evaluate_group(setup: TaskSetup, host: HostSlot, quick_evaluation: Callable, params) -> None:
    """Traced: the held quick checkpoints' parameters back from the host (``[slot, seed, ...]``)
    and their quick evaluations, vmapped over the slots, handed to the host. The slot count is
    ``quick_group_size``; a group with none held (the first, a resumed one) evaluates nothing:
    the count is a host value, the same for every seed, so the ``cond`` is a real branch."""
    slots = quick_group_size(setup.config, setup.protocol)
    like = jax.tree.map(lambda x: jax.ShapeDtypeStruct((slots, *x.shape), x.dtype), params)
    returns = (like, jax.ShapeDtypeStruct((), jnp.int32))
    held, count = call_host(lambda: stack_held(host.forward("pending_params")(setup.name), like), returns=returns)
    group = jax.jit(jax.vmap(quick_evaluation))  # one trace for the cond's branch and its shapes
    evaluations = jax.lax.cond(count > 0, group, lambda p: not_due(jax.eval_shape(group, p)), held)
    call_host(functools.partial(host.forward("on_group_evaluations"), setup.name), evaluations)


def stack_held(held: list, like: Any) -> tuple[Any, np.ndarray]:
    """(The held parameters stacked as ``like``, ``[group slot, seed, ...]``, the slots past the
    last held one zero; how many are held): what the program evaluates as one group."""
    held = list(held)
    slots = jax.tree.leaves(like)[0].shape[0]
    if len(held) > slots:
        raise RuntimeError(f"{len(held)} quick checkpoints held, more than a group's {slots}")

    def stacked(shape, *leaves):
        out = np.zeros(shape.shape, shape.dtype)
        if leaves:
            out[: len(leaves)] = np.stack(leaves)
        return out

    return jax.tree.map(stacked, like, *held), np.int32(len(held))
