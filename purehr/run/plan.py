"""What a run trains, settled once before anything is compiled or written: the ``RunPlan``.

A new run's plan is the caller's request over the tasks' defaults (``new_run_plan``); a resumed
run's is the manifest's record, which the request must agree with (``purehr.run.resume``). Both
are checked here once (tasks, seeds, curricula, configs with the overrides merged in), and
under ``jax.distributed`` process 0 sends the same plan to the other processes
(``to_json`` / ``from_json``), so every process builds the same program from it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jax

from purehr.envs.hrv.curriculum import Curriculum
from purehr.envs.rollout import defines_success
from purehr.population import PBTSettings, PopulationStep
from purehr.ppo.config import PPOConfig
from purehr.ppo.trainer import validate_seeds
from purehr.run.runner import TaskSetup, population_updates
from purehr.run.task_setup import build_setups
from purehr.tasks import TASK_NAMES, get_task
from purehr.tracking.naming import run_label
from purehr.tracking.settings import TrackingSettings

DEFAULT_TASKS = TASK_NAMES
DEFAULT_SEEDS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class RunRequest:
    """What the caller of ``train_all_seeds`` asked for, each part checked on its own before
    any directory is looked at. ``None``: not given (the defaults for a new run, the recorded
    values on a resume); ``overrides`` apply to every task's config."""

    tasks: list[str] | None = None
    seeds: list[int] | None = None
    configs: dict[str, PPOConfig] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    curricula: dict[str, Curriculum | None] | None = None
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """task -> keyword arguments of its ``make_env`` (``--env-arg``), recorded in the manifest."""
    tracking: TrackingSettings = field(default_factory=TrackingSettings)
    """The dashboards it logs to (``--log``); a resume adds them to the recorded ones."""
    pbt: PBTSettings | None = None
    """Population-based training over the seeds (``--pbt``); None: independent seeds."""

    @classmethod
    def checked(
        cls, tasks=None, seeds=None, configs=None, overrides=None, curricula=None, env_kwargs=None, log=None, pbt=None
    ) -> RunRequest:
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
        )


