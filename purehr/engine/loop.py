"""The scan over updates that every trainer in purehr runs, and the one way it calls the host.

    run_updates(loops, runners, length)                    inside one jit
      lax.scan over 1 + length iterations                  <- the scan is outside
        per loop: cond(still going, not the first) -> update   <- vmap over seeds inside the update
                  per hook: cond(due) -> hook              (evaluate, checkpoint, call back; PBT's
                                                            hook returns the runner to go on from)
        due: after an update, when hook.due says so; in the first iteration, an at_start hook
        of a loop that starts untrained (update_index == 0)

``make_train`` drives one loop, the protocol runner (``purehr.run.compiled.train_all``) one per task.
Every predicate comes from the update counter, which is the same for every seed of a loop,
so each ``cond`` stays a real branch rather than a ``select`` that runs both sides.

Host calls are ordered ``io_callback``s into a ``HostSlot``: the compiled program keeps the
slot, and whatever ``HostHooks`` object sits in it can be swapped between calls of the same
compiled program (a resume, a test, the next run of the same shape) without recompiling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.experimental import io_callback

Runner = Any  # a RunnerState with a leading seed axis
Metrics = dict[str, jax.Array]


# ----------------------------------------------------------------------------- host calls


class HostHooks(Protocol):
    """What a training program calls on the host; ``loop`` names the loop (a task, or "" for
    ``make_train``); arrays arrive as NumPy with a leading seed axis. A caller's further host
    calls go through ``HostSlot.forward`` by name."""

    def on_update(self, loop: str, metrics: dict) -> bool | None:
        """After an update; returning ``False`` stops that loop (where its hook ``stops``)."""

    def on_checkpoint(self, loop: str, runner: Any, evaluation: dict, showcase: dict | None) -> None:
        """After a checkpoint's evaluation (``showcase`` None: the quick evaluation)."""


class HostSlot:
    """The host end of a compiled program's callbacks: it forwards to ``target`` (a
    ``HostHooks``), which may be replaced between calls without recompiling.

    Operands become NumPy arrays here, once: the target then runs no JAX operation inside a
    callback (indexing a ``jax.Array`` there would dispatch a computation per metric and seed
    while the devices wait)."""

    def __init__(self, target: HostHooks | None = None):
        self.target = target

    def on_update(self, loop: str, metrics: dict) -> bool | None:
        return self.target.on_update(loop, jax.tree.map(np.asarray, metrics))

    def on_checkpoint(self, loop: str, runner, evaluation: dict, showcase: dict | None) -> None:
        runner, evaluation, showcase = jax.tree.map(np.asarray, (runner, evaluation, showcase))
        self.target.on_checkpoint(loop, runner, evaluation, showcase)

    def forward(self, method: str) -> Callable[..., Any]:
        """``target.<method>(loop, *operands)`` with the operands as NumPy: the host end of a
        caller's own hook, which the engine does not know (the target's method at call time)."""

        def call(loop: str, *operands):
            return getattr(self.target, method)(loop, *jax.tree.map(np.asarray, operands))

        return call


def call_host(function: Callable[..., Any], *operands, keep_going: bool = False, returns: Any = None) -> Any:
    """Traced: ``function(*operands)`` on the host, in program order (an ordered io_callback,
    which is why the vmap over seeds stays inside the scan: an ordered callback cannot be
    vmapped). With ``keep_going`` the result is a bool scalar, False only where ``function``
    returned False; with ``returns`` (``jax.ShapeDtypeStruct`` leaves) what ``function`` returns."""
    if not keep_going:
        return io_callback(function, returns, *operands, ordered=True)
    return io_callback(
        lambda *values: np.bool_(function(*values) is not False),
        jax.ShapeDtypeStruct((), jnp.bool_),
        *operands,
        ordered=True,
    )


# ----------------------------------------------------------------------------- the driver


@dataclass(frozen=True)
class Hook:
    """Done after an update when ``due(updates_done)`` holds: evaluate, checkpoint, call back.

    ``run(runner, metrics)`` returns None, or arrays that the scan stacks ([update, ...]; NaN,
    or 0 for integers, where it was not due). With ``stops`` it returns a bool scalar, and
    False ends the loop's updates with the state reached. With ``replaces_runner`` it returns
    the runner the loop continues from (population-based training's exploit/explore step).
    With ``at_start`` it also runs once before the first update when the loop starts untrained
    (``metrics`` are then NaN, 0 for integers: nothing was updated). A hook that does not read
    ``metrics`` says so (``reads_metrics=False``): it is then always given None."""

    due: Callable[[jax.Array], jax.Array]
    run: Callable[[Runner, Metrics | None], Any]
    at_start: bool = False
    stops: bool = False
    replaces_runner: bool = False
    reads_metrics: bool = True


def every(interval: int) -> Callable[[jax.Array], jax.Array]:
    """A ``Hook.due`` for every ``interval``-th update."""
    return lambda updates_done: updates_done % interval == 0


def _identity(runner: Runner) -> Runner:
    return runner


@dataclass(frozen=True)
class UpdateLoop:
    """One stream of updates in the scan: every seed of one environment (one task)."""

    update: Callable[[Runner], tuple[Runner, Metrics]]  # one update of every seed: vmap(ppo.update)
    num_updates: int  # the loop stops at update_index == num_updates
    hooks: tuple[Hook, ...] = ()
    constrain: Callable[[Runner], Runner] = _identity  # pins the runner's layout (a mesh)


