"""``train_all_seeds``: the protocol of docs/protocol.md, from argument checks to the finished
run directory. All validation happens before anything is compiled or written."""

from __future__ import annotations

import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.curriculum import Curriculum
from purehr.distributed import describe_mesh, make_mesh, select_devices, shard_runner
from purehr.ppo.config import PPOConfig
from purehr.ppo.train import diverged_at_update, keys_for_seeds, make_ppo
from purehr.run.checkpoints import CorruptCheckpointError, tree_digest
from purehr.run.messages import start_banner
from purehr.run.progress import Progress, TaskPlan, format_duration
from purehr.run.recorder import RunRecorder, parse_row, seed_slice
from purehr.run.run_dir import RunDirectory, RunDirectoryBusy, environment_description, read_csv
from purehr.run.runner import TaskSetup, make_train_all
from purehr.run.tasks import get_task

DEFAULT_TASKS = ("swing", "hrv")
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
PROTOCOL_TEXT = ("PPO per docs/protocol.md: every task x seed trained in one jax.jit (scan over updates "
                 "outside, vmap over seeds inside); checkpoint at the first update at or beyond each "
                 "multiple of checkpoint_interval (and at the last update) with held-out evaluation "
                 "on the device; deterministic policies for evaluation.")


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
    final_runners: dict[str, Any]       # task -> RunnerState with a leading seed axis


class _HandlerSlot:
    """The compiled program calls whichever recorder is in the slot, so one compiled program
    serves every run of the same shape in a process (a resume, a test) without recompiling."""
    target = None

    def on_update(self, task, metrics):
        self.target.on_update(task, metrics)

    def on_checkpoint(self, task, runner, evaluation, showcase):
        self.target.on_checkpoint(task, runner, evaluation, showcase)


_HANDLERS = _HandlerSlot()
_PROGRAMS: dict[tuple, Any] = {}


def _compiled_program(setups: list[TaskSetup], num_seeds: int, runners: dict,
                      curricula: dict[str, Curriculum] | None = None, mesh=None):
    curricula = curricula or {}
    mesh_key = None if mesh is None else (tuple(mesh.shape.items()), tuple(d.id for d in mesh.devices.flat))
    key = (tuple((s.name, s.config, curricula.get(s.name)) for s in setups), num_seeds,
           bool(jax.config.jax_enable_x64), mesh_key)
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


def build_setups(tasks: list[str], configs: dict[str, PPOConfig],
                 curricula: dict[str, Curriculum] | None = None,
                 manifest: dict | None = None) -> list[TaskSetup]:
    """One setup per task. A task with a curriculum trains under its schedule (in the scan)
    and is evaluated (checkpoints and baseline) on the curriculum's final stage. A resumed
    run (``manifest``) rebuilds the environments it recorded."""
    curricula = validate_curricula(tasks, curricula)
    setups = []
    for name in tasks:
        task = get_task(name)
        env = task.make_env() if manifest is None else task.env_from_manifest(manifest)
        config = configs.get(name, task.default_config)
        curriculum = curricula.get(name)
        schedule = None if curriculum is None else curriculum.schedule(config.num_updates)
        ppo = make_ppo(config, env, env.default_params, schedule)
        eval_params = ppo.params_at(ppo.num_updates - 1, config.hyperparams())
        if curriculum is not None:
            eval_params = curriculum.final_params(eval_params)
        setups.append(TaskSetup(task, env, env.default_params, eval_params, config, ppo))
    return setups


def validate_curricula(tasks: list[str], curricula: dict[str, Curriculum] | None) -> dict[str, Curriculum]:
    """Drop ``None`` entries; refuse a curriculum for a task not trained or without the HRV
    params (difficulty, target_precision)."""
    curricula = {name: c for name, c in (curricula or {}).items() if c is not None}
    for name, curriculum in curricula.items():
        if name not in tasks:
            raise ValueError(f"curriculum given for task {name!r}, which is not being trained ({tasks})")
        if not isinstance(curriculum, Curriculum):
            raise ValueError(f"curriculum for {name!r} is {curriculum!r}; expected a purehr.curriculum.Curriculum")
        env = get_task(name).make_env()
        try:
            curriculum.check_params(env.default_params)
        except TypeError:
            raise ValueError(f"task {name!r} has no difficulty schedule (its params lack difficulty / "
                             "target_precision); a curriculum applies to the hrv task") from None
    return curricula


def manifest_curricula(manifest: dict) -> dict[str, Curriculum]:
    """The curricula a run was started with (``manifest["curricula"]``; absent = none)."""
    return {name: c for name, data in (manifest.get("curricula") or {}).items()
            if (c := Curriculum.from_dict(data)) is not None}


