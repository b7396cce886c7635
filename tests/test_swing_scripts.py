"""Command-line checks of scripts/evaluate.py that need no simulation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load(name: str):
    """Import scripts/<name>.py (registered in sys.modules: its dataclasses need that)."""
    module_name = f"_purehr_script_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


@pytest.mark.parametrize(
    "argv",
    [
        ["--task", "swing", "--policy", "oracle"],
        ["--task", "hrv", "--policy", "structured"],
        ["--task", "cartpole", "--policy", "zero"],
        ["--task", "swing"],
    ],
)
def test_evaluate_rejects_unknown_task_or_policy(argv, capsys):
    evaluate = load("evaluate")
    with pytest.raises(SystemExit) as exit_info:
        evaluate.parse_args(argv)
    assert exit_info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_evaluate_builds_every_swing_policy():
    evaluate = load("evaluate")
    task = evaluate.load_task("swing")
    for policy in evaluate.POLICIES["swing"]:
        args = evaluate.parse_args(["--task", "swing", "--policy", policy, "--json"])
        assert callable(evaluate.build_policy(args, task))
