"""What the manifest says as a run goes: "running" before anything trains (a new run's manifest
with the baselines it is judged against, or a resumed run's with this resume appended), then
"finished", "diverged", "failed" or "interrupted" (Ctrl-C, SIGTERM) with the timings. The status
is written before the caller hears of it (``purehr.run.outcome``), so a run directory always
says how its last process ended."""

from __future__ import annotations

import copy
import datetime
import sys
import time
from typing import Any

from purehr.devices.distributed import describe_mesh
from purehr.engine.user_network import describe
from purehr.run.baselines import evaluate_baselines
from purehr.run.compiled.train_all import TaskSetup
from purehr.run.host.progress import format_duration
from purehr.run.outcome import RunSummary
from purehr.run.planning.run_plan import RunPlan, current_precision
from purehr.run.store.machine import environment_description
from purehr.run.store.record import recorded_precision
from purehr.run.store.run_dir import RunDirectory

PROTOCOL_TEXT = (
    "PPO per docs/protocol.md: every task x seed trained in one jax.jit (scan over updates "
    "outside, vmap over seeds inside); checkpoint at the first update at or beyond each "
    "multiple of checkpoint_interval (and at the last update) with held-out evaluation "
    "on the device; deterministic policies for evaluation."
)


def mark_running(
    run_dir: RunDirectory,
    plan: RunPlan,
    setups: list[TaskSetup],
    resumed_from: dict[str, int],
    quarantined: list[dict[str, str]],
    invocation: dict[str, Any],
    mesh,
) -> None:
    """The manifest says "running" before anything trains; ``resumed_from`` and ``quarantined``
    (a resume: where each task continues, what was set aside) go into the resume's entry, as
    do ``invocation``'s command and run config (a new run's go at the top level)."""
    if plan.manifest is None:
        manifest = _new_manifest(plan, setups, invocation)
    else:
        manifest = _resumed_manifest(plan, resumed_from, quarantined, invocation)
    manifest.update(status="running", tracking=plan.tracking.to_json())
    manifest["mesh"] = None if mesh is None else describe_mesh(mesh)
    run_dir.write_manifest(manifest)


def _new_manifest(plan: RunPlan, setups: list[TaskSetup], invocation: dict[str, Any]) -> dict[str, Any]:
    print("evaluating the baselines and floor policies on the held-out set ...", file=sys.stderr, flush=True)
    baselines_started = time.perf_counter()
    baselines = evaluate_baselines(setups, lambda message: print(f"  {message}", file=sys.stderr, flush=True))
    print(f"  done in {format_duration(time.perf_counter() - baselines_started)}", file=sys.stderr, flush=True)
    manifest = environment_description()
    manifest.update(
        status="running",
        tasks=plan.tasks,
        seeds=plan.seeds,
        command=invocation["command"],
        run_config=invocation["run_config"],
        configs={s.name: s.config.to_dict() for s in setups},
        algorithms={s.name: s.algorithm.name for s in setups},
        protocol_settings={s.name: s.protocol.to_dict() for s in setups},
        setting_sources=plan.sources,
        protocol=PROTOCOL_TEXT,
        environments={s.name: s.task.env_kwargs(s.env) for s in setups},
        sources={s.name: s.task.source(s.env) for s in setups},
        networks={s.name: network_record(s) for s in setups},
        curricula={name: curriculum.to_dict() for name, curriculum in plan.curricula.items()},
        pbt=None if plan.pbt is None else plan.pbt.to_dict(),
        baselines=baselines,
        wall_time_s=None,
        precision=current_precision(),
    )
    return manifest


def network_record(setup: TaskSetup) -> dict[str, Any] | None:
    """The user's network a task trains (``config.network``: spec, module, file, source digest and
    its parameters' shapes), None for the shipped one."""
    spec = getattr(setup.config, "network", None)
    if spec is None:
        return None
    return describe(spec, setup.algorithm.network_params(setup.abstract_state()))


