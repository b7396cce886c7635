"""The one task registry. ``get_task(name)`` looks a task up: a registered name (``swing``,
``hrv``, their variants ``swing-angles``, ``hrv-hidden-audience`` and ``hrv-flicker``, or one of
``register_task``), ``<suite>:<environment>`` (``SUITES``), or ``module:factory`` (your own
environment; ``purehr.tasks.factory``). ``TASK_NAMES`` are the built-in tasks of the default
run (the partially observed variants are registered, not run by default); ``task_of_env(env)``
finds the task an environment belongs to."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from typing import Any

from purehr.algorithms.registry import ALGORITHMS, split_entry
from purehr.envs.base import Environment
from purehr.tasks.environment_task import BUILT_BY
from purehr.tasks.factory import factory_task, is_factory_name
from purehr.tasks.hrv import HRV_FLICKER_TASK, HRV_HIDDEN_AUDIENCE_TASK, HRV_TASK
from purehr.tasks.swing import SWING_ANGLES_TASK, SWING_TASK
from purehr.tasks.task import Task

TASKS: dict[str, Task] = {
    task.name: task for task in (SWING_TASK, HRV_TASK, SWING_ANGLES_TASK, HRV_HIDDEN_AUDIENCE_TASK, HRV_FLICKER_TASK)
}
"""The registered tasks: the built-in two, their partially observed variants, then those of
``register_task``. The full tasks come first: ``task_of_env_class`` (a saved model that names
only its class) finds them."""
TASK_NAMES: tuple[str, ...] = ("swing", "hrv")
"""The default run (``scripts/train_all_seeds.py`` without ``--tasks``), named here rather than
taken from ``TASKS``, which also holds the variants and the tasks of ``register_task``."""
SUITES: dict[str, str] = {
    "gymnax": "purehr.tasks.suites.gymnax",
    "brax": "purehr.tasks.suites.brax",
    "xminigrid": "purehr.tasks.suites.xminigrid",
    "pgx": "purehr.tasks.suites.pgx",
}
"""Suite prefix -> the module that builds its tasks (imported when a task of it is asked for)."""
_RESOLVED: dict[str, Task] = {}  # suite and factory tasks, built once per process
_ENTRIES: dict[tuple[str, int], Task] = {}  # run entries swing@sac, by entry and task


def register_task(task: Task, *, replace: bool = False) -> Task:
    """Make ``task`` a name every entry point knows (``--tasks``, ``restore``, ``evaluate.py``)
    in this process; ``ValueError`` if the name is taken (unless ``replace``) or has a colon
    (the suite and ``module:factory`` forms)."""
    if not isinstance(task, Task):
        raise TypeError(f"register_task takes a purehr.tasks.Task, got {type(task).__name__}")
    if ":" in task.name or "@" in task.name or not task.name:
        raise ValueError(
            f"task name {task.name!r}: expected a non-empty name without ':' (the suite form) or '@' (a run "
            "entry's algorithm, swing@sac)"
        )
    if task.name in TASKS and not replace and TASKS[task.name] is not task:
        raise ValueError(f"task {task.name!r} is already registered; pass replace=True to replace it")
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    if not isinstance(name, str):
        raise ValueError(f"task {name!r}: expected a task name (a string)")
    if name in TASKS:
        return TASKS[name]
    if "@" in name:
        return _entry_task(name)
    if name not in _RESOLVED:
        _RESOLVED[name] = _resolve(name)
    return _RESOLVED[name]


def _entry_task(name: str) -> Task:
    """``swing@sac``: the task ``swing`` as a run entry trained by ``sac`` (its default config
    ``swing``'s for sac, ``Task.config_for``), named by the whole entry; refused by name for an
    unknown algorithm or one that cannot act in the task's action space."""
    task_name, algorithm = split_entry(name)
    if not task_name or not algorithm or "@" in task_name:
        raise ValueError(f"task entry {name!r}: expected TASK or TASK@ALGORITHM (swing@ppo), one '@'")
    if algorithm not in ALGORITHMS:
        raise ValueError(
            f"task entry {name!r}: unknown algorithm {algorithm!r}; expected one of {', '.join(sorted(ALGORITHMS))}"
        )
    task = get_task(task_name)
    key = (name, id(task))  # a task registered again (replace=True) gets its entries anew
    if key not in _ENTRIES:
        config = task.config_for(algorithm, entry=name)
        _ENTRIES[key] = dataclasses.replace(task, name=name, default_config=config, algorithm=algorithm)
    return _ENTRIES[key]


def _resolve(name: str) -> Task:
    prefix, colon, environment = name.partition(":")
    if colon and prefix in SUITES:
        return _suite_task(prefix, environment)
    if is_factory_name(name):
        return factory_task(name)
    close = difflib.get_close_matches(name, list(TASKS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(
        f"unknown task {name!r}{hint}; expected one of {sorted(TASKS)}, <suite>:<environment> with a suite of "
        f"{sorted(SUITES)} (e.g. gymnax:CartPole-v1), or module:factory for your own environment"
    )


def _suite_task(prefix: str, environment: str) -> Task:
    suite = importlib.import_module(SUITES[prefix])
    try:
        names = suite.environment_names()
    except ImportError as error:
        raise ValueError(
            f"task {prefix}:{environment}: the {prefix} suite needs the {suite.PACKAGE} package ({error}): "
            f"pip install 'purehr[{suite.EXTRA}]'"
        ) from None
    if environment not in names:
        close = difflib.get_close_matches(environment, names, n=3)
        hint = f" (closest: {close})" if close else ""
        raise ValueError(f"unknown {prefix} environment {environment!r}{hint}; expected one of {names}")
    return suite.suite_task(environment)


def task_of_env(env: Environment) -> Task | None:
    """The task whose ``make_env`` built ``env``, or that a suite adapter's ``task_name`` names,
    or whose environment class ``env`` is and that ``owns`` it (wrappers looked through: a
    ``SwingEnv(observe_rates=False)`` is ``swing-angles``'s), or None."""
    base: Any = getattr(env, "unwrapped", env)
    try:
        built_by = BUILT_BY.get(base)
    except TypeError:  # not weakly referenceable
        built_by = None
    if built_by is not None:
        return get_task(built_by)
    suite_name = getattr(base, "task_name", None)  # a suite's adapter built directly: GymnaxEnv("CartPole-v1")
    if isinstance(suite_name, str):
        return get_task(suite_name)
    return next((task for task in TASKS.values() if isinstance(base, task.env_class) and task.owns(base)), None)


def resolved_task_of_class(env: Environment) -> Task | None:
    """The one ``module:factory`` or suite task resolved in this process (``--tasks``, ``get_task``)
    whose environment class ``env`` is, for an environment built directly by its factory rather
    than through the task; None if none is, or several are (which one built it cannot be told)."""
    base: Any = getattr(env, "unwrapped", env)
    found = [task for task in _RESOLVED.values() if type(base) is task.env_class and task.owns(base)]
    return found[0] if len(found) == 1 else None


def task_of_env_class(class_name: str) -> Task | None:
    """The task whose environment class is named ``class_name`` (a saved model's record), or None."""
    return next((task for task in TASKS.values() if task.env_class.__name__ == class_name), None)
