"""The one reader of a run's record (what ``manifest.json`` says a task trained with: config,
protocol settings, curriculum, environment) and of a saved model's model.json, and the one place of
every rule for a record of an earlier version, one small function each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import DEFAULT_ALGORITHM, get_algorithm, split_entry
from purehr.engine.user_network import remember_recorded
from purehr.envs.base import Environment
from purehr.envs.curriculum import Curriculum
from purehr.protocol_settings import ProtocolSettings, split_settings
from purehr.run.store.columns import PBT_PREFIX
from purehr.tasks import TASKS, Task, get_task, task_of_env_class

RETIRED_FIELDS = ("progress_interval",)
"""Config fields older records hold that nothing reads any more (PPO's, before commit 15650e0)."""


@dataclass(frozen=True)
class TaskRecord:
    """One task of a run as its manifest records it."""

    task: Task
    config: AlgorithmConfig  # manifest["configs"][task], of the algorithm manifest["algorithms"][task]
    curriculum: Curriculum | None  # manifest["curricula"][task]; absent: the run had none
    env: Environment  # rebuilt from manifest["environments"][task] (older runs: the task's legacy env)
    protocol: ProtocolSettings  # manifest["protocol_settings"][task]; older runs: in configs[task]


def task_record(manifest: dict, task: Task | str) -> TaskRecord:
    """``task`` (a name, or the ``Task``) as ``manifest`` records it; the caller checked the run trains it."""
    task = _recorded_task(manifest, task) if isinstance(task, str) else task
    remember_recorded((manifest.get("networks") or {}).get(task.name))  # its network found from any directory
    curriculum = Curriculum.from_dict((manifest.get("curricula") or {}).get(task.name))
    config = recorded_config(manifest, task.name)
    return TaskRecord(task, config, curriculum, recorded_env(manifest, task), recorded_protocol(manifest, task.name))


def _recorded_task(manifest: dict, name: str) -> Task:
    """``get_task(name)``; a ``module:factory`` that no longer imports: refused naming its recorded file."""
    try:
        return get_task(name)
    except ValueError as error:
        source = (manifest.get("sources") or {}).get(name)
        file = source.get("file") if isinstance(source, dict) and source.get("suite") == "factory" else None
        if not isinstance(file, str) or "does not import" not in str(error):
            raise
        module = split_entry(name)[0].rpartition(":")[0]
        top = Path(file).parents[module.count(".") + (Path(file).name == "__init__.py")]
        raise ValueError(
            f"{error}. The run recorded it from {file}: give PYTHONPATH={top} (or run from {top}), or put the "
            "file back there if it moved"
        ) from None


def recorded_config(manifest: dict, task: str) -> AlgorithmConfig:
    """The config ``task`` trained with, as its algorithm reads it back."""
    return config_from_record(recorded_algorithm(manifest, task), manifest["configs"][task])


def recorded_algorithm(manifest: dict, task: str) -> str:
    """The algorithm ``task`` trained with; a run recorded before ``manifest["algorithms"]`` trained PPO."""
    return (manifest.get("algorithms") or {}).get(task, DEFAULT_ALGORITHM)


def saved_algorithm(description: dict) -> str:
    """The algorithm of a saved model's model.json; one saved before it was recorded: PPO."""
    return description.get("algorithm", DEFAULT_ALGORITHM)


def recorded_precision(manifest: dict) -> str:
    """The precision a run computed in; one recorded before ``precision`` was: float32 (--x64 was opt-in)."""
    return manifest.get("precision", "float32")


def recorded_env(manifest: dict, task: Task) -> Environment:
    """``task``'s environment as the manifest records it; a run recorded before that: ``legacy_env_kwargs``."""
    recorded = (manifest.get("environments") or {}).get(task.name)
    return task.make_env(**(task.legacy_env_kwargs if recorded is None else recorded_env_kwargs(task, recorded)))


def recorded_env_kwargs(task: Task, recorded: dict) -> dict:
    """``make_env`` keywords of a recorded environment; a keyword added since: ``unrecorded_env_kwargs``'s."""
    return {**task.unrecorded_env_kwargs, **recorded}


def saved_model_task(env: dict, where: Path) -> Task:
    """The task model.json names; a model saved before the task was recorded: the one of its env class."""
    name = env.get("task")
    if name is None:
        task = task_of_env_class(env["class"])
        if task is None:
            raise ValueError(
                f"{where} names environment class {env['class']!r} and no task; expected one of "
                f"{sorted({task.env_class.__name__ for task in TASKS.values()})}"
            )
        return task
    try:
        return get_task(name)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"{where} was saved from task {name!r}, which this process cannot build ({error}); a task of "
            "register_task must be registered again before loading"
        ) from None


def population_columns(rows: list[dict]) -> list[str]:
    """The ``pbt_`` columns of checkpoints.csv rows, over all: a run's before a column was added lack it."""
    return list(dict.fromkeys(column for row in rows for column in row if column.startswith(PBT_PREFIX)))


def config_from_record(algorithm: str, fields: dict) -> AlgorithmConfig:
    """``algorithm``'s recorded config; an older one's protocol settings, retired fields dropped, new at defaults."""
    fields, _ = split_settings(fields)
    return get_algorithm(algorithm).config_from_dict({k: v for k, v in fields.items() if k not in RETIRED_FIELDS})


def recorded_protocol(manifest: dict, task: str) -> ProtocolSettings:
    """``protocol_settings[task]``; a run recorded before they had an owner: those in ``configs[task]``."""
    recorded = (manifest.get("protocol_settings") or {}).get(task)
    if recorded is None:
        _, recorded = split_settings(manifest["configs"][task])
    return ProtocolSettings.from_dict(recorded)


def recorded_profile(manifest: dict) -> str:
    """The profile a run's manifest records (``run_config``); a run recorded before profiles: ``cpu``."""
    return ((manifest.get("run_config") or {}).get("values") or {}).get("profile") or "cpu"


def manifest_curricula(manifest: dict) -> dict[str, Curriculum]:
    """The curricula a run was started with, by task (``manifest["curricula"]``; absent = none)."""
    return {
        name: c
        for name, data in (manifest.get("curricula") or {}).items()
        if (c := Curriculum.from_dict(data)) is not None
    }
