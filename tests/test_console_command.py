"""The console command (issue 64, item 2): ``[project.scripts] purehr`` resolves to a callable;
``purehr --help`` lists every command; ``purehr COMMAND --help`` is the command's own help, the
same as its script's but for the program's name; an unknown command is refused (exit 2) naming
the known ones; ``python -m purehr`` is the same command. Not installed here (the shared virtual
environment must keep pointing at its checkout): run as ``python -m purehr``."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from purehr.cli.main import COMMANDS, main, usage

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = {
    "train": "train_all_seeds",
    "evaluate": "evaluate",
    "sweep": "sweep",
    "render": "render",
    "analyze": "analyze_run",
    "publish": "publish_run",
    "compare": "compare",
    "export": "export_policy",
}


def run(*words: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, *words], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_console_script_entry_resolves_to_a_callable():
    entry = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["purehr"]
    module, _, attribute = entry.partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))
    assert f"{module}:{attribute}" == "purehr.cli.main:main"


def test_every_command_is_listed_with_its_script():
    assert set(COMMANDS) == set(SCRIPTS)
    for name, (module, script, summary) in COMMANDS.items():
        assert script == f"scripts/{SCRIPTS[name]}.py" and (REPO / script).is_file()
        assert callable(importlib.import_module(module).main) and summary


@pytest.mark.slow
def test_python_m_purehr_help_lists_every_command(tmp_path):
    done = run("-m", "purehr", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == usage()
    for name, (_, _, summary) in COMMANDS.items():
        assert f"  {name.ljust(max(map(len, COMMANDS)))}  {summary}" in done.stdout


def test_an_unknown_command_is_refused_naming_the_known_ones(capsys):
    assert main(["trian", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert (
        "unknown command 'trian'" in err and "train, evaluate, sweep, render, analyze, publish, compare, export" in err
    )
    assert main([]) == 2  # no command: the list of commands, on stderr
    assert "train" in capsys.readouterr().err


@pytest.mark.slow
def test_an_unknown_command_exits_2_from_the_command_line(tmp_path):
    done = run("-m", "purehr", "bogus", cwd=tmp_path)
    assert done.returncode == 2
    known = "train, evaluate, sweep, render, analyze, publish, compare, export"
    assert f"unknown command 'bogus' (choose from {known})" in done.stderr


def _without_usage(text: str) -> str:
    """The help after its usage lines (those name the program: ``purehr train``, ``train_all_seeds.py``)."""
    return text.split("\n\n", 1)[1]


@pytest.mark.slow
@pytest.mark.parametrize("command", list(SCRIPTS))
def test_a_command_s_help_is_its_script_s_help(command):
    console = run("-m", "purehr", command, "--help")
    script = run(f"scripts/{SCRIPTS[command]}.py", "--help")
    assert console.returncode == script.returncode == 0, console.stderr + script.stderr
    assert console.stdout.startswith(f"usage: purehr {command} ")
    assert script.stdout.startswith(f"usage: {SCRIPTS[command]}.py ")
    assert _without_usage(console.stdout) == _without_usage(script.stdout)


def test_a_command_s_parser_is_its_script_s_parser():
    """In process: the same parser, named for the console in its usage line."""
    for command, script in SCRIPTS.items():
        module = importlib.import_module(f"purehr.cli.{command}")
        named = module.build_parser(f"purehr {command}").format_help()
        plain = module.build_parser(f"{script}.py").format_help()
        assert named.startswith(f"usage: purehr {command} ") and plain.startswith(f"usage: {script}.py ")


def test_the_scripts_are_thin_wrappers_that_keep_every_name():
    """``scripts/<name>.py`` runs the package's command, and callers that load the file (tests,
    users) still find its names (``main``, ``build_parser``, ``recorded_no_render``, ...)."""
    for command, script in SCRIPTS.items():
        namespace = {"__name__": "not_main"}
        path = REPO / "scripts" / f"{script}.py"
        exec(compile(path.read_text(), str(path), "exec"), namespace)
        module = importlib.import_module(f"purehr.cli.{command}")
        assert namespace["main"] is module.main and namespace["build_parser"] is module.build_parser
        assert len(path.read_text().splitlines()) < 15


def test_the_resume_command_names_the_way_the_run_was_started(tmp_path):
    """Through the script: the script's path (as before); through ``purehr train``: ``python -m
    purehr train``, which works from a fresh shell wherever this interpreter imports purehr."""
    import argparse

    import purehr.cli.train as train

    args = argparse.Namespace(run_dir=tmp_path / "run", run_name="protocol", purehr_command=False)
    words = train._resume_words(args, "--run-dir")
    assert words == [os.path.abspath(sys.executable), str(train.SCRIPT), "--run-dir", str(tmp_path / "run"), "--resume"]
    assert train.SCRIPT == REPO / "scripts" / "train_all_seeds.py"
    args.purehr_command = True
    words = train._resume_words(args, "--run-dir")
    assert words == [os.path.abspath(sys.executable), "-m", "purehr", "train", "--run-dir", str(tmp_path / "run")] + [
        "--resume"
    ]
    assert train._render_command(args) == "purehr render"
