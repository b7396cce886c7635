"""What a run trains, settled once before anything is compiled or written: the ``RunPlan``.

A new run's plan is the caller's request over the tasks' defaults (``new_run_plan``); a resumed
run's is the manifest's record, which the request must agree with (``purehr.run.planning.resume``). Both
are checked here once (tasks, seeds, curricula, configs with the overrides merged in), and
under ``jax.distributed`` process 0 sends the same plan to the other processes
(``to_json`` / ``from_json``), so every process builds the same program from it."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jax

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import algorithm_of, get_algorithm, make_algorithm
from purehr.engine.distributions import action_mask_reader
from purehr.engine.seeds import validate_seeds
from purehr.envs.base import Environment, check_environment
from purehr.envs.curriculum import Curriculum
from purehr.envs.rollout import defines_success
from purehr.envs.spaces import flat_dim
from purehr.population import PBTSettings, PopulationStep
from purehr.protocol_settings import ProtocolSettings, without_legacy_settings
from purehr.run.compiled.task_setup import build_setups
from purehr.run.compiled.train_all import TaskSetup, population_updates
from purehr.run.host.estimate import TrainingMemory, check_training_memory
from purehr.run.planning.settings import (
    TASK,
    EntrySettings,
    SettingsLayer,
    base_sources,
    entry_settings,
    resolve_entry,
)
from purehr.run.store.record import recorded_config, recorded_protocol
from purehr.run.store.run_dir import enclosing_run_directory
from purehr.tasks import TASK_NAMES, get_task
from purehr.tracking.claims import Owner
from purehr.tracking.naming import run_label
from purehr.tracking.settings import TrackingSettings

DEFAULT_TASKS = TASK_NAMES
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
MAX_EPISODE_STEPS = 100_000
"""The longest episode a run takes: held-out evaluations run every episode for the whole horizon
(1e9 steps ran the baselines for over 10 minutes without a word)."""


@dataclass(frozen=True)
class RunRequest:
    """What the caller of ``train_all_seeds`` asked for, each part checked on its own before
    any directory is looked at. ``None``: not given (the defaults for a new run, the recorded
    values on a resume); ``overrides`` apply to every task's config (the protocol's settings
    among them, ``checkpoint_interval`` and the evaluations' episodes, to its protocol settings)."""

    tasks: list[str] | None = None
    seeds: list[int] | None = None
    configs: dict[str, AlgorithmConfig] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    curricula: dict[str, Curriculum | None] | None = None
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """task -> keyword arguments of its ``make_env`` (``--env-arg``), recorded in the manifest."""
    tracking: TrackingSettings = field(default_factory=TrackingSettings)
    """The dashboards it logs to (``--log``); a resume adds them to the recorded ones."""
    pbt: PBTSettings | None = None
    """Population-based training over the seeds (``--pbt``); None: independent seeds."""
    task_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    """task -> field values for that task alone (a config file's ``[task.NAME]``), over ``overrides``."""
    algorithm: str | None = None
    """The algorithm of every task entry without an ``@ALGORITHM`` suffix (``--algorithm``);
    None: PPO for a new run, the recorded one on a resume."""
    settings: tuple[SettingsLayer, ...] = ()
    """Sources of field values under ``overrides`` and ``task_overrides``, lowest first (the command
    line's: its profile, its config file, its flags; ``purehr.run.planning.settings``)."""

    @property
    def layers(self) -> tuple[SettingsLayer, ...]:
        """Every source of field values, lowest first: ``settings``, then ``overrides`` and
        ``task_overrides`` (source "given")."""
        if not (self.overrides or self.task_overrides):
            return self.settings
        return (*self.settings, SettingsLayer("given", self.overrides, self.task_overrides))

    def given_for(self, task: str) -> dict[str, Any]:
        """Every value given for ``task`` by any source (the last source's where several give one)."""
        return {name: value for layer in self.layers for name, value in layer.for_entry(task).items()}

    def named_tasks(self) -> set[str]:
        """The tasks named by a config given whole or by a source's values for one task."""
        return set(self.configs) | {task for layer in self.layers for task in layer.per_task}

    @classmethod
    def checked(
        cls,
        tasks=None,
        seeds=None,
        configs=None,
        overrides=None,
        curricula=None,
        env_kwargs=None,
        log=None,
        pbt=None,
        task_overrides=None,
        algorithm=None,
        settings=(),
    ) -> RunRequest:
        if algorithm is not None:
            get_algorithm(algorithm)  # an unknown one is named before anything else
        if pbt is not None and not isinstance(pbt, PBTSettings):
            raise ValueError(f"pbt={pbt!r}: expected a purehr.population.PBTSettings (or None)")
        if tasks is not None:
            tasks = validate_tasks(tasks)
        if seeds is not None:
            seeds = validate_seeds(seeds)
        return cls(
            tasks,
            seeds,
            dict(configs or {}),
            dict(overrides or {}),
            curricula,
            validate_env_kwargs(env_kwargs),
            TrackingSettings.checked(log),
            pbt,
            {task: dict(values) for task, values in (task_overrides or {}).items()},
            algorithm,
            tuple(settings),
        )


