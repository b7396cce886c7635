"""Environment constructor arguments on the command line: ``--env-arg TASK KEY=VALUE``
(repeatable) and ``--brax-backend``, turned into the ``env_kwargs`` of a run (task -> the
keyword arguments of its ``make_env``, recorded in the manifest)."""

from __future__ import annotations

import argparse
import json
from typing import Any

BRAX_PREFIX = "brax:"


def add_environment_flags(parser: argparse.ArgumentParser) -> None:
    """``--env-arg`` and ``--brax-backend``."""
    parser.add_argument(
        "--env-arg",
        nargs=2,
        action="append",
        default=None,
        metavar=("TASK", "KEY=VALUE"),
        help="a keyword argument of TASK's environment constructor (VALUE read as JSON where it is), "
        "recorded in the manifest; repeat it for more",
    )
    parser.add_argument(
        "--brax-backend",
        default=None,
        choices=("positional", "spring", "generalized", "mjx"),
        help="physics backend of the brax:<name> tasks (default: positional, as fast as generalized on a "
        "CPU and the backend of Brax's training notebook; docs/environments.md)",
    )


def parse_value(text: str) -> Any:
    """JSON where the text is JSON (``3``, ``0.5``, ``true``, ``[1, 2]``, ``"x"``), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def env_kwargs_from_args(
    env_args: list[list[str]] | None, tasks: list[str] | None, brax_backend: str | None
) -> dict[str, dict[str, Any]]:
    """task -> {keyword: value}; ``ValueError`` naming a malformed ``KEY=VALUE``, a task not in
    ``--tasks``, or ``--brax-backend`` without a brax task."""
    kwargs: dict[str, dict[str, Any]] = {}
    for task, assignment in env_args or []:
        key, equals, value = assignment.partition("=")
        if not equals or not key.isidentifier():
            raise ValueError(f"--env-arg {task} {assignment}: expected KEY=VALUE with KEY a keyword name (e.g. size=8)")
        if tasks is not None and task not in tasks:
            raise ValueError(f"--env-arg {task} {assignment}: {task!r} is not in --tasks {' '.join(tasks)}")
        kwargs.setdefault(task, {})[key] = parse_value(value)
    if brax_backend is not None:
        brax_tasks = [task for task in tasks or [] if task.startswith(BRAX_PREFIX)]
        if not brax_tasks:
            raise ValueError(
                f"--brax-backend {brax_backend}: no brax:<name> task in --tasks (a resume keeps its recorded backend)"
            )
        for task in brax_tasks:
            kwargs.setdefault(task, {}).setdefault("backend", brax_backend)
    return kwargs
