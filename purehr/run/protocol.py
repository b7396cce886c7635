"""``train_all_seeds``: the protocol of docs/protocol.md, from argument checks to the finished
run directory. All validation happens before anything is compiled or written."""

from __future__ import annotations

import datetime
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.devices.distributed import (
    broadcast_json,
    broadcast_tree,
    check_host_callback_threads,
    describe_mesh,
    gather_to_host,
    is_primary_process,
    make_mesh,
    select_devices,
    shard_runner,
    wait_for_all_processes,
)
from purehr.envs.hrv.curriculum import Curriculum
from purehr.ppo.algorithm import diverged_at_update
from purehr.ppo.config import PPOConfig
from purehr.ppo.loop import HostSlot
from purehr.ppo.trainer import keys_for_seeds
from purehr.run.checkpoints import CorruptCheckpointError, SeedCheckpoints, tree_digest
from purehr.run.files import RunDirectoryError, parse_row, read_csv
from purehr.run.lock import RunDirectoryBusy
from purehr.run.machine import environment_description
from purehr.run.messages import start_banner
from purehr.run.progress import Progress, TaskPlan, format_duration
from purehr.run.recorder import RunRecorder, seed_slice
from purehr.run.run_dir import MANIFEST_TEMPORARIES, RunDirectory, check_run_directory_path, remove_run_files
from purehr.run.runner import TaskSetup, make_train_all
from purehr.run.task_setup import build_task_setup
from purehr.tasks import TASK_NAMES, get_task

DEFAULT_TASKS = TASK_NAMES
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
PROTOCOL_TEXT = (
    "PPO per docs/protocol.md: every task x seed trained in one jax.jit (scan over updates "
    "outside, vmap over seeds inside); checkpoint at the first update at or beyond each "
    "multiple of checkpoint_interval (and at the last update) with held-out evaluation "
    "on the device; deterministic policies for evaluation."
)


class RunDirectoryInUse(FileExistsError):
    pass


class RunAlreadyFinished(RunDirectoryInUse):
    """``resume`` on a run that has nothing left to train (killed after training, say)."""


class RunFailed(RuntimeError):
    """Training stopped on an error (a checkpoint that could not be saved); the manifest says
    "failed" with the reason, and the run can be continued with ``resume``."""


class RunDiverged(RuntimeError):
    """Training ran to the end, but some seeds' losses or parameters became NaN or infinite;
    those seeds stopped updating there (frozen), the manifest says "diverged" and lists them
    (``diverged``: task -> seed -> first diverged update and its env steps). Not a finished result."""

    def __init__(self, message: str, diverged: dict[str, dict[str, dict[str, int]]]):
        super().__init__(message)
        self.diverged = diverged


@dataclass(frozen=True)
class RunSummary:
    run_dir: Path
    wall_time_s: float
    compile_s: float
    resumed_from: dict[str, int]
    seconds_in_checkpoint_callbacks: float
    seconds_in_evaluation: float
    final_runners: dict[str, Any]  # task -> RunnerState with a leading seed axis


# The compiled programs (cached in _PROGRAMS) call whichever recorder is in this slot, so one
# compiled program serves every run of the same shape in a process (a resume, a test).
_HANDLERS = HostSlot()
_PROGRAMS: dict[tuple, Any] = {}


class _Followers:
    """Under ``jax.distributed``, process 0 alone reads and writes the run directory; it tells
    the other processes, once, either what to train (configs, curricula, the manifest of a
    resumed run) or why it stopped, so they never wait for a program that will not start."""

    def __init__(self) -> None:
        self.sent = jax.process_count() == 1

    def send(self, plan: dict) -> None:
        if not self.sent:
            self.sent = True
            broadcast_json(plan)

    def fail(self, error: BaseException) -> None:
        if not self.sent:
            self.sent = True
            broadcast_json({"error": f"{type(error).__name__}: {error}", "kind": type(error).__name__})


def _compiled_program(
    setups: list[TaskSetup], num_seeds: int, runners: dict, curricula: dict[str, Curriculum] | None = None, mesh=None
):
    curricula = curricula or {}
    mesh_key = None if mesh is None else (tuple(mesh.shape.items()), tuple(d.id for d in mesh.devices.flat))
    key = (
        tuple((s.name, s.config, curricula.get(s.name)) for s in setups),
        num_seeds,
        bool(jax.config.jax_enable_x64),
        mesh_key,
    )
    if key not in _PROGRAMS:
        _PROGRAMS[key] = jax.jit(make_train_all(setups, _HANDLERS)).lower(runners).compile()
    return _PROGRAMS[key]


def _protocol_mesh(setups: list[TaskSetup], seeds: list[int], devices):
    """The device mesh for this run, or None on one device (every task shares it: the
    environment axis is split only as far as every task's num_envs allows)."""
    chosen = select_devices(devices)
    if len(chosen) == 1:
        return None
    return make_mesh(len(seeds), math.gcd(*(s.config.num_envs for s in setups)), chosen)


def peak_memory_bytes() -> int:
    """Peak resident memory of this process (the host side; on an accelerator the device's
    own peak is in ``jax.devices()[0].memory_stats()`` where the backend reports it)."""
    import resource

    kilobytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(kilobytes * (1 if sys.platform == "darwin" else 1024))