def evaluate_baselines(setups: list[TaskSetup]) -> dict[str, Any]:
    """The baseline (structured controller / oracle) and the floor policies (doing nothing,
    acting at random) of every task, on the held-out protocol PPO is judged on."""
    baselines = {}
    for setup in setups:
        def heldout(policy):
            metrics = jax.jit(lambda: setup.task.heldout_evaluation(
                setup.env, setup.eval_env_params, policy, num_episodes=setup.config.eval_episodes))()
            return {k: float(v) for k, v in metrics.items()}

        baselines[setup.name] = {
            "name": setup.task.baseline_name, "definition": setup.task.baseline_definition,
            "metrics": heldout(setup.task.make_baseline_policy(setup.env, setup.eval_env_params)),
            "floors": {name: heldout(make(setup.env, setup.eval_env_params))
                       for name, make in setup.task.floor_policies.items()}}
    return baselines


def prepare_run_directory(run_dir: RunDirectory, resume: bool, overwrite: bool) -> bool:
    """Refuses what must not be touched; returns whether there is a run to continue."""
    if resume and overwrite:
        raise ValueError("--resume and --overwrite contradict each other; give one")
    holder = run_dir.holder()
    if holder is not None:
        raise RunDirectoryBusy(f"{run_dir.root} is in use by another running process (pid {holder}); wait for "
                               "it to end or stop it before --resume or --overwrite")
    if resume:
        if run_dir.holds_run():
            return True
        if _stopped_before_manifest(run_dir):
            print(f"--resume: {run_dir.root} has no manifest.json yet: the process that started the run was "
                  "stopped before training began; starting it from scratch", file=sys.stderr)
            return False
        raise FileNotFoundError(f"--resume: {run_dir.root} holds no run to resume (no manifest.json)")
    if run_dir.holds_run():
        status = run_dir.read_manifest().get("status", "unknown")
        if not overwrite:
            raise RunDirectoryInUse(
                f"{run_dir.root} already holds a {status} run; pass --resume to continue it, "
                f"--overwrite to replace it, or choose another --run-dir")
        print(f"--overwrite: removing the {status} run in {run_dir.root}", file=sys.stderr)
        shutil.rmtree(run_dir.root)
    elif run_dir.root.exists() and any(run_dir.root.iterdir()):
        raise RunDirectoryInUse(f"{run_dir.root} is not empty and holds no purehr run; choose another --run-dir")
    return False


def _stopped_before_manifest(run_dir: RunDirectory) -> bool:
    """Only the lock (and perhaps a half-written manifest) is there: a purehr process took the
    directory and was stopped while evaluating baselines or before, so nothing was trained."""
    if not run_dir.lock_path.exists():
        return False
    return all(entry.name in (run_dir.lock_path.name, f".{run_dir.manifest_path.name}.tmp")
               for entry in run_dir.root.iterdir())


def check_resume_configs(manifest: dict, tasks: list[str], seeds: list[int],
                         configs: dict[str, PPOConfig]) -> dict[str, PPOConfig]:
    if manifest["tasks"] != tasks or manifest["seeds"] != seeds:
        raise ValueError(f"--resume: the run was started with tasks={manifest['tasks']} seeds={manifest['seeds']}, "
                         f"not tasks={tasks} seeds={seeds}")
    saved = {task: PPOConfig.from_dict(manifest["configs"][task]) for task in tasks}
    for task, config in configs.items():
        if config != saved[task]:
            differing = [k for k, v in config.to_dict().items() if v != saved[task].to_dict()[k]]
            raise ValueError(f"--resume: {task} config differs from the saved run in {differing}; "
                             "resume with the original settings")
    return saved


@dataclass(frozen=True)
class TaskResume:
    """Where one task continues: the same point for every seed, so the rows, the checkpoints
    on disk and the states the program goes on from all describe one prefix of the run."""
    runner: Any | None                   # stacked over seeds; None: the task starts over
    steps: int                           # env steps of the resume point (0: starting over)
    elapsed_s: float
    kept: dict[int, dict[int, str]]      # seed -> {steps: digest} kept that the program saves again


