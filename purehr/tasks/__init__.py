"""Tasks: what each task trains on and is judged by (``task``), the built-in tasks (``swing``,
``hrv``) and the one registry (``registry``)."""

from purehr.tasks.environment_task import environment_task
from purehr.tasks.hrv import HRV_DEFAULTS
from purehr.tasks.registry import SUITES, TASK_NAMES, TASKS, get_task, register_task, task_of_env, task_of_env_class
from purehr.tasks.swing import SWING_DEFAULTS
from purehr.tasks.task import Baseline, Task, curriculum_schedule, heldout_env_params

__all__ = [
    "Baseline",
    "HRV_DEFAULTS",
    "SWING_DEFAULTS",
    "SUITES",
    "TASKS",
    "TASK_NAMES",
    "Task",
    "curriculum_schedule",
    "environment_task",
    "get_task",
    "heldout_env_params",
    "register_task",
    "task_of_env",
    "task_of_env_class",
]