def validate_request(tasks, seeds) -> tuple[list[str], list[int]]:
    tasks = list(tasks)
    if not tasks:
        raise ValueError("tasks: expected at least one task")
    for task in tasks:
        get_task(task)
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"tasks={tasks}: each task may appear once")
    seeds = list(seeds)
    if not seeds or any(not isinstance(s, (int, np.integer)) or s < 0 for s in seeds):
        raise ValueError(f"seeds={seeds}: expected a non-empty list of non-negative integers")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={seeds}: each seed may appear once")
    return tasks, [int(s) for s in seeds]


def build_setups(
    tasks: list[str],
    configs: dict[str, PPOConfig],
    curricula: dict[str, Curriculum] | None = None,
    manifest: dict | None = None,
) -> list[TaskSetup]:
    """One setup per task. A task with a curriculum trains under its schedule (in the scan)
    and is evaluated (checkpoints and baseline) on the curriculum's final stage. A resumed
    run (``manifest``) rebuilds the environments it recorded."""
    curricula = validate_curricula(tasks, curricula)
    return [build_task_setup(name, configs.get(name), curricula.get(name), manifest=manifest) for name in tasks]


def validate_curricula(tasks: list[str], curricula: dict[str, Curriculum] | None) -> dict[str, Curriculum]:
    """Drop ``None`` entries; refuse a curriculum for a task not trained or without the HRV
    params (difficulty, target_precision)."""
    curricula = {name: c for name, c in (curricula or {}).items() if c is not None}
    for name, curriculum in curricula.items():
        if name not in tasks:
            raise ValueError(f"curriculum given for task {name!r}, which is not being trained ({tasks})")
        if not isinstance(curriculum, Curriculum):
            raise ValueError(f"curriculum for {name!r} is {curriculum!r}; expected a purehr.envs.hrv.Curriculum")
        env = get_task(name).make_env()
        try:
            curriculum.check_params(env.default_params)
        except TypeError:
            raise ValueError(
                f"task {name!r} has no difficulty schedule (its params lack difficulty / "
                "target_precision); a curriculum applies to the hrv task"
            ) from None
    return curricula


def manifest_curricula(manifest: dict) -> dict[str, Curriculum]:
    """The curricula a run was started with (``manifest["curricula"]``; absent = none)."""
    return {
        name: c
        for name, data in (manifest.get("curricula") or {}).items()
        if (c := Curriculum.from_dict(data)) is not None
    }


def evaluate_baselines(setups: list[TaskSetup]) -> dict[str, Any]:
    """The baseline (structured controller / oracle) and the floor policies (doing nothing,
    acting at random) of every task, on the held-out protocol PPO is judged on."""
    baselines = {}
    for setup in setups:

        def heldout(policy):
            metrics = jax.jit(
                lambda: setup.task.heldout_evaluation(
                    setup.env, setup.eval_env_params, policy, num_episodes=setup.config.eval_episodes
                )
            )()
            return {k: float(v) for k, v in metrics.items()}

        baseline = setup.task.baseline
        baselines[setup.name] = {
            "name": baseline.name,
            "definition": baseline.definition,
            "metrics": heldout(baseline.make_policy(setup.env, setup.eval_env_params)),
            "floors": {
                floor.name: heldout(floor.make_policy(setup.env, setup.eval_env_params)) for floor in setup.task.floors
            },
        }
    return baselines


def prepare_run_directory(
    run_dir: RunDirectory, resume: bool, overwrite: bool, directory_option: str = "--run-dir"
) -> bool:
    """Refuses what must not be touched; returns whether there is a run to continue.
    ``directory_option`` is how the user named the directory (``--run-name`` or ``--run-dir``),
    so the messages name the option they gave."""
    if resume and overwrite:
        raise ValueError("--resume and --overwrite contradict each other; give one")
    holder = run_dir.holder()
    if holder is not None:
        raise RunDirectoryBusy(
            f"{run_dir.root} is in use by another running process (pid {holder}); wait for "
            "it to end or stop it before --resume or --overwrite"
        )
    has_manifest = run_dir.manifest_path.exists()
    if resume:
        if has_manifest:
            run_dir.read_manifest()  # a manifest.json some other program wrote is refused by name
            return True
        if _stopped_before_manifest(run_dir):
            print(
                f"--resume: {run_dir.root} has no manifest.json yet: the process that started the run was "
                "stopped before training began; starting it from scratch",
                file=sys.stderr,
            )
            return False
        raise FileNotFoundError(
            f"--resume: {run_dir.root} holds no run to resume (no manifest.json); "
            f"check {directory_option}, or start a new run without --resume"
        )
    if has_manifest:
        try:
            manifest = run_dir.read_manifest()
        except RunDirectoryError as error:
            action = "remove anything in it" if overwrite else "train into it"
            raise RunDirectoryError(f"{error}; refusing to {action}: choose another {directory_option}") from None
        if not overwrite:
            raise RunDirectoryInUse(occupied_message(run_dir, manifest, directory_option))
        kept = remove_run_files(run_dir.root, manifest)
        message = f"--overwrite: removed the {manifest['status']} run in {run_dir.root}"
        if kept:
            message += (
                f"; kept {len(kept)} entries a run does not write: "
                + ", ".join(str(p.relative_to(run_dir.root)) for p in kept[:5])
                + (", ..." if len(kept) > 5 else "")
            )
        print(message, file=sys.stderr)
    elif run_dir.root.exists() and any(run_dir.root.iterdir()):
        raise RunDirectoryInUse(
            f"{run_dir.root} is not empty and holds no purehr run; choose another {directory_option}"
        )
    return False