@struct.dataclass
class LoopOutput:
    metrics: Metrics  # [update, seed]; NaN (0 for integers) where the loop did not update
    hooks: tuple  # each hook's stacked output ([update, ...]), None for hooks without one
    at_start: tuple  # each at_start hook's output before the first update (else None)


def not_due(shapes):
    """``shapes`` as NaN (0 for integers): what a branch that did not run returns."""
    return jax.tree.map(
        lambda s: (
            jnp.full(s.shape, jnp.nan, s.dtype)
            if jnp.issubdtype(s.dtype, jnp.floating)
            else jnp.zeros(s.shape, s.dtype)
        ),
        shapes,
    )


def _when(predicate: jax.Array, run: Callable, *operands):
    """``run(*operands)`` where ``predicate`` holds, else NaN (0 for integers) of its shapes.
    ``run_updates`` passes a jitted ``run`` (``_TracedOnce``): the shapes and the branch are one trace."""
    shapes = jax.eval_shape(run, *operands)
    return jax.lax.cond(predicate, run, lambda *_: not_due(shapes), *operands)


class _TracedOnce:
    """One ``jax.jit`` wrapper per function, so that every use of it in the program (the shapes
    ``_when`` asks for, the ``cond`` that runs it, a hook's at-start and after-update calls)
    hits jit's trace cache instead of tracing the function again: a plain function is traced
    anew by ``eval_shape`` and by each ``cond``. On the default protocol the update, the
    held-out evaluation and the showcase recording were traced two to four times each: tracing
    and lowering took 22.2 s on the 2-core CPU, 12.7 s traced once (docs/protocol.md, "Engine
    facts"). Trained states are bit-identical to the twice-traced program's; the held-out
    statistics agree to float32 rounding (XLA reduces some in another order)."""

    def __init__(self):
        self._jitted: dict[int, tuple[Callable, Callable]] = {}

    def __call__(self, function: Callable) -> Callable:
        if id(function) not in self._jitted:  # the function is kept beside its id: ids stay unique
            self._jitted[id(function)] = (function, jax.jit(function))
        return self._jitted[id(function)][1]


def _keep_going(*_) -> jax.Array:
    return jnp.bool_(True)


def _unchanged(runner: Runner, _metrics) -> Runner:
    return runner


def run_updates(
    loops: Sequence[UpdateLoop], runners: Sequence[Runner], length: int
) -> tuple[list[Runner], list[LoopOutput]]:
    """Traced: one ``lax.scan`` of ``length`` + 1 iterations. The first updates nothing and runs
    each ``at_start`` hook of a loop that starts untrained; each later one updates every loop
    that still has updates (loops with fewer updates, or resumed further, stop early) and runs
    its due hooks in order. Returns the final runners and each loop's outputs.

    The at-start calls sit in the scan's body rather than before the scan so that each hook is
    compiled once: XLA inlines every call site, and the protocol's checkpoint hook (held-out
    evaluations, full and quick, and the showcase) before the scan was a second copy of it. The
    main job's program compiles in 30.3-30.9 s instead of 32.7-33.1 s on the 2-core CPU, with
    the same states and evaluations (docs/protocol.md, "Compilation")."""
    traced_once = _TracedOnce()

    def step(loop: UpdateLoop, runner: Runner, going: jax.Array, first: jax.Array):
        untrained = jnp.logical_and(first, runner.update_index[0] == 0)  # the at-start iteration, untrained
        active = jnp.logical_and(jnp.logical_and(going, ~first), runner.update_index[0] < loop.num_updates)
        update = traced_once(loop.update)
        metric_shapes = jax.eval_shape(update, runner)[1]
        runner, metrics = jax.lax.cond(active, update, lambda r: (r, not_due(metric_shapes)), runner)
        runner = loop.constrain(runner)
        outputs = []
        for hook in loop.hooks:
            due = jnp.logical_and(active, hook.due(runner.update_index[0]))
            if hook.at_start:
                due = jnp.logical_or(due, untrained)
            run, given = traced_once(hook.run), metrics if hook.reads_metrics else None
            if hook.stops:
                going = jnp.logical_and(going, jax.lax.cond(due, run, _keep_going, runner, given))
                outputs.append(None)
            elif hook.replaces_runner:
                runner = loop.constrain(jax.lax.cond(due, run, _unchanged, runner, given))
                outputs.append(None)
            else:
                outputs.append(_when(due, run, runner, given))
        return runner, going, LoopOutput(metrics, tuple(outputs), ())

    def body(carry, _):
        runners, going, first = carry
        stepped = [step(loop, runner, flag, first) for loop, runner, flag in zip(loops, runners, going)]
        carry = ([s[0] for s in stepped], [s[1] for s in stepped], jnp.bool_(False))
        return carry, [s[2] for s in stepped]

    carry = (list(runners), [jnp.bool_(True)] * len(loops), jnp.bool_(True))
    (runners, _, _), outputs = jax.lax.scan(body, carry, None, length=length + 1)
    return runners, [_split_start(loop, output) for loop, output in zip(loops, outputs)]


def _split_start(loop: UpdateLoop, output: LoopOutput) -> LoopOutput:
    """The scan's rows [length + 1, ...] as ``LoopOutput``: row 0 (the at-start iteration) is
    each at_start hook's ``at_start`` output; the rest are the updates' rows."""
    rest = jax.tree.map(lambda rows: rows[1:], output)
    at_start = tuple(
        jax.tree.map(lambda rows: rows[0], stacked) if hook.at_start and stacked is not None else None
        for hook, stacked in zip(loop.hooks, output.hooks)
    )
    return rest.replace(at_start=at_start)