def restore_task(run_dir: RunDirectory, setup: TaskSetup, seeds: list[int], recorder_rows: dict,
                 initial: Any = None) -> TaskResume:
    """The newest checkpoint every seed has intact (on disk, listed in checkpoints.csv with a
    matching digest, its updates logged) is the task's resume point. Everything newer, listed
    or not, half-written saves and damaged ones are moved to ``quarantine/`` with a note (never
    deleted); the rows in ``recorder_rows`` are trimmed to what stays on disk. With no such
    checkpoint beyond step 0 the task starts over from ``initial`` (the stacked initial states),
    keeping each seed's step-0 checkpoint when it holds exactly that state."""
    from purehr.run.checkpoints import SeedCheckpoints

    name = setup.name
    managers = {seed: SeedCheckpoints(run_dir.checkpoint_dir(name, seed)) for seed in seeds}
    try:
        for seed in seeds:      # before anything reads the folder: saves the killed process left half-written
            for entry in managers[seed].unfinished():
                _quarantine(managers[seed], name, seed, entry, "a save that never completed: the process "
                            "stopped while writing it")
        rows = {seed: _unique_rows(read_csv(run_dir.checkpoints_csv(name, seed))) for seed in seeds}
        updates = {seed: [parse_row(r) for r in read_csv(run_dir.updates_csv(name, seed))] for seed in seeds}
        usable = [{r["actual_steps"] for r in rows[seed].values()
                   if r["actual_steps"] in managers[seed].steps() and _updates_logged(updates[seed], r["update"])}
                  for seed in seeds]
        abstract = jax.eval_shape(setup.ppo.init, jax.random.PRNGKey(0))
        chosen, states = 0, None
        # step 0 is the initial state, which the keys rebuild exactly: resuming there is starting over
        for steps in sorted(set.intersection(*usable) - {0}, reverse=True):
            try:
                states = [managers[seed].restore(steps, abstract, rows[seed][steps]["state_digest"])
                          for seed in seeds]
                chosen = steps
                break
            except CorruptCheckpointError as error:
                print(f"resume: {error}; falling back to the previous checkpoint", file=sys.stderr)
        kept = {seed: {} for seed in seeds}
        if chosen == 0:
            print(f"resume: {name} starts over from step 0 (no checkpoint beyond step 0 that every seed "
                  f"{seeds} has intact and listed)", file=sys.stderr)
            for index, seed in enumerate(seeds):
                if _initial_state_kept(managers[seed], rows[seed].get(0), abstract,
                                       None if initial is None else seed_slice(initial, index)):
                    kept[seed][0] = rows[seed][0]["state_digest"]
        for seed in seeds:
            for steps in managers[seed].steps():
                if steps > chosen:
                    reason = (f"newer than the resume point {chosen} of {name}, the newest checkpoint every "
                              f"seed {seeds} has intact")
                elif steps not in rows[seed]:
                    reason = f"not listed in {run_dir.checkpoints_csv(name, seed).name}"
                elif chosen == 0 and steps not in kept[seed]:
                    reason = ("damaged: it does not hold the initial state this seed rebuilds; the task "
                              "starts over and saves step 0 again")
                else:
                    continue
                _quarantine(managers[seed], name, seed, str(steps), reason)
            on_disk = set(managers[seed].steps())
            for steps in sorted(set(rows[seed]) - on_disk):
                if steps <= chosen:
                    print(f"resume: {name} seed {seed}: dropping the row for checkpoint {steps}, which is not "
                          f"on disk", file=sys.stderr)
            recorder_rows["checkpoints"][seed] = [row for steps, row in sorted(rows[seed].items())
                                                  if steps in on_disk]
            last_update = rows[seed][chosen]["update"] if chosen else 0
            recorder_rows["updates"][seed] = [r for r in updates[seed] if r["update"] <= last_update]
    finally:
        for manager in managers.values():
            manager.finish()
    if chosen == 0:
        return TaskResume(None, 0, 0.0, kept)
    runner = jax.tree.map(lambda *leaves: np.stack(leaves), *states)
    return TaskResume(runner, chosen, rows[seeds[0]][chosen]["elapsed_s"], kept)


def _initial_state_kept(manager, row: dict | None, abstract: Any, initial: Any) -> bool:
    """A task starting over saves its initial state again at update 0: an intact step-0
    checkpoint holding exactly that state stays (and is not rewritten)."""
    if initial is None or row is None or 0 not in manager.steps():
        return False
    digest = tree_digest(initial)
    if row["state_digest"] != digest:
        return False
    try:
        manager.restore(0, abstract, digest)
    except CorruptCheckpointError:
        return False
    return True


def _quarantine(manager, task: str, seed: int, entry: str, reason: str) -> None:
    where = manager.quarantine_entry(entry, reason)
    print(f"resume: moved {task} seed {seed} checkpoint {entry} to {where} ({reason})", file=sys.stderr)