@dataclass(frozen=True)
class RunPlan:
    """Every task x seed a run trains and how. Lists, not tuples: they are written to the
    manifest and printed as they are."""

    run_dir: Path
    tasks: list[str]
    seeds: list[int]
    configs: dict[str, PPOConfig]  # the overrides merged in; an extended task: its new budget
    curricula: dict[str, Curriculum]  # checked; a task without one is absent
    manifest: dict | None = None  # a resumed run's, as read (the run's manifest is written from a copy)
    extended: dict[str, tuple[int, int]] = field(default_factory=dict)  # task -> (old, new budget)
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)  # a new run's --env-arg, by task
    tracking: TrackingSettings = field(default_factory=TrackingSettings)  # with a W&B run id per task x seed
    pbt: PBTSettings | None = None  # population-based training over the seeds, checked

    @property
    def resumed(self) -> bool:
        return self.manifest is not None

    def setups(self) -> list[TaskSetup]:
        """The tasks' setups; a resumed run rebuilds the environments its manifest recorded.
        Under PBT each task's seeds are its population (``PopulationStep``)."""
        setups = build_setups(self.tasks, self.configs, self.curricula, self.manifest, self.env_kwargs)
        if self.pbt is None:
            return setups
        return [replace(setup, population=population_step(self.pbt, setup, self.seeds)) for setup in setups]

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "tasks": self.tasks,
            "seeds": self.seeds,
            "configs": {name: config.to_dict() for name, config in self.configs.items()},
            "curricula": {name: curriculum.to_dict() for name, curriculum in self.curricula.items()},
            "manifest": self.manifest,
            "extended": {name: list(budgets) for name, budgets in self.extended.items()},
            "env_kwargs": self.env_kwargs,
            "tracking": self.tracking.to_json(),
            "pbt": None if self.pbt is None else self.pbt.to_dict(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunPlan:
        return cls(
            Path(data["run_dir"]),
            list(data["tasks"]),
            list(data["seeds"]),
            {name: PPOConfig.from_dict(config) for name, config in data["configs"].items()},
            {name: Curriculum.from_dict(curriculum) for name, curriculum in data["curricula"].items()},
            data["manifest"],
            {name: (old, new) for name, (old, new) in data["extended"].items()},
            dict(data.get("env_kwargs") or {}),
            TrackingSettings.from_json(data.get("tracking")),
            None if data.get("pbt") is None else PBTSettings.from_dict(data["pbt"]),
        )


def new_run_plan(run_dir: Path, request: RunRequest) -> RunPlan:
    """Tasks, seeds and every config of a new run (the request over the defaults), checked
    before anything is touched."""
    tasks = request.tasks or list(DEFAULT_TASKS)
    curricula = validate_curricula(tasks, request.curricula)
    unknown = set(request.configs) - set(tasks)
    if unknown:
        raise ValueError(f"configs given for tasks {sorted(unknown)} that are not being trained ({tasks})")
    defaults = {task: get_task(task).default_config for task in tasks}
    configs = merged_configs(tasks, request, defaults)
    check_env_kwargs(tasks, request.env_kwargs)
    seeds = request.seeds or list(DEFAULT_SEEDS)
    request.tracking.check_writable(Path(run_dir))
    request.tracking.check_new_log_dir([run_label(task, seed) for task in tasks for seed in seeds])
    tracking = request.tracking.with_run_ids(tasks, seeds)
    if request.pbt is not None:
        check_population(request.pbt, seeds, configs, request.env_kwargs)
    return RunPlan(
        Path(run_dir),
        tasks,
        seeds,
        configs,
        curricula,
        env_kwargs=request.env_kwargs,
        tracking=tracking,
        pbt=request.pbt,
    )


def check_population(
    pbt: PBTSettings, seeds: list[int], configs: dict[str, PPOConfig], env_kwargs: dict[str, dict] | None = None
) -> None:
    """A PBT run's settings against its population (the seeds), every task's config and, where
    the fitness asked for is success, whether the task's environment defines one."""
    fire_at = {task: population_updates(config, pbt.interval) for task, config in configs.items()}
    between = {task: population_updates(config, 1) for task, config in configs.items()}
    pbt.check_run(len(seeds), configs, fire_at, between)
    for task, rule in pbt.fitness.items():
        if rule == "success" and task in configs:
            pbt.check_fitness(task, defines_success(get_task(task).make_env(**(env_kwargs or {}).get(task, {}))))


def population_step(pbt: PBTSettings, setup: TaskSetup, seeds: list[int]) -> PopulationStep:
    """``setup``'s population step: its fitness rule, the updates it fires at, its key."""
    rule = pbt.fitness_of(setup.name, setup.env.defines_success)
    fire_at = population_updates(setup.config, pbt.interval)
    return PopulationStep(pbt, rule, fire_at, seeds[0], setup.name)


def merged_configs(tasks: list[str], request: RunRequest, base: dict[str, PPOConfig]) -> dict[str, PPOConfig]:
    """Each task's config: the one given for it, else ``base`` (the task's default for a new
    run, the recorded one on a resume), with the overrides applied."""
    return {task: request.configs.get(task, base[task]).replace(**request.overrides) for task in tasks}


def validate_request(tasks, seeds) -> tuple[list[str], list[int]]:
    return validate_tasks(tasks), validate_seeds(seeds)


def validate_tasks(tasks) -> list[str]:
    """At least one registered task, none repeated."""
    tasks = list(tasks)
    if not tasks:
        raise ValueError("tasks: expected at least one task")
    for task in tasks:
        get_task(task)
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"tasks={tasks}: each task may appear once")
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


def check_env_kwargs(tasks: list[str], env_kwargs: dict[str, dict[str, Any]]) -> None:
    """Each task's environment builds with its keyword arguments (named when it does not)."""
    unknown = sorted(set(env_kwargs) - set(tasks))
    if unknown:
        raise ValueError(f"environment arguments given for tasks {unknown} that are not being trained ({tasks})")
    for task, kwargs in env_kwargs.items():
        try:
            get_task(task).make_env(**kwargs)
        except (TypeError, ValueError) as error:
            raise ValueError(f"task {task!r} with environment arguments {kwargs}: {error}") from None


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
