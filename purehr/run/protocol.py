"""``train_all_seeds``: the protocol of docs/protocol.md, from argument checks to the finished
run directory, in this order:

    plan      what the run trains (a new run's request, or a resumed run's record), every
              check done before anything is compiled or written      purehr.run.planning.run_plan, .resume
    prepare   the run directory checked, then held by this process   purehr.run.planning.preparation
    start     each task's states: initial, or restored from its resume point   purehr.run.planning.triage
    manifest  written "running" (a new run evaluates its baselines first)      purehr.run.status
    compile   one program for every task x seed                      purehr.run.compiled.program
    train     the program runs; its callbacks write the logs and checkpoints   purehr.run.host.recorder
              (Ctrl-C or SIGTERM stops it at the next update: "interrupted", ``RunInterrupted``)
    report    each seed's reported checkpoint, where a task chooses it on validation episodes
                                                                     purehr.run.choose_reported
    finish    the manifest says "finished", or "failed" / "diverged" and the error is raised
                                                                     purehr.run.status, .outcome

Under ``jax.distributed`` process 0 alone does this; the others follow (``purehr.run.followers``)."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.algorithms.base import AlgorithmConfig
from purehr.devices.distributed import (
    broadcast_tree,
    check_host_callback_threads,
    gather_to_host,
    is_primary_process,
    select_devices,
    shard_runner,
    wait_for_all_processes,
)
from purehr.envs.curriculum import Curriculum
from purehr.run.choose_reported import report_checkpoints
from purehr.run.compiled.compile_cache import COUNTS as COMPILE_CACHE_COUNTS
from purehr.run.compiled.program import (
    CtrlC,
    TrainingProgram,
    compiled_program,
    initial_runners,
    nothing_left_to_train,
    protocol_mesh,
)
from purehr.run.compiled.train_all import TaskSetup
from purehr.run.dashboards import claim_log_dir, open_run_tracking
from purehr.run.followers import Followers, follow_primary
from purehr.run.host.estimate import explained_out_of_memory, training_needs
from purehr.run.host.progress import Progress, TaskPlan
from purehr.run.host.recorder import RunRecorder, library_errors_in_one_line
from purehr.run.outcome import (
    RunFailed,
    RunInterrupted,
    RunSummary,
    diverged_error,
    diverged_seeds,
    population_divergences,
    sigint_ignored,
    sigterm_handled,
    sigterm_stops_the_run,
    stop_signal_name,
)
from purehr.run.planning.messages import start_banner, stop_hint
from purehr.run.planning.preparation import RunAlreadyFinished, prepare_run_directory
from purehr.run.planning.resume import extension_hint, plan_resume
from purehr.run.planning.resume_command import absolute, python_words, write_resume_file
from purehr.run.planning.run_plan import RunPlan, RunRequest, new_run_plan
from purehr.run.planning.triage import check_indexes, index_disagreements, restore_task
from purehr.run.status import mark_ended, mark_failed, mark_interrupted, mark_running
from purehr.run.store.run_dir import (
    RESUME,
    RunDirectory,
    check_run_directory_path,
)


def train_all_seeds(
    run_dir: str | Path,
    *,
    tasks=None,
    seeds=None,
    configs: dict[str, AlgorithmConfig] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    command: list[str] | None = None,
    curricula: dict[str, Curriculum | None] | None = None,
    devices: int | None = None,
    overrides: dict[str, Any] | None = None,
    directory_option: str = "--run-dir",
    env_kwargs: dict[str, dict[str, Any]] | None = None,
    log=None,
    keep_dashboards_open: bool = False,
    pbt=None,
    task_overrides: dict[str, dict[str, Any]] | None = None,
    run_config: dict[str, Any] | None = None,
    algorithm: str | None = None,
    resume_words: list[str] | None = None,
    settings=(),
) -> RunSummary:
    """Train every task x seed in one compiled call; see docs/protocol.md for what it leaves.

    ``tasks`` and ``seeds`` default to ``DEFAULT_TASKS`` / ``DEFAULT_SEEDS`` (``purehr.run.planning.run_plan``)
    for a new run and to the recorded ones on ``resume`` (given ones must match them).
    ``overrides`` are ``PPOConfig`` field values applied to every task's config (on ``resume``
    they must match the recorded values, except a larger ``total_timesteps``, which extends the
    run where that can be bit-identical: docs/protocol.md, "Extending a run").

    ``curricula`` maps a task (hrv) to its ``Curriculum`` (None: no schedule). It is recorded
    in the manifest; on ``resume`` the recorded one is used when ``curricula`` is None, and a
    different one is refused. ``env_kwargs`` maps a task to its ``make_env`` keyword arguments
    (JSON values; ``--env-arg``), recorded in the manifest's ``environments`` likewise.
    ``log`` names the dashboards besides the CSV files (``["tensorboard", "wandb"]``, or a
    ``purehr.tracking.TrackingSettings``); a resume continues the recorded ones and may add more.
    ``pbt`` (a ``purehr.population.PBTSettings``): the seeds of each task are one population
    trained by population-based training (docs/pbt.md); recorded, and kept on a resume.
    ``task_overrides`` maps a task to field values for it alone, applied over ``overrides``;
    ``settings`` (``purehr.run.planning.settings.SettingsLayer``s, lowest first) are further
    sources under both: the command line's profile, config file and flags.
    A task entry ``swing@sac`` trains ``swing`` by ``sac`` and keys everything of it (configs,
    the run directory's ``swing@sac/seed_<n>/``); an entry without a suffix trains by
    ``algorithm`` (default: PPO; on ``resume``: the recorded one, which a given one must equal).
    ``run_config`` (JSON: the script's resolved settings, the config file's path and SHA-256)
    is recorded in the manifest as ``run_config`` (a resume's: in its ``resumes`` entry).
    ``keep_dashboards_open``: a finished run's dashboards stay open in ``RunSummary.tracking``
    (the script adds the rendered figures to the same runs, then closes them); else closed here.

    ``devices`` (default: all visible) shards the seed axis, and the environment axis when
    devices outnumber seeds, over a mesh (``purehr.devices.distributed``); on one device nothing moves.
    ``directory_option`` names how the user gave the directory (``--run-name``), for messages.
    ``resume_words``: the command that continues the run (the script's own; None: this call with
    ``resume=True``), written with absolute paths to the run directory's RESUME.txt once this
    process holds it (``purehr.run.planning.resume_command``).

    Ctrl-C (SIGINT, as ``KeyboardInterrupt`` in the calling thread) stops every task at its
    next update: the manifest says "interrupted" and ``RunInterrupted`` (a ``KeyboardInterrupt``)
    says where ``resume`` continues; a second Ctrl-C raises it without waiting for the program.
    SIGTERM does the same where the call runs in the main thread and SIGTERM has its default
    action (``purehr.run.outcome.sigterm_stops_the_run``).
    A resume with nothing left to train (stopped after its last checkpoint) compiles nothing."""
    started = time.perf_counter()
    if resume and overwrite:
        raise ValueError("--resume and --overwrite contradict each other; give one")
    request = RunRequest.checked(
        tasks, seeds, configs, overrides, curricula, env_kwargs, log, pbt, task_overrides, algorithm, settings
    )
    # a bad --devices, or too few CPU pool threads for the devices, is refused before the run
    # directory is touched
    check_host_callback_threads(select_devices(devices))
    if not is_primary_process():
        return follow_primary(started, devices)
    followers = Followers()  # process 0 tells the other processes what to train, or why not
    try:
        run = RunDirectory(Path(run_dir))
        plan = _plan(run, request, resume, overwrite, directory_option)
        with sigterm_stops_the_run():
            lock = run.lock()
            try:
                write_resume_file(run, resume_words or python_words(run.root), plan.tasks)
                claim_log_dir(plan)
                invocation = {"command": command, "run_config": run_config}
                return _train_locked(run, plan, started, progress, invocation, devices, followers, keep_dashboards_open)
            finally:
                lock.release()
    except BaseException as error:
        followers.fail(error)
        raise


def _plan(run_dir: RunDirectory, request: RunRequest, resume: bool, overwrite: bool, directory_option: str) -> RunPlan:
    """What this run trains. A new run's request is checked before the directory is looked
    at; a resume's only against the record it continues, which must have something left to
    train and index files that still describe its checkpoints."""
    new_plan = None if resume else new_run_plan(run_dir.root, request)
    check_run_directory_path(run_dir.root)  # a file, or a directory this process cannot write
    if not prepare_run_directory(run_dir, resume, overwrite, directory_option):
        # a new run (or a resume of one stopped before its manifest: nothing to continue)
        return new_plan or new_run_plan(run_dir.root, request)
    manifest = run_dir.read_manifest()
    plan = plan_resume(run_dir, manifest, request)
    if manifest["status"] == "finished" and not plan.extended:
        raise RunAlreadyFinished(
            f"{run_dir.root} holds a finished run: nothing left to train"
            f"{extension_hint(manifest, ' ({})')}; scripts/render.py --run-dir "
            f"{run_dir.root} renders its figures, --overwrite replaces it, or choose "
            f"another {directory_option}"
        )
    check_indexes(run_dir, manifest, plan.tasks, plan.seeds)
    return plan


def _train_locked(
    run_dir: RunDirectory,
    plan: RunPlan,
    started: float,
    progress: bool,
    invocation: dict[str, Any],
    devices,
    followers: Followers,
    keep_dashboards_open: bool = False,
) -> RunSummary:
    """``train_all_seeds`` once this process holds the run directory; the dashboards are
    closed on every way out but a finished run's with ``keep_dashboards_open``. ``invocation``:
    the command and the resolved run config the manifest records."""
    compile_counts = COMPILE_CACHE_COUNTS.snapshot()
    setups = plan.setups()
    configs = {s.name: s.config for s in setups}
    protocols = {s.name: s.protocol for s in setups}
    banner = start_banner(
        run_dir.root,
        plan.tasks,
        plan.seeds,
        configs,
        protocols,
        resume=plan.resumed,
        pbt=plan.pbt,
        sources=plan.sources,
    )
    stopping = f"  {_stop_hint()}; the command that continues it is in {absolute(run_dir.root / RESUME)}"
    print(f"{banner}\n{stopping}", file=sys.stderr, flush=True)
    mesh = protocol_mesh(setups, plan.seeds, devices)
    try:
        start = _starting_point(run_dir, plan, setups)
    except Exception as error:  # XLA's RESOURCE_EXHAUSTED allocating the states: said in one line
        explained = explained_out_of_memory(error, lambda: training_needs(setups, len(plan.seeds)))
        if explained is error:
            raise
        raise explained from error
    followers.send(plan, start.resumed_from)
    runners = start.runners
    if jax.process_count() > 1:  # every process places the same (restored) states on the mesh
        runners = broadcast_tree({name: jax.tree.map(np.asarray, runner) for name, runner in runners.items()})
    mark_running(run_dir, plan, setups, start.resumed_from, start.quarantined, invocation, mesh)
    recorder = _recorder(run_dir, plan, setups, start, runners, progress)
    kept_rows = (start.update_rows, start.checkpoint_rows)
    recorder.tracking = open_run_tracking(run_dir, plan, setups, start.resumed_from, kept_rows, recorder.say)
    try:
        summary = _train_and_finish(run_dir, plan, setups, runners, mesh, recorder, start, started, compile_counts)
    except BaseException:
        if recorder.tracking is not None and not recorder.abandoned:  # a second Ctrl-C exits at once
            recorder.tracking.close()
        raise
    if recorder.tracking is not None and not keep_dashboards_open:
        recorder.tracking.close()
    return dataclasses.replace(summary, tracking=recorder.tracking if keep_dashboards_open else None)


def _train_and_finish(
    run_dir: RunDirectory,
    plan: RunPlan,
    setups: list[TaskSetup],
    runners,
    mesh,
    recorder,
    start,
    started: float,
    compile_counts: tuple,
) -> RunSummary:
    """Compiles, trains and marks the manifest: the summary of a finished run, else the error.
    ``compile_counts``: the compilation cache's counts when this process began the run."""
    final, error, compile_s = _compile_and_train(setups, plan, runners, mesh, recorder, start, started)
    wall = time.perf_counter() - started
    if error is None:
        error = _unfinished_reason(run_dir, setups, plan.seeds, recorder)
    if error is not None:
        reason = recorder.failure or f"{type(error).__name__}: {error}"
        try:
            mark_failed(run_dir, reason, wall)
            marked = f"{run_dir.root} is marked failed in manifest.json"
        except OSError as unwritable:  # the cause may be the disk itself
            marked = f"manifest.json of {run_dir.root} could not be marked failed either ({unwritable})"
        raise RunFailed(
            f"training stopped: {reason}. {marked}; fix the cause, then continue it with --resume"
        ) from error
    diverged = diverged_seeds(setups, plan.seeds, final)
    if plan.pbt is not None:  # a member PBT replaced no longer shows its divergence in its final state
        diverged = population_divergences(setups, plan.seeds, recorder.update_rows, recorder.checkpoint_rows)
    # the reported checkpoints (report_candidates > 1) before "finished": a kill here leaves a run
    # that a resume finishes by choosing them again
    reported = {} if diverged else report_checkpoints(run_dir, setups, plan.seeds)
    summary = RunSummary(
        run_dir.root,
        time.perf_counter() - started,
        compile_s,
        start.resumed_from,
        recorder.seconds_in_checkpoint_callbacks,
        recorder.seconds_in_evaluation,
        final,
        seconds_writing_checkpoints=recorder.writer.seconds_writing,
    )
    compile_cache = COMPILE_CACHE_COUNTS.since(compile_counts)
    mark_ended(run_dir, summary, recorder.checkpoints_written, diverged, compile_cache, reported)
    if diverged:
        raise diverged_error(run_dir, diverged, pbt=plan.pbt is not None, update_rows=recorder.update_rows)
    return summary


@dataclass(frozen=True)
class _StartingPoint:
    """Where every task begins: its states (leading axis: seeds) and, on a resume, where it
    resumed, the rows the recorder continues and the checkpoints it keeps or set aside."""

    runners: dict[str, Any]
    resumed_from: dict[str, int]  # task -> env steps, for the tasks restored beyond step 0
    elapsed_offset: float
    update_rows: dict[str, dict[int, list[dict]]]
    checkpoint_rows: dict[str, dict[int, list[dict]]]
    kept: dict[str, dict[int, dict[int, str]]]
    quarantined: list[dict[str, str]]


def _starting_point(run_dir: RunDirectory, plan: RunPlan, setups: list[TaskSetup]) -> _StartingPoint:
    """A new run starts every task from the seeds' initial states; a resume restores each
    task at the newest checkpoint every seed has intact (``restore_task``)."""
    seeds = plan.seeds
    runners = {} if plan.resumed else initial_runners(setups, seeds)
    resumed_from, elapsed_offset, quarantined = {}, 0.0, []
    update_rows = {s.name: {seed: [] for seed in seeds} for s in setups}
    checkpoint_rows = {s.name: {seed: [] for seed in seeds} for s in setups}
    kept = {s.name: {seed: {} for seed in seeds} for s in setups}
    if not plan.resumed:
        return _StartingPoint(runners, resumed_from, elapsed_offset, update_rows, checkpoint_rows, kept, quarantined)
    for setup in setups:
        task_rows = {"updates": update_rows[setup.name], "checkpoints": checkpoint_rows[setup.name]}
        # the initial states are computed (and init compiled) only for a task that starts over
        initial = functools.cache(lambda setup=setup: initial_runners([setup], seeds)[setup.name])
        restored = restore_task(run_dir, setup, seeds, task_rows, initial)
        kept[setup.name] = restored.kept
        quarantined += restored.quarantined
        runners[setup.name] = initial() if restored.runner is None else restored.runner
        if restored.runner is not None:
            resumed_from[setup.name] = restored.steps
            elapsed_offset = max(elapsed_offset, restored.elapsed_s)
    return _StartingPoint(runners, resumed_from, elapsed_offset, update_rows, checkpoint_rows, kept, quarantined)


def _recorder(
    run_dir: RunDirectory, plan: RunPlan, setups: list[TaskSetup], start: _StartingPoint, runners: dict, progress: bool
) -> RunRecorder:
    """What the program's callbacks write through, going on from the rows a resume kept."""
    bar = (
        Progress(
            {s.name: TaskPlan.from_config(s.config, s.protocol) for s in setups},
            len(plan.seeds),
            done_updates={s.name: int(np.asarray(runners[s.name].update_index)[0]) for s in setups},
        )
        if progress
        else None
    )
    if bar is not None:  # a resume's notes are those of the run it continues
        bar.seed_from_rows(start.update_rows, start.checkpoint_rows)
    return RunRecorder(
        run_dir,
        setups,
        plan.seeds,
        elapsed_offset=start.elapsed_offset,
        update_rows=start.update_rows,
        checkpoint_rows=start.checkpoint_rows,
        progress=bar,
        kept=start.kept,
    )


def _compile_and_train(
    setups: list[TaskSetup], plan: RunPlan, runners: dict, mesh, recorder: RunRecorder, start, started: float
) -> tuple[dict | None, BaseException | None, float]:
    """The final states (None when the program stopped on an error), that error or None, and
    the seconds compiling took. A run stopped after its last checkpoint compiles nothing. On
    Ctrl-C the run is marked interrupted and ``RunInterrupted`` raised (``_interrupted``)."""
    if nothing_left_to_train(setups, start.resumed_from):
        print(
            "resume: every task is trained to its budget (its last checkpoint is intact): nothing to compile or train",
            file=sys.stderr,
            flush=True,
        )
        recorder.finish()
        return jax.tree.map(np.asarray, runners), None, 0.0
    try:
        compiled, runners, compile_s = _compile(setups, plan, runners, mesh)
    except KeyboardInterrupt:  # nothing trains: stop at once (the compilation ends on its own)
        how = f"{stop_signal_name()} while compiling: nothing trained"
        raise _interrupted(recorder, time.perf_counter() - started, how) from None
    try:
        final, error = _train_and_record(compiled, runners, recorder, plan, start.resumed_from, compile_s)
    except KeyboardInterrupt:  # a second Ctrl-C
        how = (
            f"a second {stop_signal_name()}: exited without waiting for the program to stop; a resume verifies "
            "the checkpoints and sets aside a save that was cut short"
        )
        raise _interrupted(recorder, time.perf_counter() - started, how) from None
    if error is None and recorder.stop_requested and not _trained_to_the_end(setups, final):
        how = "the updates after those checkpoints are trained again, bit-identically"
        raise _interrupted(recorder, time.perf_counter() - started, how, waited=True)
    return final, error, compile_s


def _compile(setups: list[TaskSetup], plan: RunPlan, runners: dict, mesh) -> tuple[Any, dict, float]:
    """The compiled program, the states placed as it takes them, and the seconds it took."""
    print("compiling the training program (nothing trains until it is compiled) ...", file=sys.stderr, flush=True)
    compile_started = time.perf_counter()
    runners = jax.tree.map(lambda x: jnp.asarray(x, dtype=np.asarray(x).dtype), runners)
    if mesh is not None:
        runners = {name: shard_runner(runner, mesh) for name, runner in runners.items()}
    compiled = compiled_program(setups, len(plan.seeds), runners, mesh, run_compile=CtrlC().run)
    return compiled, runners, time.perf_counter() - compile_started


def _train_and_record(
    program: TrainingProgram,
    runners: dict,
    recorder: RunRecorder,
    plan: RunPlan,
    resumed_from: dict[str, int],
    compile_s: float,
) -> tuple[dict | None, BaseException | None]:
    """Runs the program with ``recorder`` on its callbacks; the final states (None when it
    stopped) and the error that stopped it or the recorder's completion, else None. The first
    Ctrl-C stops the program at its next update; a second raises ``KeyboardInterrupt`` at once."""
    message = f"compiled in {compile_s:.1f} s; training {', '.join(plan.tasks)} x seeds {plan.seeds}"
    if resumed_from:
        message += f" (resumed at {resumed_from})"
    print(f"{message}; {_stop_hint()}", file=sys.stderr, flush=True)
    final, error = None, None
    with program.attached(recorder) as compiled:
        wait_for_all_processes("train")
        recorder.start()
        with library_errors_in_one_line():
            ctrl_c = CtrlC(recorder.request_stop)
            try:
                final = ctrl_c.run(lambda: gather_to_host(jax.block_until_ready(compiled(runners))))
            except KeyboardInterrupt:  # the program may still be running: it writes nothing more
                program.abandoned = ctrl_c.abandoned
                recorder.abandon()
                raise
            except Exception as raised:  # an error in a host callback arrives as a JaxRuntimeError here
                error = explained_out_of_memory(raised, lambda: training_needs(plan.setups(), len(plan.seeds)))
    try:
        recorder.finish()
    except Exception as raised:
        error = error or raised
    return final, error


def _stop_hint() -> str:
    """How this process's run is stopped at its next update (Ctrl-C, SIGTERM), as it hears signals now."""
    return stop_hint(sigterm_handled(), sigint_ignored(), os.getpid())


def _trained_to_the_end(setups: list[TaskSetup], final: dict) -> bool:
    return all(int(np.asarray(final[s.name].update_index)[0]) >= s.algorithm.num_updates for s in setups)


def _interrupted(recorder: RunRecorder, wall: float, how: str, waited: bool = False) -> RunInterrupted:
    """Marks the run interrupted; the error says where it stopped and where a resume continues
    (``waited``: the program stopped before this process goes on)."""
    run_dir, resumes_from, reached = recorder.run_dir, recorder.resume_points(), recorder.steps_reached()
    stopped_by = stop_signal_name()
    mark_interrupted(run_dir, wall, reached, resumes_from, waited, stopped_by)
    stopped = ", ".join(f"{task} at {steps:,} steps" for task, steps in reached.items())
    points = ", ".join(
        f"{task} from its checkpoint at {steps:,} steps" if steps else f"{task} from the start"
        for task, steps in resumes_from.items()
    )
    held = recorder.unsaved_checkpoints()
    unsaved = "".join(
        f"; {task}'s {count} quick checkpoint(s) since its last full one were not saved (grouped quick "
        "evaluations write a group at its full checkpoint)"
        for task, count in held.items()
    )
    return RunInterrupted(
        f"{stopped_by}: training stopped ({stopped}){unsaved}; {run_dir.root} is marked interrupted in "
        f"manifest.json. A resume continues {points} ({how})",
        resumes_from,
        at_once=not waited,
    )


def _unfinished_reason(
    run_dir: RunDirectory, setups: list[TaskSetup], seeds: list[int], recorder: RunRecorder
) -> Exception | None:
    """Why a run whose program ran to its end is still not finished: a failure the recorder
    noted, or index files that disagree with the checkpoints on disk."""
    if recorder.failure is not None:
        return RuntimeError(recorder.failure)
    disagreements = index_disagreements(run_dir, setups, seeds)
    if disagreements:
        return RuntimeError("the index and the checkpoints on disk disagree: " + "; ".join(disagreements))
    return None