@dataclass(frozen=True)
class RunPlan:
    """Every task x seed a run trains and how. Lists, not tuples: they are written to the
    manifest and printed as they are."""

    run_dir: Path
    tasks: list[str]
    seeds: list[int]
    configs: dict[str, AlgorithmConfig]  # the overrides merged in; an extended task: its new budget
    curricula: dict[str, Curriculum]  # checked; a task without one is absent
    manifest: dict | None = None  # a resumed run's, as read (the run's manifest is written from a copy)
    extended: dict[str, tuple[int, int]] = field(default_factory=dict)  # task -> (old, new budget)
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)  # a new run's --env-arg, by task
    tracking: TrackingSettings = field(default_factory=TrackingSettings)  # with a W&B run id per task x seed
    pbt: PBTSettings | None = None  # population-based training over the seeds, checked
    protocols: dict[str, ProtocolSettings] = field(default_factory=dict)  # checkpoint and evaluation cadence
    sources: dict[str, dict[str, str]] = field(default_factory=dict)  # task -> field -> where its value came from

    @property
    def resumed(self) -> bool:
        return self.manifest is not None

    def setups(self) -> list[TaskSetup]:
        """The tasks' setups; a resumed run rebuilds the environments its manifest recorded.
        Under PBT each task's seeds are its population (``PopulationStep``)."""
        setups = build_setups(self.tasks, self.configs, self.curricula, self.manifest, self.env_kwargs, self.protocols)
        if self.pbt is None:
            return setups
        return [replace(setup, population=population_step(self.pbt, setup, self.seeds)) for setup in setups]

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "tasks": self.tasks,
            "seeds": self.seeds,
            "configs": {name: config.to_dict() for name, config in self.configs.items()},
            "algorithms": {name: algorithm_of(config).name for name, config in self.configs.items()},
            "protocol_settings": {name: protocol.to_dict() for name, protocol in self.protocols.items()},
            "curricula": {name: curriculum.to_dict() for name, curriculum in self.curricula.items()},
            "manifest": self.manifest,
            "extended": {name: list(budgets) for name, budgets in self.extended.items()},
            "env_kwargs": self.env_kwargs,
            "tracking": self.tracking.to_json(),
            "pbt": None if self.pbt is None else self.pbt.to_dict(),
            "setting_sources": self.sources,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunPlan:
        return cls(
            Path(data["run_dir"]),
            list(data["tasks"]),
            list(data["seeds"]),
            {name: recorded_config(data, name) for name in data["configs"]},
            {name: Curriculum.from_dict(curriculum) for name, curriculum in data["curricula"].items()},
            data["manifest"],
            {name: (old, new) for name, (old, new) in data["extended"].items()},
            dict(data.get("env_kwargs") or {}),
            TrackingSettings.from_json(data.get("tracking")),
            None if data.get("pbt") is None else PBTSettings.from_dict(data["pbt"]),
            {name: recorded_protocol(data, name) for name in data["configs"]},
            dict(data.get("setting_sources") or {}),
        )