def _resumed_manifest(
    plan: RunPlan, resumed_from: dict[str, int], quarantined: list[dict[str, str]], invocation: dict[str, Any]
) -> dict[str, Any]:
    manifest = copy.deepcopy(plan.manifest)  # the plan keeps the record it was made from
    manifest["precision"] = recorded_precision(manifest)  # plan_resume checked it is this process's
    manifest.setdefault("resumes", []).append(
        {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "status_before": manifest["status"],
            "command": invocation["command"],
            "run_config": invocation["run_config"],
            "from_steps": {name: resumed_from.get(name, 0) for name in plan.tasks},
            "extended": {name: {"from_steps": old, "to_steps": new} for name, (old, new) in plan.extended.items()},
            "quarantined": quarantined,
        }
    )
    # as a new run records them (an older run's, read by record.recorded_protocol, were in its configs)
    manifest["protocol_settings"] = {name: plan.protocols[name].to_dict() for name in plan.tasks}
    manifest["setting_sources"] = plan.sources  # a run recorded before sources: "recorded"; an extension's budget
    if plan.extended:
        for name in plan.extended:
            manifest["configs"][name] = plan.configs[name].to_dict()
        print(
            "resume: extending "
            + ", ".join(f"{name} from {old:,} to {new:,} steps per seed" for name, (old, new) in plan.extended.items()),
            file=sys.stderr,
        )
    return manifest


def mark_failed(run_dir: RunDirectory, reason: str, wall: float) -> None:
    """The manifest says "failed" and why (a resume continues the run)."""
    manifest = run_dir.read_manifest()
    manifest.update(status="failed", error=reason, wall_time_s=(manifest.get("wall_time_s") or 0.0) + wall)
    run_dir.write_manifest(manifest)


def mark_interrupted(
    run_dir: RunDirectory,
    wall: float,
    reached: dict[str, int],
    resumes_from: dict[str, int],
    waited: bool,
    stopped_by: str = "Ctrl-C",
) -> None:
    """The manifest says "interrupted" (Ctrl-C or SIGTERM, ``stopped_by``): where each task stopped,
    where a resume continues, and whether the program was waited for (a second signal does not wait)."""
    manifest = run_dir.read_manifest()
    manifest.update(
        status="interrupted",
        interrupted={
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "stopped_by": stopped_by,
            "stopped_at_steps": reached,
            "resumes_from_steps": resumes_from,
            "waited_for_the_program": waited,
        },
        wall_time_s=(manifest.get("wall_time_s") or 0.0) + wall,
    )
    run_dir.write_manifest(manifest)


def mark_ended(
    run_dir: RunDirectory,
    summary: RunSummary,
    checkpoint_events: int,
    diverged: dict[str, dict[str, dict[str, int]]],
    compile_cache: dict[str, Any] | None = None,
    reported: dict[str, Any] | None = None,
) -> None:
    """The manifest says "finished", or "diverged" and which seeds (``diverged``), with the
    timings, what the persistent compilation cache answered (``compile_cache``) and the tasks'
    reported checkpoints chosen on validation episodes (``reported``, ``purehr.run.choose_reported``)."""
    manifest = run_dir.read_manifest()
    previous_wall = manifest.get("wall_time_s") or 0.0
    manifest.update(
        status="diverged" if diverged else "finished",
        diverged=diverged,
        wall_time_s=previous_wall + summary.wall_time_s,
        compile_s=(manifest.get("compile_s") or 0.0) + summary.compile_s,  # of the wall time, which adds up too
        peak_memory_bytes=peak_memory_bytes(),
        compile_cache=compile_cache,  # this process's part of the run: a resume's replaces the first's
        timing={
            "seconds_in_checkpoint_callbacks": summary.seconds_in_checkpoint_callbacks,
            "seconds_writing_checkpoints_in_background": summary.seconds_writing_checkpoints,
            "seconds_in_evaluation_and_showcase": summary.seconds_in_evaluation,
            "checkpoint_events": checkpoint_events,
            "resumed_from": summary.resumed_from,
        },
    )
    if reported:
        manifest["reported_checkpoints"] = reported
    else:
        manifest.pop("reported_checkpoints", None)
    run_dir.write_manifest(manifest)


def peak_memory_bytes() -> int:
    """Peak resident memory of this process (the host side; on an accelerator the device's
    own peak is in ``jax.devices()[0].memory_stats()`` where the backend reports it)."""
    import resource

    kilobytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(kilobytes * (1 if sys.platform == "darwin" else 1024))
