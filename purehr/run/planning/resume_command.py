"""The command that continues a run from a fresh shell in any directory: written to the run
directory's ``RESUME.txt`` when a process takes the directory (a run whose terminal is gone,
``| tee`` ended by Ctrl-C, a scheduler's ``kill``, still says how to go on) and printed when
the run is interrupted. Its paths are absolute and normalised, and where a task's module
(``module:factory``) came from a folder a fresh interpreter does not import from (the working
directory, a ``PYTHONPATH``), the command gives it as ``PYTHONPATH``."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from purehr.algorithms.registry import split_entry
from purehr.run.store.files import atomic_write_text
from purehr.run.store.run_dir import RESUME, RunDirectory
from purehr.tasks.factory import is_factory_name, library_roots

HEADER = (
    "# The command that continues this run (from a fresh shell, in any directory), written when the run's\n"
    "# latest process started; run it as it is, or: sh RESUME.txt (docs/how-to/resume.md, 'Stopping and resuming')\n"
)


def absolute(path: str | Path) -> str:
    """``path`` absolute and normalised (``work/../x`` is ``/.../x``), links kept: a virtual
    environment's ``python`` is a link its environment is found by."""
    return os.path.abspath(os.fspath(path))


def script_words(script: str | Path, directory: Sequence[str]) -> list[str]:
    """A script's command that continues a run: this interpreter, ``script`` and the words that
    name the run directory (``--run-dir DIR``, ``--run-name NAME``), then ``--resume``."""
    return [absolute(sys.executable), absolute(script), *directory, "--resume"]


def python_words(run_dir: Path) -> list[str]:
    """The Python call that continues a run started by ``train_all_seeds`` itself."""
    call = f"from purehr.run.protocol import train_all_seeds; train_all_seeds({absolute(run_dir)!r}, resume=True)"
    return [absolute(sys.executable), "-c", call]


def module_folders(tasks: Sequence[str]) -> list[str]:
    """The folders a fresh interpreter needs on ``PYTHONPATH`` to import the modules of the
    ``module:factory`` entries in ``tasks`` (imported by now): each module's top folder (its
    file's folder, one up per dotted part), where it is not one the interpreter imports from by
    itself (site-packages, the standard library)."""
    folders: list[str] = []
    for entry in tasks:
        name = split_entry(entry)[0]
        if not is_factory_name(name):
            continue
        module_name = name.rpartition(":")[0]
        file = getattr(sys.modules.get(module_name), "__file__", None)
        if file is None:
            continue
        path = Path(absolute(file))
        depth = module_name.count(".") + (path.name == "__init__.py")
        top = path.parents[depth]
        library = any(top.resolve().is_relative_to(root) for root in library_roots())
        if not library and str(top) not in folders:
            folders.append(str(top))
    return folders


def resume_command(words: Sequence[str], tasks: Sequence[str]) -> str:
    """``words`` as one shell line, after ``PYTHONPATH=...`` where ``tasks`` need it (``module_folders``)."""
    folders = module_folders(tasks)
    prefix = f"PYTHONPATH={shlex.quote(os.pathsep.join(folders))} " if folders else ""
    return prefix + shlex.join(words)


def write_resume_file(run_dir: RunDirectory, words: Sequence[str], tasks: Sequence[str]) -> str:
    """Writes ``RESUME.txt`` (atomically) and returns the command it holds."""
    command = resume_command(words, tasks)
    atomic_write_text(run_dir.root / RESUME, HEADER + command + "\n")
    return command


def read_resume_command(run_dir: Path) -> str | None:
    """The command ``RESUME.txt`` holds, or None where there is none (or it cannot be read)."""
    try:
        lines = (Path(run_dir) / RESUME).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    commands = [line for line in lines if line.strip() and not line.startswith("#")]
    return commands[-1] if commands else None
