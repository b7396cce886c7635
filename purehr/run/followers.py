"""The other processes of a ``jax.distributed`` run. Process 0 alone reads and writes the run
directory; it tells the others, once, either the ``RunPlan`` (and where each task resumes) or
why it stopped, so they never wait for a program that will not start. Each follower then
builds the same program from the plan, takes process 0's states and runs its share."""

from __future__ import annotations

import time

import jax
import numpy as np

from purehr.devices.distributed import (
    broadcast_json,
    broadcast_tree,
    gather_to_host,
    shard_runner,
    wait_for_all_processes,
)
from purehr.run.compiled.program import compiled_program, initial_runners, nothing_left_to_train, protocol_mesh
from purehr.run.outcome import RunFailed, RunSummary
from purehr.run.planning.preparation import RunAlreadyFinished
from purehr.run.planning.run_plan import RunPlan


class Followers:
    """Process 0's end: sends the plan, or the error, exactly once (one process: nothing to send)."""

    def __init__(self) -> None:
        self.sent = jax.process_count() == 1

    def send(self, plan: RunPlan, resumed_from: dict[str, int]) -> None:
        if not self.sent:
            self.sent = True
            broadcast_json({"plan": plan.to_json(), "resumed_from": resumed_from})

    def fail(self, error: BaseException) -> None:
        if not self.sent:
            self.sent = True
            broadcast_json({"error": f"{type(error).__name__}: {error}", "kind": type(error).__name__})


def follow_primary(started: float, devices) -> RunSummary:
    """A process other than 0 under ``jax.distributed``: it takes process 0's plan and restored
    states, runs its share of the same compiled program (the host callbacks run in process 0,
    which owns device 0) and writes nothing."""
    message = broadcast_json()
    if "error" in message:
        kind = RunAlreadyFinished if message["kind"] == "RunAlreadyFinished" else RunFailed
        raise kind(f"process 0 stopped before training: {message['error']}")
    plan = RunPlan.from_json(message["plan"])
    setups = plan.setups()
    mesh = protocol_mesh(setups, plan.seeds, devices)
    initial = initial_runners(setups, plan.seeds)
    runners = broadcast_tree({name: jax.tree.map(np.asarray, runner) for name, runner in initial.items()})
    if nothing_left_to_train(setups, message["resumed_from"]):  # process 0 compiles nothing either
        return RunSummary(plan.run_dir, time.perf_counter() - started, 0.0, message["resumed_from"], 0.0, 0.0, runners)
    runners = {name: shard_runner(runner, mesh) for name, runner in runners.items()}
    compile_started = time.perf_counter()
    compiled = compiled_program(setups, len(plan.seeds), runners, mesh)
    compile_s = time.perf_counter() - compile_started
    wait_for_all_processes("train")
    final = gather_to_host(jax.block_until_ready(compiled.compiled(runners)))
    return RunSummary(plan.run_dir, time.perf_counter() - started, compile_s, message["resumed_from"], 0.0, 0.0, final)
