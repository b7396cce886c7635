"""The one reader of a run's record: what ``manifest.json`` says a task trained with (its
algorithm's config, its protocol settings, its curriculum, its environment). Restoring a
checkpoint, planning a resume and re-evaluating baselines all rebuild a task from the same facts,
so they read them here, and so does a saved model's config (``config_from_record``). Records of
earlier versions are read here too: protocol settings among the config's fields (before they had
an owner), retired fields (``RETIRED_FIELDS``), no ``algorithms`` (PPO), no ``environments`` (the
task's ``legacy_env_kwargs``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import DEFAULT_ALGORITHM, get_algorithm, split_entry
from purehr.engine.user_network import remember_recorded
from purehr.envs.base import Environment
from purehr.envs.curriculum import Curriculum
from purehr.protocol_settings import ProtocolSettings, split_settings
from purehr.tasks import Task, get_task

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
    """``task`` (a name, or the ``Task`` already looked up) as ``manifest`` records it; the
    caller has checked that the run trains it."""
    task = _recorded_task(manifest, task) if isinstance(task, str) else task
    remember_recorded((manifest.get("networks") or {}).get(task.name))  # its network found from any directory
    curriculum = Curriculum.from_dict((manifest.get("curricula") or {}).get(task.name))
    config = recorded_config(manifest, task.name)
    return TaskRecord(
        task, config, curriculum, task.env_from_manifest(manifest), recorded_protocol(manifest, task.name)
    )


def _recorded_task(manifest: dict, name: str) -> Task:
    """``get_task(name)``; a ``module:factory`` whose module no longer imports is refused naming
    the file the run recorded it from (``sources``) and how to make it importable again."""
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
    """The config ``task`` trained with, as its algorithm reads it back (a run recorded before
    ``manifest["algorithms"]`` existed trained PPO)."""
    algorithm = (manifest.get("algorithms") or {}).get(task, DEFAULT_ALGORITHM)
    return config_from_record(algorithm, manifest["configs"][task])


def config_from_record(algorithm: str, fields: dict) -> AlgorithmConfig:
    """``algorithm``'s config as recorded (a manifest's, a saved model's), read as its current
    class reads it: the protocol settings an older record holds among its fields (those are
    ``recorded_protocol``'s) and retired fields dropped, fields added since at their defaults."""
    fields, _ = split_settings(fields)
    return get_algorithm(algorithm).config_from_dict({k: v for k, v in fields.items() if k not in RETIRED_FIELDS})


def recorded_protocol(manifest: dict, task: str) -> ProtocolSettings:
    """The checkpoint and evaluation cadence ``task`` ran with: ``protocol_settings[task]``, or,
    in a run recorded before the protocol had settings of its own, the same fields in its
    ``configs[task]`` (any missing there had the defaults then and now)."""
    recorded = (manifest.get("protocol_settings") or {}).get(task)
    if recorded is None:
        _, recorded = split_settings(manifest["configs"][task])
    return ProtocolSettings.from_dict(recorded)


def manifest_curricula(manifest: dict) -> dict[str, Curriculum]:
    """The curricula a run was started with, by task (``manifest["curricula"]``; absent = none)."""
    return {
        name: c
        for name, data in (manifest.get("curricula") or {}).items()
        if (c := Curriculum.from_dict(data)) is not None
    }