def occupied_message(run_dir: RunDirectory, manifest: dict, directory_option: str = "--run-dir") -> str:
    """Why a new run is refused in a directory holding one, and the three ways on."""
    described = f"tasks {' '.join(manifest['tasks'])}, seeds {' '.join(map(str, manifest['seeds']))}, " + ", ".join(
        f"{task} {_count(manifest['configs'][task].get('total_timesteps'))} steps" for task in manifest["tasks"]
    )
    if manifest["status"] == "finished":
        what = f"a finished run ({described})"
        on = "--resume renders the figures it is missing" + extension_hint(manifest, " (and {})")
    else:
        what = {"running": "a run that was stopped before it finished", "failed": "a failed run"}.get(
            manifest["status"], f"a {manifest['status']} run"
        ) + f" ({described})"
        on = "--resume continues it from its last checkpoint"
    return f"{run_dir.root} already holds {what}; {on}, --overwrite replaces it, or choose another {directory_option}"


def _stopped_before_manifest(run_dir: RunDirectory) -> bool:
    """Only the lock (and perhaps a half-written manifest) is there: a purehr process took the
    directory and was stopped while evaluating baselines or before, so nothing was trained."""
    if not run_dir.lock_path.exists():
        return False
    return all(entry.name in (run_dir.lock_path.name, *MANIFEST_TEMPORARIES) for entry in run_dir.root.iterdir())