def new_run_plan(run_dir: Path, request: RunRequest) -> RunPlan:
    """Tasks, seeds and every config of a new run (the request over the defaults), checked
    before anything is touched."""
    tasks = request.tasks or list(DEFAULT_TASKS)
    curricula = validate_curricula(tasks, request.curricula)
    unknown = request.named_tasks() - set(tasks)
    if unknown:
        raise ValueError(f"configs given for tasks {sorted(unknown)} that are not being trained ({tasks})")
    settings = {task: resolved_settings(task, request, *entry_settings(task, request.algorithm)) for task in tasks}
    configs = {task: entry.config for task, entry in settings.items()}
    protocols = {task: entry.protocol for task, entry in settings.items()}
    envs = check_env_kwargs(tasks, request.env_kwargs, protocols)
    seeds = request.seeds or list(DEFAULT_SEEDS)
    check_memory(envs, configs, len(seeds))
    tracking = request.tracking.absolute().with_owner()
    tracking.check_writable(Path(run_dir))
    check_log_dir(tracking, Path(run_dir), tasks, seeds, recorded=None)
    tracking = tracking.with_run_ids(tasks, seeds)
    if request.pbt is not None:
        check_population(request.pbt, seeds, configs, protocols, request.env_kwargs)
    protocols = settle_grouping(protocols, request, tracking)
    return RunPlan(
        Path(run_dir),
        tasks,
        seeds,
        configs,
        curricula,
        env_kwargs=request.env_kwargs,
        tracking=tracking,
        pbt=request.pbt,
        protocols=protocols,
        sources={task: entry.sources for task, entry in settings.items()},
    )


def resolved_settings(
    task: str,
    request: RunRequest,
    config: AlgorithmConfig,
    protocol: ProtocolSettings,
    sources: dict[str, str] | None = None,
) -> EntrySettings:
    """``task``'s settings: ``config`` and ``protocol`` (the task's defaults for a new run, with
    ``sources`` None; the recorded ones and their sources on a resume), or the config the request
    gives whole, under the request's sources (``purehr.run.planning.settings``)."""
    if sources is None:
        sources = base_sources(TASK, config, protocol)
    if task in request.configs:  # with the protocol settings a config written when they were its fields carries
        config, legacy = without_legacy_settings(request.configs[task])
        protocol = protocol.replace(**legacy)
        sources = {**base_sources("given config", config), **base_sources(TASK, protocol)}
        sources.update(dict.fromkeys(legacy, "given config"))
    return resolve_entry(task, config, protocol, sources, request.layers)


def check_log_dir(
    tracking: TrackingSettings, run_dir: Path, tasks: list[str], seeds: list[int], recorded: TrackingSettings | None
) -> None:
    """TensorBoard's ``--log-dir``, before anything is written: named with ``--log tensorboard``,
    in no other run's directory, and each of its run folders free or this run's (its claim;
    on a resume, ``recorded``'s folder may hold the run's unclaimed events of before claims)."""
    tracking.check_log_dir_used()
    owner, logged_here = log_dir_owner(tracking, run_dir, recorded)
    if owner is None:
        return
    enclosing = enclosing_run_directory(Path(tracking.log_dir), run_dir)
    if enclosing is not None:
        raise ValueError(
            f"--log-dir {tracking.log_dir} is inside {enclosing}, another run's directory (its own "
            "dashboards go there); choose another --log-dir"
        )
    labels = [run_label(task, seed) for task in tasks for seed in seeds]
    tracking.check_log_dir_owner(owner, labels, recorded is not None, logged_here)


def log_dir_owner(
    tracking: TrackingSettings, run_dir: Path, recorded: TrackingSettings | None
) -> tuple[Owner | None, bool]:
    """(this run as its ``--log-dir``'s claims name it, whether the run logged to TensorBoard
    there before); no owner when it logs no TensorBoard or logs it in its own directory (the
    run directory's lock keeps that)."""
    if "tensorboard" not in tracking.backends or tracking.log_dir is None:
        return None, False
    folder, root = Path(tracking.log_dir), Path(os.path.abspath(run_dir))
    if Path(os.path.abspath(folder)).is_relative_to(root):
        return None, False
    logged_here = (
        recorded is not None
        and "tensorboard" in recorded.backends
        and os.path.abspath(recorded.tensorboard_dir(root)) == os.path.abspath(folder)
    )
    return Owner(tracking.owner, str(root)), logged_here