def _unique_rows(rows: list[dict[str, str]]) -> dict[int, dict]:
    """checkpoints.csv as {actual steps: row}; a step listed twice keeps its first row."""
    unique: dict[int, dict] = {}
    for row in map(parse_row, rows):
        unique.setdefault(row["actual_steps"], row)
    return unique


def _updates_logged(updates: list[dict], last: int) -> bool:
    """updates.csv holds every update 1..last, in order: resuming after ``last`` leaves no gap."""
    return [r["update"] for r in updates if r["update"] <= last] == list(range(1, last + 1))


def train_all_seeds(run_dir: str | Path, *, tasks=DEFAULT_TASKS, seeds=DEFAULT_SEEDS,
                    configs: dict[str, PPOConfig] | None = None, resume: bool = False,
                    overwrite: bool = False, progress: bool = True, render: bool = True,
                    command: list[str] | None = None,
                    curricula: dict[str, Curriculum | None] | None = None,
                    devices: int | None = None) -> RunSummary:
    """Train every task x seed in one compiled call; see docs/protocol.md for what it leaves.

    ``curricula`` maps a task (hrv) to its ``Curriculum`` (None: no schedule). It is recorded
    in the manifest; on ``resume`` the recorded one is used when ``curricula`` is None, and a
    different one is refused.

    ``devices`` (default: all visible) shards the seed axis, and the environment axis when
    devices outnumber seeds, over a mesh (``purehr.distributed``); on one device nothing moves."""
    started = time.perf_counter()
    tasks, seeds = validate_request(tasks, seeds)
    select_devices(devices)     # a bad --devices is refused before the run directory is touched
    if curricula is not None:
        validate_curricula(tasks, curricula)
    configs = dict(configs or {})
    unknown = set(configs) - set(tasks)
    if unknown:
        raise ValueError(f"configs given for tasks {sorted(unknown)} that are not being trained ({tasks})")
    run_dir = RunDirectory(Path(run_dir))
    resume = prepare_run_directory(run_dir, resume, overwrite)
    lock = run_dir.lock()
    try:
        return _train_locked(run_dir, started, tasks, seeds, configs, resume, progress, render, command,
                             curricula, devices)
    finally:
        lock.release()