def _count(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def current_precision() -> str:
    """What the arrays of a run are: part of the run, since a resume in another precision
    cannot continue it bit for bit."""
    return "float64" if jax.config.jax_enable_x64 else "float32"


@dataclass(frozen=True)
class ResumePlan:
    """What a resume continues, read from the manifest and checked against what was asked."""

    tasks: list[str]
    seeds: list[int]
    configs: dict[str, PPOConfig]
    curricula: dict[str, Curriculum]
    extended: dict[str, tuple[int, int]] = field(default_factory=dict)  # task -> (old, new budget)


def plan_resume(
    run_dir: RunDirectory,
    manifest: dict,
    tasks: list[str] | None,
    seeds: list[int] | None,
    configs: dict[str, PPOConfig],
    overrides: dict[str, Any],
    curricula,
) -> ResumePlan:
    """Tasks, seeds, configs, curricula and precision come from the manifest; whatever the
    caller gave must agree with it (refused naming both values), except a larger budget, which
    extends the run where that can be bit-identical (``extension_problem``)."""
    where = f"(manifest.json of {run_dir.root})"
    if tasks is not None and list(tasks) != manifest["tasks"]:
        raise ValueError(
            f"--resume: --tasks {' '.join(tasks)} does not match the run's tasks "
            f"{' '.join(manifest['tasks'])} {where}; omit --tasks to continue with the recorded ones"
        )
    if seeds is not None and list(seeds) != manifest["seeds"]:
        raise ValueError(
            f"--resume: --seeds {' '.join(map(str, seeds))} does not match the run's seeds "
            f"{' '.join(map(str, manifest['seeds']))} {where}; omit --seeds to continue with the "
            "recorded ones"
        )
    tasks, seeds = validate_request(manifest["tasks"], manifest["seeds"])
    precision = manifest.get("precision", "float32")  # runs recorded before it was: --x64 was opt-in
    if precision != current_precision():
        flag = "with --x64" if precision == "float64" else "without --x64"
        raise ValueError(
            f"--resume: the run was trained in {precision} and this process computes in "
            f"{current_precision()}; a resume in another precision cannot continue it bit for "
            f"bit: resume {flag}"
        )
    unknown = set(configs) - set(tasks)
    if unknown:
        raise ValueError(f"--resume: configs given for tasks {sorted(unknown)} that the run does not train ({tasks})")
    saved = {task: PPOConfig.from_dict(manifest["configs"][task]) for task in tasks}
    wanted = {task: configs.get(task, saved[task]).replace(**overrides) for task in tasks}
    saved_curricula = manifest_curricula(manifest)
    if curricula is not None and validate_curricula(tasks, curricula) != saved_curricula:
        raise ValueError(
            f"--resume: the run was started with curricula "
            f"{ {k: c.to_dict() for k, c in saved_curricula.items()} }, not "
            f"{ {k: c.to_dict() for k, c in validate_curricula(tasks, curricula).items()} }; "
            "resume with the original settings (or omit --curriculum)"
        )
    extended = {}
    for task in tasks:
        old, new = saved[task].to_dict(), wanted[task].to_dict()
        differing = [
            f"{name}: given {new[name]!r}, the run has {old[name]!r}"
            for name in old
            if name != "total_timesteps" and new[name] != old[name]
        ]
        if differing:
            raise ValueError(
                f"--resume: the {task} settings differ from the run's {where}: "
                f"{'; '.join(differing)}. Omit them to continue with the recorded settings"
            )
        before, after = old["total_timesteps"], new["total_timesteps"]
        if after < before:
            raise ValueError(
                f"--resume: --steps {after:,} is below the run's {task} budget of {before:,} steps "
                "per seed; a run cannot be shortened (restore an earlier checkpoint with "
                "purehr.run.restoring(..., step=N) instead), omit --steps to continue it"
            )
        if after > before:
            problem = extension_problem(task, saved[task], saved_curricula.get(task), before, after)
            if problem:
                raise ValueError(problem)
            extended[task] = (before, after)
    return ResumePlan(tasks, seeds, wanted, saved_curricula, extended)


def extension_hint(manifest: dict, form: str = "{}") -> str:
    """ "a larger --steps extends it" where every task of the run can be extended, else ""."""
    curricula = manifest_curricula(manifest)
    extendable = all(
        not manifest["configs"][task].get("anneal_lr", True) and task not in curricula for task in manifest["tasks"]
    )
    return form.format("a larger --steps extends it, docs/protocol.md") if extendable else ""


def extension_problem(
    task: str, config: PPOConfig, curriculum: Curriculum | None, before: int, after: int
) -> str | None:
    """Why a run of ``before`` steps cannot be extended to ``after`` bit-identically, or None.
    An extended run must end exactly where an uninterrupted run of ``after`` steps ends, so
    nothing the first ``before`` steps computed may depend on the budget (docs/protocol.md)."""
    if config.anneal_lr:
        why = (
            "its learning rate decays linearly to 0 over the budget (anneal_lr=True), so the first "
            f"{before:,} steps of a {after:,}-step run are not this run's"
        )
        fix = "; train a run you mean to extend with --anneal-lr false"
    elif curriculum is not None:
        why = (
            "its curriculum's stages are fractions of the budget, so the first "
            f"{before:,} steps of a {after:,}-step run are not this run's"
        )
        fix = ""
    else:
        return None
    return (
        f"--resume --steps {after:,}: cannot extend {task} from {before:,} to {after:,} steps: {why}, and "
        f"no extension could end bit-identical to an uninterrupted run. Start a new run with --steps "
        f"{after:,} (another --run-name or --run-dir){fix}"
    )


@dataclass(frozen=True)
class TaskResume:
    """Where one task continues: the same point for every seed, so the rows, the checkpoints
    on disk and the states the program goes on from all describe one prefix of the run."""

    runner: Any | None  # stacked over seeds; None: the task starts over
    steps: int  # env steps of the resume point (0: starting over)
    elapsed_s: float
    kept: dict[int, dict[int, str]]  # seed -> {steps: digest} kept that the program saves again
    quarantined: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"} moved aside


def completed_checkpoint_steps(folder: Path) -> list[int]:
    """The step folders Orbax completed (``<steps>/``), read from the directory alone."""
    if not folder.is_dir():
        return []
    return sorted(int(entry.name) for entry in folder.iterdir() if entry.is_dir() and entry.name.isdigit())


def check_indexes(run_dir: RunDirectory, tasks: list[str], seeds: list[int]) -> None:
    """Refuses a resume whose index files were lost while the checkpoints they describe are
    still there: the resume would have to set that progress aside. Only the files on disk are
    read (nothing moves): a kill leaves the index at most one checkpoint behind, never missing
    while later checkpoints exist, so this is damage, and the user decides."""
    for task in tasks:
        for seed in seeds:
            saved = [steps for steps in completed_checkpoint_steps(run_dir.checkpoint_dir(task, seed)) if steps > 0]
            index, updates = run_dir.checkpoints_csv(task, seed), run_dir.updates_csv(task, seed)
            listed = [r for r in read_csv(index)] if index.exists() else []
            beyond_zero = [
                int(r["actual_steps"])
                for r in listed
                if r.get("actual_steps", "").isdigit() and int(r["actual_steps"]) > 0
            ]
            missing = None
            if saved and not index.exists():
                missing = index
            elif saved and beyond_zero and not updates.exists():
                missing = updates
            if missing is not None:
                relative = missing.relative_to(run_dir.root)
                raise FileNotFoundError(
                    f"--resume: {relative} is missing from {run_dir.root}, while "
                    f"{run_dir.checkpoint_dir(task, seed).relative_to(run_dir.root)}/ holds checkpoints "
                    f"{', '.join(map(str, saved))}: without it they cannot be verified, and resuming would set "
                    f"that progress aside. Nothing was changed. Put {relative} back (from a copy of the run), "
                    f"or, to start {task} over, move {run_dir.checkpoint_dir(task, seed).relative_to(run_dir.root)} "
                    "out of the run directory and --resume again"
                )


def restore_task(
    run_dir: RunDirectory, setup: TaskSetup, seeds: list[int], recorder_rows: dict, initial: Any = None
) -> TaskResume:
    """The newest checkpoint every seed has intact (on disk, listed in checkpoints.csv with a
    matching digest, its updates logged) is the task's resume point. Everything newer, listed
    or not, half-written saves and damaged ones are moved to ``quarantine/`` with a note (never
    deleted); the rows in ``recorder_rows`` are trimmed to what stays on disk. With no such
    checkpoint beyond step 0 the task starts over from ``initial`` (the stacked initial states),
    keeping each seed's step-0 checkpoint when it holds exactly that state."""
    name = setup.name
    folders = [run_dir.checkpoint_dir(name, seed) for seed in seeds]
    had_checkpoints = any(folder.is_dir() and any(folder.iterdir()) for folder in folders)
    managers = {seed: SeedCheckpoints(run_dir.checkpoint_dir(name, seed)) for seed in seeds}
    quarantined: list[dict[str, str]] = []
    try:
        for seed in seeds:  # before anything reads the folder: saves the killed process left half-written
            for entry in managers[seed].unfinished():
                quarantined.append(
                    _quarantine(
                        run_dir,
                        managers[seed],
                        name,
                        seed,
                        entry,
                        "a save that never completed: the process stopped while writing it",
                    )
                )
        rows = {seed: _unique_rows(read_csv(run_dir.checkpoints_csv(name, seed))) for seed in seeds}
        updates = {seed: [parse_row(r) for r in read_csv(run_dir.updates_csv(name, seed))] for seed in seeds}
        usable = [
            {
                r["actual_steps"]
                for r in rows[seed].values()
                if r["actual_steps"] in managers[seed].steps() and _updates_logged(updates[seed], r["update"])
            }
            for seed in seeds
        ]
        abstract = jax.eval_shape(setup.ppo.init, jax.random.PRNGKey(0))
        chosen, states = 0, None
        # step 0 is the initial state, which the keys rebuild exactly: resuming there is starting over
        for steps in sorted(set.intersection(*usable) - {0}, reverse=True):
            try:
                states = [managers[seed].restore(steps, abstract, rows[seed][steps]["state_digest"]) for seed in seeds]
                chosen = steps
                break
            except CorruptCheckpointError as error:
                print(f"resume: {error}; falling back to the previous checkpoint", file=sys.stderr)
        kept = {seed: {} for seed in seeds}
        if chosen == 0:
            if not had_checkpoints and not any(rows.values()):
                print(
                    f"resume: {name} has no checkpoint yet (the run stopped before saving its first): it "
                    "trains from scratch, from step 0",
                    file=sys.stderr,
                )
            else:
                print(
                    f"resume: {name} starts over: it trains from scratch, from step 0, since no checkpoint "
                    f"beyond step 0 is intact and listed for every seed {seeds}",
                    file=sys.stderr,
                )
            for index, seed in enumerate(seeds):
                digest = _initial_state_kept(
                    managers[seed], rows[seed].get(0), abstract, None if initial is None else seed_slice(initial, index)
                )
                if digest is not None:
                    kept[seed][0] = digest
        for seed in seeds:
            for steps in managers[seed].steps():
                if steps in kept[seed]:
                    continue
                if steps > chosen and chosen == 0:
                    reason = (
                        f"newer than step 0, where {name} starts over: not every seed {seeds} has a "
                        "checkpoint beyond step 0 intact and listed"
                    )
                elif steps > chosen:
                    reason = (
                        f"newer than the resume point {chosen} of {name}, the newest checkpoint every "
                        f"seed {seeds} has intact"
                    )
                elif chosen == 0:
                    reason = (
                        "damaged: it does not hold the initial state this seed rebuilds; the task "
                        "starts over and saves step 0 again"
                    )
                elif steps not in rows[seed]:
                    reason = f"not listed in {run_dir.checkpoints_csv(name, seed).name}"
                else:
                    continue
                quarantined.append(_quarantine(run_dir, managers[seed], name, seed, str(steps), reason))
            on_disk = set(managers[seed].steps())
            for steps in sorted(set(rows[seed]) - on_disk):
                if steps <= chosen:
                    print(
                        f"resume: {name} seed {seed}: dropping the row for checkpoint {steps}, which is not on disk",
                        file=sys.stderr,
                    )
            recorder_rows["checkpoints"][seed] = [row for steps, row in sorted(rows[seed].items()) if steps in on_disk]
            last_update = rows[seed][chosen]["update"] if chosen else 0
            recorder_rows["updates"][seed] = [r for r in updates[seed] if r["update"] <= last_update]
    finally:
        for manager in managers.values():
            manager.finish()
    if chosen == 0:
        return TaskResume(None, 0, 0.0, kept, quarantined)
    runner = jax.tree.map(lambda *leaves: np.stack(leaves), *states)
    return TaskResume(runner, chosen, rows[seeds[0]][chosen]["elapsed_s"], kept, quarantined)


def _initial_state_kept(manager, row: dict | None, abstract: Any, initial: Any) -> str | None:
    """A task starting over saves its initial state again at update 0: an intact step-0
    checkpoint holding exactly that state stays (and is not rewritten); its digest, else None.
    One the index does not list yet (the process stopped before writing the row) stays too:
    the recorder writes its row when the program reaches step 0 again."""
    if initial is None or 0 not in manager.steps():
        return None
    digest = tree_digest(initial)
    if row is not None and row["state_digest"] != digest:
        return None
    try:
        manager.restore(0, abstract, digest)
    except CorruptCheckpointError:
        return None
    return digest


def _quarantine(run_dir: RunDirectory, manager, task: str, seed: int, entry: str, reason: str) -> dict[str, str]:
    where = manager.quarantine_entry(entry, reason)
    print(f"resume: moved {task} seed {seed} checkpoint {entry} to {where} ({reason})", file=sys.stderr)
    return {"path": str(where.relative_to(run_dir.root)), "reason": reason}


def _unique_rows(rows: list[dict[str, str]]) -> dict[int, dict]:
    """checkpoints.csv as {actual steps: row}; a step listed twice keeps its first row."""
    unique: dict[int, dict] = {}
    for row in map(parse_row, rows):
        unique.setdefault(row["actual_steps"], row)
    return unique


def index_disagreements(run_dir: RunDirectory, setups: list[TaskSetup], seeds: list[int]) -> list[str]:
    """What keeps a run that trained to its end from being ``finished``: every seed's
    checkpoints.csv must list exactly the checkpoints on disk and end at the last update, and
    updates.csv must hold every update."""
    problems = []
    for setup in setups:
        for seed in seeds:
            where = run_dir.seed_dir(setup.name, seed).relative_to(run_dir.root)
            rows = [parse_row(r) for r in read_csv(run_dir.checkpoints_csv(setup.name, seed))]
            listed = sorted(r["actual_steps"] for r in rows)
            on_disk = completed_checkpoint_steps(run_dir.checkpoint_dir(setup.name, seed))
            if listed != on_disk:
                problems.append(f"{where}/checkpoints.csv lists {listed}, {where}/checkpoints/ holds {on_disk}")
            elif not rows or max(r["update"] for r in rows) != setup.ppo.num_updates:
                problems.append(f"{where}/checkpoints.csv does not end at the last update {setup.ppo.num_updates}")
            updates = [parse_row(r)["update"] for r in read_csv(run_dir.updates_csv(setup.name, seed))]
            if updates != list(range(1, setup.ppo.num_updates + 1)):
                problems.append(f"{where}/updates.csv does not hold updates 1..{setup.ppo.num_updates} in order")
    return problems


def _updates_logged(updates: list[dict], last: int) -> bool:
    """updates.csv holds every update 1..last, in order: resuming after ``last`` leaves no gap."""
    return [r["update"] for r in updates if r["update"] <= last] == list(range(1, last + 1))


def train_all_seeds(
    run_dir: str | Path,
    *,
    tasks=None,
    seeds=None,
    configs: dict[str, PPOConfig] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    command: list[str] | None = None,
    curricula: dict[str, Curriculum | None] | None = None,
    devices: int | None = None,
    overrides: dict[str, Any] | None = None,
    directory_option: str = "--run-dir",
) -> RunSummary:
    """Train every task x seed in one compiled call; see docs/protocol.md for what it leaves.

    ``tasks`` and ``seeds`` default to ``DEFAULT_TASKS`` / ``DEFAULT_SEEDS`` for a new run and
    to the recorded ones on ``resume`` (given ones must match them). ``overrides`` are
    ``PPOConfig`` field values applied to every task's config (on ``resume`` they must match
    the recorded values, except a larger ``total_timesteps``, which extends the run where that
    can be bit-identical: docs/protocol.md, "Extending a run").

    ``curricula`` maps a task (hrv) to its ``Curriculum`` (None: no schedule). It is recorded
    in the manifest; on ``resume`` the recorded one is used when ``curricula`` is None, and a
    different one is refused.

    ``devices`` (default: all visible) shards the seed axis, and the environment axis when
    devices outnumber seeds, over a mesh (``purehr.devices.distributed``); on one device nothing moves.
    ``directory_option`` names how the user gave the directory (``--run-name``), for messages."""
    started = time.perf_counter()
    if resume and overwrite:
        raise ValueError("--resume and --overwrite contradict each other; give one")
    if tasks is not None:
        tasks = validate_request(tasks, DEFAULT_SEEDS)[0]
    if seeds is not None:
        seeds = validate_request(DEFAULT_TASKS, seeds)[1]
    # a bad --devices, or too few CPU pool threads for the devices, is refused before the run
    # directory is touched
    check_host_callback_threads(select_devices(devices))
    if not is_primary_process():
        return _follow_primary(started, devices)
    configs, overrides = dict(configs or {}), dict(overrides or {})

    def new_run_request():
        """Tasks, seeds and every config of a new run, checked before anything is touched."""
        chosen = tasks or list(DEFAULT_TASKS)
        if curricula is not None:
            validate_curricula(chosen, curricula)
        unknown = set(configs) - set(chosen)
        if unknown:
            raise ValueError(f"configs given for tasks {sorted(unknown)} that are not being trained ({chosen})")
        return (
            chosen,
            seeds or list(DEFAULT_SEEDS),
            {task: configs.get(task, get_task(task).default_config).replace(**overrides) for task in chosen},
        )

    followers = _Followers()  # process 0 tells the other processes what to train, or why not
    try:
        request = None if resume else new_run_request()
        run_dir = RunDirectory(Path(run_dir))
        check_run_directory_path(run_dir.root)  # a file, or a directory this process cannot write
        resume = prepare_run_directory(run_dir, resume, overwrite, directory_option)
        plan = None
        if resume:
            manifest = run_dir.read_manifest()
            plan = plan_resume(run_dir, manifest, tasks, seeds, configs, overrides, curricula)
            if manifest["status"] == "finished" and not plan.extended:
                raise RunAlreadyFinished(
                    f"{run_dir.root} holds a finished run: nothing left to train"
                    f"{extension_hint(manifest, ' ({})')}; scripts/render.py --run-dir "
                    f"{run_dir.root} renders its figures, --overwrite replaces it, or choose "
                    f"another {directory_option}"
                )
            check_indexes(run_dir, plan.tasks, plan.seeds)
        else:  # a new run (or a resume of one stopped before its manifest: nothing to continue)
            tasks, seeds, configs = request or new_run_request()
        lock = run_dir.lock()
        try:
            return _train_locked(
                run_dir, started, tasks, seeds, configs, plan, progress, command, curricula, devices, followers
            )
        finally:
            lock.release()
    except BaseException as error:
        followers.fail(error)
        raise


def _follow_primary(started: float, devices) -> RunSummary:
    """A process other than 0 under ``jax.distributed``: it takes process 0's plan and restored
    states, runs its share of the same compiled program (the host callbacks run in process 0,
    which owns device 0) and writes nothing."""
    plan = broadcast_json()
    if "error" in plan:
        kind = RunAlreadyFinished if plan["kind"] == "RunAlreadyFinished" else RunFailed
        raise kind(f"process 0 stopped before training: {plan['error']}")
    tasks, seeds = plan["tasks"], plan["seeds"]
    configs = {name: PPOConfig.from_dict(data) for name, data in plan["configs"].items()}
    curricula = {name: c for name, data in plan["curricula"].items() if (c := Curriculum.from_dict(data))}
    setups = build_setups(tasks, configs, curricula, plan["manifest"])
    mesh = _protocol_mesh(setups, seeds, devices)
    keys = keys_for_seeds(seeds)
    runners = broadcast_tree({s.name: jax.tree.map(np.asarray, jax.jit(jax.vmap(s.ppo.init))(keys)) for s in setups})
    runners = {name: shard_runner(runner, mesh) for name, runner in runners.items()}
    compile_started = time.perf_counter()
    compiled = _compiled_program(setups, len(seeds), runners, curricula, mesh)
    compile_s = time.perf_counter() - compile_started
    wait_for_all_processes("train")
    final = gather_to_host(jax.block_until_ready(compiled(runners)))
    return RunSummary(
        Path(plan["run_dir"]), time.perf_counter() - started, compile_s, plan["resumed_from"], 0.0, 0.0, final
    )


def _train_locked(
    run_dir: RunDirectory,
    started: float,
    tasks: list[str],
    seeds: list[int],
    configs: dict[str, PPOConfig],
    plan: ResumePlan | None,
    progress: bool,
    command: list[str] | None,
    curricula,
    devices,
    followers: _Followers,
) -> RunSummary:
    """``train_all_seeds`` once this process holds the run directory (``plan``: a resume)."""
    resume = plan is not None
    manifest = run_dir.read_manifest() if resume else None
    if plan is not None:
        tasks, seeds, configs, curricula = plan.tasks, plan.seeds, plan.configs, plan.curricula
    curricula = validate_curricula(tasks, curricula)
    setups = build_setups(tasks, configs, curricula, manifest)
    print(
        start_banner(run_dir.root, tasks, seeds, {s.name: s.config for s in setups}, resume=manifest is not None),
        file=sys.stderr,
        flush=True,
    )
    mesh = _protocol_mesh(setups, seeds, devices)

    keys = keys_for_seeds(seeds)
    runners, resumed_from, elapsed_offset, quarantined = {}, {}, 0.0, []
    update_rows = {name: {seed: [] for seed in seeds} for name in tasks}
    checkpoint_rows = {name: {seed: [] for seed in seeds} for name in tasks}
    kept = {name: {seed: {} for seed in seeds} for name in tasks}
    for setup in setups:
        initial = jax.jit(jax.vmap(setup.ppo.init))(keys)
        runners[setup.name] = initial
        if resume:
            task_rows = {"updates": update_rows[setup.name], "checkpoints": checkpoint_rows[setup.name]}
            restored = restore_task(run_dir, setup, seeds, task_rows, initial)
            kept[setup.name] = restored.kept
            quarantined += restored.quarantined
            if restored.runner is not None:
                runners[setup.name] = restored.runner
                resumed_from[setup.name] = restored.steps
                elapsed_offset = max(elapsed_offset, restored.elapsed_s)
    followers.send(
        {
            "tasks": tasks,
            "seeds": seeds,
            "configs": {s.name: s.config.to_dict() for s in setups},
            "curricula": {name: c.to_dict() for name, c in curricula.items()},
            "manifest": manifest,
            "run_dir": str(run_dir.root),
            "resumed_from": resumed_from,
        }
    )
    if jax.process_count() > 1:  # every process places the same (restored) states on the mesh
        runners = broadcast_tree({name: jax.tree.map(np.asarray, runner) for name, runner in runners.items()})

    if manifest is None:
        print("evaluating the baselines and floor policies on the held-out set ...", file=sys.stderr, flush=True)
        baselines_started = time.perf_counter()
        baselines = evaluate_baselines(setups)
        print(f"  done in {format_duration(time.perf_counter() - baselines_started)}", file=sys.stderr, flush=True)
        manifest = environment_description()
        manifest.update(
            status="running",
            tasks=tasks,
            seeds=seeds,
            command=command,
            configs={s.name: s.config.to_dict() for s in setups},
            protocol=PROTOCOL_TEXT,
            environments={s.name: s.task.env_kwargs(s.env) for s in setups},
            curricula={name: curriculum.to_dict() for name, curriculum in curricula.items()},
            baselines=baselines,
            wall_time_s=None,
            precision=current_precision(),
        )
    else:
        manifest.setdefault("precision", current_precision())  # plan_resume checked it
        manifest.setdefault("resumes", []).append(
            {
                "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "status_before": manifest["status"],
                "command": command,
                "from_steps": {name: resumed_from.get(name, 0) for name in tasks},
                "extended": {name: {"from_steps": old, "to_steps": new} for name, (old, new) in plan.extended.items()},
                "quarantined": quarantined,
            }
        )
        if plan.extended:
            for name in plan.extended:
                manifest["configs"][name] = configs[name].to_dict()
            print(
                "resume: extending "
                + ", ".join(
                    f"{name} from {old:,} to {new:,} steps per seed" for name, (old, new) in plan.extended.items()
                ),
                file=sys.stderr,
            )
    manifest.update(status="running")
    manifest["mesh"] = None if mesh is None else describe_mesh(mesh)
    run_dir.write_manifest(manifest)

    bar = (
        Progress(
            {s.name: TaskPlan.from_config(s.config) for s in setups},
            len(seeds),
            done_updates={s.name: int(np.asarray(runners[s.name].update_index)[0]) for s in setups},
        )
        if progress
        else None
    )
    recorder = RunRecorder(
        run_dir,
        setups,
        seeds,
        elapsed_offset=elapsed_offset,
        update_rows=update_rows,
        checkpoint_rows=checkpoint_rows,
        progress=bar,
        kept=kept,
    )
    print("compiling the training program (nothing trains until it is compiled) ...", file=sys.stderr, flush=True)
    compile_started = time.perf_counter()
    runners = jax.tree.map(lambda x: jnp.asarray(x, dtype=np.asarray(x).dtype), runners)
    if mesh is not None:
        runners = {name: shard_runner(runner, mesh) for name, runner in runners.items()}
    compiled = _compiled_program(setups, len(seeds), runners, curricula, mesh)
    compile_s = time.perf_counter() - compile_started
    _HANDLERS.target = recorder
    message = f"compiled in {compile_s:.1f} s; training {', '.join(tasks)} x seeds {seeds}"
    if resumed_from:
        message += f" (resumed at {resumed_from})"
    print(message, file=sys.stderr, flush=True)
    wait_for_all_processes("train")
    recorder.start()
    error = None
    try:
        final = gather_to_host(jax.block_until_ready(compiled(runners)))
    except Exception as raised:  # an error in a host callback arrives as a JaxRuntimeError here
        error = raised
    finally:
        _HANDLERS.target = None
        try:
            recorder.finish()
        except Exception as raised:
            error = error or raised
    wall = time.perf_counter() - started
    if error is None and recorder.failure is not None:
        error = RuntimeError(recorder.failure)
    if error is None:
        disagreements = index_disagreements(run_dir, setups, seeds)
        if disagreements:
            error = RuntimeError("the index and the checkpoints on disk disagree: " + "; ".join(disagreements))
    if error is not None:
        reason = recorder.failure or f"{type(error).__name__}: {error}"
        manifest = run_dir.read_manifest()
        manifest.update(status="failed", error=reason, wall_time_s=(manifest.get("wall_time_s") or 0.0) + wall)
        run_dir.write_manifest(manifest)
        raise RunFailed(
            f"training stopped: {reason}. {run_dir.root} is marked failed in manifest.json; "
            "fix the cause, then continue it with --resume"
        ) from error

    diverged = diverged_seeds(setups, seeds, final)
    manifest = run_dir.read_manifest()
    previous_wall = manifest.get("wall_time_s") or 0.0
    manifest.update(
        status="diverged" if diverged else "finished",
        diverged=diverged,
        wall_time_s=previous_wall + wall,
        compile_s=compile_s,
        peak_memory_bytes=peak_memory_bytes(),
        timing={
            "seconds_in_checkpoint_callbacks": recorder.seconds_in_checkpoint_callbacks,
            "seconds_in_evaluation_and_showcase": recorder.seconds_in_evaluation,
            "checkpoint_events": recorder.checkpoints_written,
            "resumed_from": resumed_from,
        },
    )
    run_dir.write_manifest(manifest)
    if diverged:
        seeds_said = "; ".join(
            f"{task} seed {seed} at update {at['update']} ({at['env_steps']:,} env steps)"
            for task, per_seed in diverged.items()
            for seed, at in per_seed.items()
        )
        raise RunDiverged(
            f"training diverged: {seeds_said}: a loss or parameter became NaN or infinite, and "
            "those seeds kept their last finite parameters from then on. "
            f"{run_dir.root} is marked diverged in manifest.json (and updates.csv, column "
            "diverged_at_update); it is not a finished result. Start a new run with a smaller "
            "learning rate or other settings",
            diverged,
        )
    return RunSummary(
        run_dir.root,
        wall,
        compile_s,
        resumed_from,
        recorder.seconds_in_checkpoint_callbacks,
        recorder.seconds_in_evaluation,
        final,
    )


def diverged_seeds(setups: list[TaskSetup], seeds: list[int], runners: dict) -> dict[str, dict[str, dict[str, int]]]:
    """task -> seed (a string, as JSON keys are) -> the first update whose losses or parameters
    were not finite and its env steps, read from the final states (a diverged seed's
    optimiser stopped counting there); tasks without a diverged seed are left out."""
    diverged = {}
    for setup in setups:
        first = np.asarray(diverged_at_update(runners[setup.name], setup.config))
        per_seed = {
            str(seed): {"update": int(update), "env_steps": int(update) * setup.config.batch_size}
            for seed, update in zip(seeds, first)
            if update > 0
        }
        if per_seed:
            diverged[setup.name] = per_seed
    return diverged
