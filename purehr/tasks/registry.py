"""The one task registry: ``get_task(name)`` looks a task up (``TASK_NAMES`` are the names, for
argparse choices); ``task_of_env(env)`` finds the task an environment instance belongs to."""

from __future__ import annotations

from purehr.envs.base import Environment
from purehr.tasks.hrv import HRV_TASK
from purehr.tasks.swing import SWING_TASK
from purehr.tasks.task import Task

TASKS: dict[str, Task] = {"swing": SWING_TASK, "hrv": HRV_TASK}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {sorted(TASKS)}")
    return TASKS[name]


def task_of_env(env: Environment) -> Task | None:
    """The task whose environment class ``env`` is (wrappers looked through), or None."""
    base = getattr(env, "unwrapped", env)
    return next((task for task in TASKS.values() if isinstance(base, task.env_class)), None)


def task_of_env_class(class_name: str) -> Task | None:
    """The task whose environment class is named ``class_name`` (a saved model's record), or None."""
    return next((task for task in TASKS.values() if task.env_class.__name__ == class_name), None)