def check_population(
    pbt: PBTSettings,
    seeds: list[int],
    configs: dict[str, AlgorithmConfig],
    protocols: dict[str, ProtocolSettings],
    env_kwargs: dict[str, dict] | None = None,
) -> None:
    """A PBT run's settings against its population (the seeds), every task's settings and, where
    the fitness asked for is success, whether the task's environment defines one."""
    fire_at = {task: population_updates(config, protocols[task], pbt.interval) for task, config in configs.items()}
    between = {task: population_updates(config, protocols[task], 1) for task, config in configs.items()}
    pbt.check_run(len(seeds), configs, fire_at, between, protocols)
    for task, rule in pbt.fitness.items():
        if rule == "success" and task in configs:
            pbt.check_fitness(task, defines_success(get_task(task).make_env(**(env_kwargs or {}).get(task, {}))))


def grouping_conflict(pbt: PBTSettings | None, tracking: TrackingSettings) -> str | None:
    """Why a run cannot group its quick evaluations (``ProtocolSettings.group_quick_evaluations``:
    a quick checkpoint's evaluation is handed over at its group's end), or None: PBT's fitness needs
    it at its checkpoint, and W&B, which takes no step back, would drop it."""
    if pbt is not None:
        return "--pbt, whose fitness reads each quick evaluation at its checkpoint"
    if "wandb" in tracking.backends:
        return "--log wandb, which takes no step back and would drop the quick checkpoints' held-out values"
    return None


def settle_grouping(
    protocols: dict[str, ProtocolSettings], request: RunRequest, tracking: TrackingSettings
) -> dict[str, ProtocolSettings]:
    """A new run's protocols with grouping turned off, said once, where a task's default groups
    and the run cannot (``grouping_conflict``); grouping asked for in such a run is refused."""
    conflict = grouping_conflict(request.pbt, tracking)
    grouped = [task for task, protocol in protocols.items() if protocol.group_quick_evaluations]
    if conflict is None or not grouped:
        return protocols
    asked = [t for t in grouped if "group_quick_evaluations" in request.given_for(t)]
    if asked:
        raise ValueError(
            f"group_quick_evaluations=True ({', '.join(asked)}: the quick evaluations are handed over at each "
            f"group's full checkpoint) cannot run with {conflict}; expected --group-quick-evaluations false"
        )
    print(
        f"note: {', '.join(grouped)}: each quick checkpoint evaluated at its own update, not grouped, for {conflict}",
        file=sys.stderr,
    )
    return {task: protocol.replace(group_quick_evaluations=False) for task, protocol in protocols.items()}


def check_grouping(protocols: dict[str, ProtocolSettings], pbt: PBTSettings | None, tracking: TrackingSettings) -> None:
    """A resumed run keeps its recorded settings: one that groups cannot take --pbt or W&B."""
    grouped = [task for task, protocol in protocols.items() if protocol.group_quick_evaluations]
    conflict = grouping_conflict(pbt, tracking)
    if grouped and conflict is not None:
        raise ValueError(
            f"--resume: the run groups its quick evaluations ({', '.join(grouped)}: group_quick_evaluations=True, "
            f"recorded), which cannot run with {conflict}; resume without it"
        )


def population_step(pbt: PBTSettings, setup: TaskSetup, seeds: list[int]) -> PopulationStep:
    """``setup``'s population step: its fitness rule, the updates it fires at, its key."""
    rule = pbt.fitness_of(setup.name, setup.env.defines_success)
    fire_at = population_updates(setup.config, setup.protocol, pbt.interval)
    return PopulationStep(pbt, rule, fire_at, seeds[0], setup.name)


def validate_request(tasks, seeds) -> tuple[list[str], list[int]]:
    return validate_tasks(tasks), validate_seeds(seeds)