def _train_locked(run_dir: RunDirectory, started: float, tasks: list[str], seeds: list[int],
                  configs: dict[str, PPOConfig], resume: bool, progress: bool, render: bool,
                  command: list[str] | None, curricula, devices) -> RunSummary:
    """``train_all_seeds`` once this process holds the run directory."""
    manifest = run_dir.read_manifest() if resume else None
    if manifest is not None:
        if manifest.get("status") == "finished":
            raise RunAlreadyFinished(f"{run_dir.root} holds a finished run; nothing to resume "
                                     "(use --overwrite to train it again, or another --run-dir)")
        configs = check_resume_configs(manifest, tasks, seeds, configs)
        saved_curricula = manifest_curricula(manifest)
        if curricula is not None and validate_curricula(tasks, curricula) != saved_curricula:
            raise ValueError(f"--resume: the run was started with curricula "
                             f"{ {k: c.to_dict() for k, c in saved_curricula.items()} }, not "
                             f"{ {k: c.to_dict() for k, c in validate_curricula(tasks, curricula).items()} }; "
                             "resume with the original settings (or omit --curriculum)")
        curricula = saved_curricula
    curricula = validate_curricula(tasks, curricula)
    setups = build_setups(tasks, configs, curricula, manifest)
    print(start_banner(run_dir.root, tasks, seeds, {s.name: s.config for s in setups}, resume=manifest is not None),
          file=sys.stderr, flush=True)
    mesh = _protocol_mesh(setups, seeds, devices)

    keys = keys_for_seeds(seeds)
    runners, resumed_from, elapsed_offset = {}, {}, 0.0
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
            if restored.runner is not None:
                runners[setup.name] = restored.runner
                resumed_from[setup.name] = restored.steps
                elapsed_offset = max(elapsed_offset, restored.elapsed_s)

    if manifest is None:
        print("evaluating the baselines and floor policies on the held-out set ...", file=sys.stderr, flush=True)
        baselines_started = time.perf_counter()
        baselines = evaluate_baselines(setups)
        print(f"  done in {format_duration(time.perf_counter() - baselines_started)}", file=sys.stderr, flush=True)
        manifest = environment_description()
        manifest.update(
            status="running", tasks=tasks, seeds=seeds, command=command,
            configs={s.name: s.config.to_dict() for s in setups}, protocol=PROTOCOL_TEXT,
            environments={s.name: s.task.env_kwargs(s.env) for s in setups},
            curricula={name: curriculum.to_dict() for name, curriculum in curricula.items()},
            baselines=baselines, wall_time_s=None)
    manifest.update(status="running")
    manifest["mesh"] = None if mesh is None else describe_mesh(mesh)
    run_dir.write_manifest(manifest)

    bar = Progress({s.name: TaskPlan.from_config(s.config) for s in setups}, len(seeds),
                   done_updates={s.name: int(np.asarray(runners[s.name].update_index)[0]) for s in setups}
                   ) if progress else None
    recorder = RunRecorder(run_dir, setups, seeds, elapsed_offset=elapsed_offset, update_rows=update_rows,
                           checkpoint_rows=checkpoint_rows, progress=bar, kept=kept)
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
    recorder.start()
    error = None
    try:
        final = compiled(runners)
        jax.block_until_ready(final)
    except Exception as raised:     # an error in a host callback arrives as a JaxRuntimeError here
        error = raised
    finally:
        _HANDLERS.target = None
        try:
            recorder.finish()
        except Exception as raised:
            error = error or raised
    wall = time.perf_counter() - started
    if error is not None:
        reason = recorder.failure or f"{type(error).__name__}: {error}"
        manifest = run_dir.read_manifest()
        manifest.update(status="failed", error=reason, wall_time_s=(manifest.get("wall_time_s") or 0.0) + wall)
        run_dir.write_manifest(manifest)
        raise RunFailed(f"training stopped: {reason}. {run_dir.root} is marked failed in manifest.json; "
                        "fix the cause, then continue it with --resume") from error

    diverged = diverged_seeds(setups, seeds, final)
    manifest = run_dir.read_manifest()
    previous_wall = manifest.get("wall_time_s") or 0.0
    manifest.update(status="diverged" if diverged else "finished", diverged=diverged,
                    wall_time_s=previous_wall + wall, compile_s=compile_s,
                    peak_memory_bytes=peak_memory_bytes(),
                    timing={"seconds_in_checkpoint_callbacks": recorder.seconds_in_checkpoint_callbacks,
                            "seconds_in_evaluation_and_showcase": recorder.seconds_in_evaluation,
                            "checkpoint_events": recorder.checkpoints_written,
                            "resumed_from": resumed_from})
    run_dir.write_manifest(manifest)
    if render:
        from purehr.viz.render import render_run
        print("rendering the figures and the replay ...", file=sys.stderr, flush=True)
        render_started = time.perf_counter()
        try:
            render_run(run_dir.root)
        except Exception as raised:
            if not diverged:
                raise
            print(f"rendering the diverged run failed: {type(raised).__name__}: {raised}", file=sys.stderr)
        manifest = run_dir.read_manifest()
        manifest.update(render_s=time.perf_counter() - render_started,
                        wall_time_with_render_s=time.perf_counter() - started + previous_wall)
        run_dir.write_manifest(manifest)
        wall = time.perf_counter() - started
    if diverged:
        seeds_said = "; ".join(f"{task} seed {seed} at update {at['update']} ({at['env_steps']:,} env steps)"
                               for task, per_seed in diverged.items() for seed, at in per_seed.items())
        raise RunDiverged(f"training diverged: {seeds_said}: a loss or parameter became NaN or infinite, and "
                          "those seeds kept their last finite parameters from then on. "
                          f"{run_dir.root} is marked diverged in manifest.json (and updates.csv, column "
                          "diverged_at_update); it is not a finished result. Start a new run with a smaller "
                          "learning rate or other settings", diverged)
    return RunSummary(run_dir.root, wall, compile_s, resumed_from, recorder.seconds_in_checkpoint_callbacks,
                      recorder.seconds_in_evaluation, jax.tree.map(np.asarray, final))


def diverged_seeds(setups: list[TaskSetup], seeds: list[int], runners: dict) -> dict[str, dict[str, dict[str, int]]]:
    """task -> seed (a string, as JSON keys are) -> the first update whose losses or parameters
    were not finite and its env steps, read from the final states (a diverged seed's
    optimiser stopped counting there); tasks without a diverged seed are left out."""
    diverged = {}
    for setup in setups:
        first = np.asarray(diverged_at_update(runners[setup.name], setup.config))
        per_seed = {str(seed): {"update": int(update), "env_steps": int(update) * setup.config.batch_size}
                    for seed, update in zip(seeds, first) if update > 0}
        if per_seed:
            diverged[setup.name] = per_seed
    return diverged
