"""The compiled training program of a run and the devices it runs on. Compiling takes far
longer than a small run trains, so each program is compiled once per process and kept
(``compiled_program``), keyed by everything it is compiled from; each has its own host slot,
and one run at a time holds it (``TrainingProgram.attached``), so a resume or a test in the same
process reuses it and two runs in one process never call each other's recorder.

The program runs in a worker thread while the main thread listens for Ctrl-C (``CtrlC``)."""

from __future__ import annotations

import json
import math
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import jax

from purehr.devices.distributed import make_mesh, select_devices
from purehr.engine.compile_options import one_shot_compiler_options, training_compiler_options
from purehr.engine.loop import HostSlot
from purehr.engine.seeds import keys_for_seeds
from purehr.run.compiled.train_all import TaskSetup, make_train_all


@dataclass
class TrainingProgram:
    """A compiled ``train_all`` and the slot its host callbacks call (``slot.target``: the
    recorder of the run that holds it)."""

    compiled: Any
    slot: HostSlot
    lock: threading.Lock = field(default_factory=threading.Lock)
    abandoned: threading.Thread | None = None
    """The worker a second Ctrl-C stopped waiting for: it calls the slot until it stops."""

    @contextmanager
    def attached(self, recorder):
        """The compiled program with ``recorder`` on its callbacks, for one run: a second run of
        the same program in this process waits until this one lets go (and, after a second
        Ctrl-C, until the abandoned program has stopped calling the slot)."""
        with self.lock:
            if self.abandoned is not None and self.abandoned.is_alive():
                print("waiting for the interrupted program to stop ...", file=sys.stderr, flush=True)
                self.abandoned.join()
            self.abandoned = None
            self.slot.target = recorder
            try:
                yield self.compiled
            finally:
                if self.abandoned is None:  # an abandoned program still calls its (silenced) recorder
                    self.slot.target = None


_PROGRAMS: dict[tuple, TrainingProgram] = {}
_COMPILING = threading.Lock()


def compiled_program(
    setups: list[TaskSetup],
    num_seeds: int,
    runners: dict,
    mesh=None,
    run_compile: Callable[[Callable[[], Any]], Any] | None = None,
) -> TrainingProgram:
    """``train_all(runners) -> runners`` compiled for these setups, seeds, precision, mesh and XLA options
    (``runners``: task -> the algorithm's state with a leading seed axis, placed as the program
    takes them). ``run_compile(compile)`` runs XLA's compilation (default: here; the protocol
    passes ``CtrlC().run``, so Ctrl-C is heard while it compiles); tracing stays in this thread,
    whose JAX settings (precision) it reads."""
    options = training_compiler_options()
    mesh_key = None if mesh is None else (tuple(mesh.shape.items()), tuple(d.id for d in mesh.devices.flat))
    key = (
        tuple(
            (
                s.name,
                s.config,
                s.protocol,
                json.dumps(s.task.env_kwargs(s.env), sort_keys=True, default=repr),
                s.schedule,
                s.population and s.population.identity(),
            )
            for s in setups
        ),
        num_seeds,
        bool(jax.config.jax_enable_x64),
        mesh_key,
        tuple(sorted(options.items())),
    )
    with _COMPILING:
        if key not in _PROGRAMS:
            slot = HostSlot()
            jitted = jax.jit(make_train_all(setups, slot), compiler_options=options)
            lowered = jitted.lower(runners)
            compiled = lowered.compile() if run_compile is None else run_compile(lowered.compile)
            _PROGRAMS[key] = TrainingProgram(compiled, slot)
        return _PROGRAMS[key]


def nothing_left_to_train(setups: list[TaskSetup], resumed_from: dict[str, int]) -> bool:
    """Every task resumes at its last update (a run stopped after its final checkpoint): there
    is nothing to compile or run."""
    return all(resumed_from.get(s.name, 0) >= s.algorithm.num_updates * s.config.batch_size for s in setups)


_ABANDONED: list[threading.Thread] = []
"""Computations a Ctrl-C stopped waiting for, in this process: its exit would wait for them."""


class CtrlC:
    """Ctrl-C (SIGINT) while a program compiles or runs. Python hears a signal only in its
    main thread, between bytecodes, and a compiled program blocks the thread that calls it
    until it ends; so ``run`` calls it in a worker thread while the calling thread waits and
    hears Ctrl-C as the ``KeyboardInterrupt`` of Python's own SIGINT handler (none is
    installed). The first calls ``on_first`` (the recorder then stops the program at its next
    update) and goes on waiting; the second, or the first when there is no ``on_first``,
    raises ``KeyboardInterrupt`` at once, leaving the worker to end on its own."""

    def __init__(self, on_first: Callable[[], None] | None = None):
        self.on_first = on_first
        self.interrupts = 0
        self.abandoned: threading.Thread | None = None  # the worker a second Ctrl-C left running

    def run(self, call: Callable[[], Any]) -> Any:
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                outcome["value"] = call()
            except BaseException as error:  # handed to the waiting thread
                outcome["error"] = error
            finally:
                done.set()

        worker = threading.Thread(target=work, name="purehr-program", daemon=True)
        worker.start()
        while not done.is_set():
            try:
                done.wait(0.25)
            except KeyboardInterrupt:
                self._heard(worker)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    def _heard(self, worker: threading.Thread) -> None:
        self.interrupts += 1
        if self.interrupts == 1 and self.on_first is not None:
            try:
                self.on_first()
                return
            except KeyboardInterrupt:  # the second came while the first was being handled
                self.interrupts += 1
        _ABANDONED.append(worker)
        self.abandoned = worker
        raise KeyboardInterrupt


def abandoned_program_running() -> bool:
    """A program a Ctrl-C stopped waiting for still runs in this process: its exit would wait
    for it (``os._exit`` does not)."""
    return any(worker.is_alive() for worker in _ABANDONED)


def protocol_mesh(setups: list[TaskSetup], seeds: list[int], devices):
    """The device mesh for this run, or None on one device (every task shares it: the
    environment axis is split only as far as every task's num_envs allows)."""
    chosen = select_devices(devices)
    if len(chosen) == 1:
        return None
    return make_mesh(len(seeds), math.gcd(*(s.config.num_envs for s in setups)), chosen)


def initial_runners(setups: list[TaskSetup], seeds: list[int]) -> dict[str, Any]:
    """task -> the initial RunnerState of every seed (leading axis: seeds), from the seeds' keys.
    Compiled and computed to the end under ``CtrlC``: the first allocation of a large state can
    take long (or never end), and Ctrl-C is heard meanwhile."""
    keys = keys_for_seeds(seeds)
    options = one_shot_compiler_options()

    def build(setup: TaskSetup):
        lowered = jax.jit(jax.vmap(setup.algorithm.init)).lower(keys)
        return CtrlC().run(lambda: jax.block_until_ready(lowered.compile(compiler_options=options)(keys)))

    return {setup.name: build(setup) for setup in setups}