def validate_tasks(tasks) -> list[str]:
    """At least one registered task entry (``swing``, ``swing@sac``: each an algorithm that can
    act in the task's actions), none repeated."""
    tasks = list(tasks)
    if not tasks:
        raise ValueError("tasks: expected at least one task")
    for task in tasks:
        get_task(task)
    if len(set(tasks)) != len(tasks):
        repeated = sorted({task for task in tasks if tasks.count(task) > 1})
        raise ValueError(
            f"tasks={tasks}: each task entry may appear once ({', '.join(repeated)} repeated); train a task "
            "twice under different entries (swing swing@ppo)"
        )
    return tasks


def validate_env_kwargs(env_kwargs) -> dict[str, dict[str, Any]]:
    """task -> {keyword: JSON value}: what a manifest can record, so a resume rebuilds it."""
    env_kwargs = dict(env_kwargs or {})
    for task, kwargs in env_kwargs.items():
        if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
            raise ValueError(f"env_kwargs[{task!r}] is {kwargs!r}; expected a dict of keyword arguments")
        try:
            json.dumps(kwargs, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(
                f"env_kwargs[{task!r}] = {kwargs!r}: expected JSON values (numbers, strings, booleans, lists), "
                "which the manifest records so that a resume and a restore rebuild the same environment"
            ) from None
    return env_kwargs


def check_env_kwargs(
    tasks: list[str], env_kwargs: dict[str, dict[str, Any]], protocols: dict[str, ProtocolSettings]
) -> dict[str, Environment]:
    """task -> its environment, built with its keyword arguments (named when it does not build,
    or when its episodes are too long to evaluate: ``check_horizon``)."""
    unknown = sorted(set(env_kwargs) - set(tasks))
    if unknown:
        raise ValueError(f"environment arguments given for tasks {unknown} that are not being trained ({tasks})")
    envs = {}
    for task in tasks:
        kwargs = env_kwargs.get(task, {})
        given = f" with environment arguments {kwargs}" if kwargs else ""
        try:
            envs[task] = get_task(task).make_env(**kwargs)
            check_environment(envs[task])  # what training reads of it, and a mask's width, named by the task
            params = envs[task].default_params
            action_mask_reader(envs[task].observation_space(params), envs[task].action_space(params))
        except (TypeError, ValueError) as error:
            raise ValueError(f"task {task!r}{given}: {error}") from None
        check_horizon(f"task {task!r}{given}", envs[task], protocols[task])
    return envs


def check_horizon(described: str, env: Environment, protocol: ProtocolSettings) -> None:
    """``ValueError`` for episodes longer than ``MAX_EPISODE_STEPS``: every held-out evaluation
    (the baselines' before training, every checkpoint's) runs each episode for the whole horizon."""
    horizon = env.max_episode_steps(env.default_params)
    if horizon > MAX_EPISODE_STEPS:
        episodes = protocol.eval_episodes
        raise ValueError(
            f"{described}: its episodes last {horizon:,} steps (max_episode_steps); expected at most "
            f"{MAX_EPISODE_STEPS:,}: every held-out evaluation (the baselines' before training, then every "
            f"checkpoint's) runs each of its {episodes:,} episodes (eval_episodes) for the whole horizon, "
            f"{episodes * horizon:,} environment steps each time"
        )


def check_memory(envs: dict[str, Environment], configs: dict[str, AlgorithmConfig], num_seeds: int) -> None:
    """``ValueError`` naming the sizes of a training that cannot fit in the machine's memory,
    estimated from the shapes ``init`` builds (nothing is compiled or allocated)."""
    needs = []
    for task, env in envs.items():
        algorithm = make_algorithm(configs[task], env, env.default_params)
        observation_size = flat_dim(env.observation_space(env.default_params))
        needs.append(TrainingMemory.of(task, algorithm, configs[task], observation_size, num_seeds))
    check_training_memory(needs)


def validate_curricula(tasks: list[str], curricula: dict[str, Curriculum | None] | None) -> dict[str, Curriculum]:
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


def current_precision() -> str:
    """What the arrays of a run are: part of the run, since a resume in another precision
    cannot continue it bit for bit."""
    return "float64" if jax.config.jax_enable_x64 else "float32"
