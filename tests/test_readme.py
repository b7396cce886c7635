"""Every command and python snippet of the README is checked here (issue 52, item 6), so a README
line that stopped working fails a test. Each command gets the cheapest check that would fail if
it were wrong: the setup steps against .ci/run and pyproject's extras, the pinned jax of an
accelerator install against constraints.txt, a script's flags parsed by its own parser (and its
``--help``), the own-environment command trained for a few updates, the python snippets run as
written. A command of a kind this file does not know fails, so a new one needs a check here."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
MAIN_JOB = (
    "python3 -m venv .venv && .venv/bin/pip install -c constraints.txt -e . "
    "&& .venv/bin/python scripts/train_all_seeds.py"
)
TEST_COMMAND = (
    'python3 -m venv .venv && .venv/bin/pip install -c constraints.txt -e ".[test]" && .venv/bin/ruff check . '
    "&& .venv/bin/ruff format --check . && .venv/bin/python -m pytest -x -q -n 2 --dist loadfile"
)
COMMAND_STARTS = ("python", ".venv/bin/", "pip ", "PYTHONPATH=", "/usr/bin/time", "bash ", "cd ", "git ")
# The interpreter and installer the install block makes: a bare `python` after it has no purehr (issue 63).
VENV_PYTHON, VENV_PIP = ".venv/bin/python", ".venv/bin/pip"
# A python, pip, pytest, tensorboard or wandb in a command's position (line start, after &&, ;, |, a
# quote, env, srun, time -v or VAR=value) that is not the venv's; Colab's `!pip` and `!python` cells are
# Colab's own.
BARE_COMMAND = re.compile(
    r"(?:^|&&|;|\||'|\benv|\bsrun|\btime -v|\b[A-Z_]+=\S*)\s*"
    r"(python3? (?!-m venv\b)|pip install\b|pytest\b|tensorboard --logdir\b|wandb sync\b)"
)
# Quoted, not run: SwingRL's own install line, as its ImportError gives it (docs/swing_model.md).
QUOTED_COMMANDS = {"pip install git+https://github.com/pierrelux/swing-rl"}


def readme_commands(text: str = README) -> list[str]:
    """The lines of the bash blocks (continuations joined, comments dropped), then the inline
    code that starts like a command, each with its whitespace collapsed."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(" ".join(line.split()))
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    commands += [
        " ".join(code.split()) for code in re.findall(r"`([^`\n]+)`", prose) if code.startswith(COMMAND_STARTS)
    ]
    return commands


def ci_steps() -> list[str]:
    """The steps .ci/run takes after ``cd``, pip's quiet flag dropped (the README shows its output)."""
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    steps = [line.replace("pip install -q", "pip install") for line in lines if line.startswith(("python3 ", ".venv/"))]
    return [step for step in steps if step != ".venv/bin/pip install --upgrade pip"]


def constraint_pin(package: str) -> str:
    pins = dict(line.split("==", 1) for line in (REPO / "constraints.txt").read_text().split() if "==" in line)
    return pins[package]


def check_pip(step: str) -> None:
    """``pip install`` with the constraints file, extras that pyproject declares and, for jax,
    the version constraints.txt pins."""
    tokens = shlex.split(step)
    assert tokens[0] == VENV_PIP and tokens[1] == "install", f"{step}: install into the venv with {VENV_PIP}"
    extras_declared = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    rest, constrained = tokens[2:], False
    while rest:
        token = rest.pop(0)
        if token == "-c":
            assert rest.pop(0) == "constraints.txt", step
            constrained = True
        elif token == "-e":
            extras = re.fullmatch(r"\.(?:\[([\w,]+)\])?", rest.pop(0))
            assert extras, step
            assert set(filter(None, (extras.group(1) or "").split(","))) <= extras_declared, step
        elif token in {"-U", "--upgrade"}:
            continue
        else:
            requirement = re.fullmatch(r"jax\[(cuda12|tpu)\]==(\S+)", token)
            assert requirement, f"{step}: {token!r} is not a checked requirement"
            assert requirement.group(2) == constraint_pin("jax"), step
    assert constrained, f"{step}: every install is constrained by constraints.txt"


def split_script(step: str) -> tuple[dict[str, str], Path, list[str]]:
    """(environment assignments, script, arguments) of ``[VAR=value ...] [/usr/bin/time -v]
    python scripts/x.py args``."""
    tokens = shlex.split(step)
    environment = {}
    while "=" in tokens[0] and not tokens[0].startswith("-"):
        name, value = tokens.pop(0).split("=", 1)
        environment[name] = value
    if tokens[:2] == ["/usr/bin/time", "-v"]:
        tokens = tokens[2:]
    assert tokens[0] == VENV_PYTHON, f"{step}: run it with {VENV_PYTHON}, which the install block made"
    script = REPO / tokens[1]
    assert script.is_file(), f"{step}: {tokens[1]} is not a file"
    return environment, script, tokens[2:]


def script_parser(script: Path):
    spec = importlib.util.spec_from_file_location(f"readme_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_parser()


def check_script(step: str) -> None:
    """The script's own parser takes the arguments as written, and its ``--help`` exits 0; a
    ``module:factory`` task names a module of the PYTHONPATH given that defines the factory."""
    environment, script, arguments = split_script(step)
    parser = script_parser(script)
    with contextlib.redirect_stdout(io.StringIO()) as shown, pytest.raises(SystemExit) as stop:
        parser.parse_args(["--help"])
    assert stop.value.code == 0 and "usage:" in shown.getvalue()
    args = parser.parse_args(arguments)
    folders = [REPO / folder for folder in environment.pop("PYTHONPATH", "").split(os.pathsep) if folder]
    assert not environment, f"{step}: only PYTHONPATH is checked"
    for task in getattr(args, "tasks", None) or []:
        module, colon, factory = task.partition(":")
        if colon and folders:
            source = next(folder / f"{module}.py" for folder in folders if (folder / f"{module}.py").is_file())
            defined = {node.name for node in ast.parse(source.read_text()).body if isinstance(node, ast.FunctionDef)}
            assert factory in defined, f"{step}: {source} defines no {factory}"


def check_docs_build(step: str) -> None:
    """``.venv/bin/mkdocs build [--strict]``: the site of mkdocs.yml, whose packages the ``docs``
    extra installs; tests/test_docs_build.py builds it the same way."""
    tokens = shlex.split(step)
    assert tokens[:2] == [".venv/bin/mkdocs", "build"] and set(tokens[2:]) <= {"--strict"}, step
    assert (REPO / "mkdocs.yml").is_file(), step
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(requirement.startswith("mkdocs==") for requirement in extras["docs"]), step


def check_step(step: str) -> None:
    if step.startswith(("pip ", ".venv/bin/pip ")):
        check_pip(step)
    elif step.startswith(".venv/bin/mkdocs "):
        check_docs_build(step)
    elif step.startswith(("python3 -m venv", ".venv/bin/ruff", ".venv/bin/python -m pytest")):
        assert step in ci_steps(), f"{step!r} is not a step of .ci/run"
    else:
        check_script(step)


@pytest.mark.parametrize("command", readme_commands(), ids=lambda command: command[:100])
def test_every_readme_command_is_checked(command):
    for step in command.split(" && "):
        check_step(step.strip())


def test_the_readme_is_read_in_five_minutes():
    """Issue 52: the README was 33,000 characters of measurement prose."""
    assert len(README) <= 10_000, len(README)


def test_the_first_two_commands_are_the_main_job_and_what_ci_runs():
    """The main job and the test command stay as they were; the test command is .ci/run's."""
    assert readme_commands()[:2] == [MAIN_JOB, TEST_COMMAND]
    assert [step.strip() for step in TEST_COMMAND.split(" && ")] == ci_steps()


def test_the_accelerator_installs_pin_the_jax_of_constraints():
    pin = constraint_pin("jax")
    commands = readme_commands()
    for accelerator in ("cuda12", "tpu"):
        assert any(f'"jax[{accelerator}]=={pin}"' in command for command in commands), accelerator


def test_the_readme_names_only_files_that_exist():
    named = re.findall(r"`((?:docs|examples|benchmarks|results|scripts|tests)/[\w./-]*)`", README)
    assert named and all((REPO / path).exists() for path in named), [p for p in named if not (REPO / p).exists()]


def test_an_unchecked_kind_of_command_fails():
    """The dispatch is closed: a command no check knows is an error, not a pass."""
    with pytest.raises(AssertionError):
        check_step("make install")
    with pytest.raises(AssertionError):
        check_step('.venv/bin/pip install "jax[cuda12]==0.0.1" -c constraints.txt')


def test_a_bare_python_or_pip_after_the_install_block_fails():
    """Issue 63: `PYTHONPATH=examples python scripts/...` ran the system python, which has no purehr."""
    for step in ("PYTHONPATH=examples python scripts/train_all_seeds.py --seeds 0", "python3 scripts/render.py"):
        with pytest.raises(AssertionError, match="run it with .venv/bin/python"):
            check_step(step)
    with pytest.raises(AssertionError, match="install into the venv"):
        check_step("pip install -c constraints.txt -e .")
    text = "```bash\n.venv/bin/python scripts/x.py && python scripts/y.py\n```\n`pytest -x` and `!pip install x`, "
    text += "`PJRT_NPROC=1 python\n  scripts/z.py`\n"
    assert bare_commands(text) == [
        ".venv/bin/python scripts/x.py && python scripts/y.py",
        "pytest -x",
        "PJRT_NPROC=1 python scripts/z.py",
    ]


def code_lines(text: str) -> list[str]:
    """The lines of a markdown text's shell fences (untagged, bash, sh) and indented blocks, then its
    inline code (a span wrapped over lines as one), each stripped."""
    lines, prose, fence = [], [], None
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = None if fence is not None else line.strip()[3:]
        elif fence is not None:
            lines += [line] if fence in {"", "bash", "sh"} else []
        else:
            prose.append(line)
            lines += [line] if line.startswith("    ") else []
    lines += [" ".join(code.split()) for code in re.findall(r"`([^`]+)`", "\n".join(prose))]
    return [line.strip() for line in lines]


def bare_commands(text: str) -> list[str]:
    return [line for line in code_lines(text) if BARE_COMMAND.search(line) and line not in QUOTED_COMMANDS]


DOC_PAGES = sorted(str(page.relative_to(REPO)) for page in (REPO / "docs").rglob("*.md"))


@pytest.mark.parametrize("page", ["README.md", *DOC_PAGES])
def test_the_docs_run_the_python_the_install_block_made(page):
    """Every command of the README and the user docs works as written after the README's install
    command: python, pip, pytest, tensorboard and wandb are the venv's (`.venv/bin/...`), not the PATH's."""
    assert not bare_commands((REPO / page).read_text())


@pytest.mark.slow
def test_the_own_environment_command_trains(tmp_path):
    """About 20 s on 2 cores (one subprocess, one small compile): the README's command as
    written, with a small budget and a run directory of the test's."""
    (command,) = [command for command in readme_commands() if "my_env:make_env" in command]
    environment, script, arguments = split_script(command)
    arguments = [argument for argument in arguments if argument not in {"--run-name", "my_env"}]
    run = tmp_path / "run"
    arguments += ["--steps", "10240", "--checkpoint-interval", "5120", "--run-dir", str(run)]
    arguments += ["--no-render", "--no-progress"]
    child = {**os.environ, "PJRT_NPROC": "1", "PYTHONPATH": str(REPO / environment["PYTHONPATH"])}
    trained = subprocess.run(
        [sys.executable, str(script), *arguments], cwd=REPO, env=child, capture_output=True, text=True, timeout=300
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["sources"]["my_env:make_env"]["suite"] == "factory"


@pytest.mark.slow
def test_the_readme_python_snippets_run_as_written(tmp_path, monkeypatch):
    """About 20 s (one compile of the seed API's default network, 10,000 steps; at 5,000 no
    episode ends and the API warns, which this test turns into a failure)."""
    from purehr import PPOModel

    snippets = re.findall(r"```python\n(.*?)```", README, re.S)
    assert snippets
    monkeypatch.chdir(tmp_path)
    for snippet in snippets:
        namespace: dict = {}
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            exec(compile(snippet, "README.md", "exec"), namespace)
        assert isinstance(namespace["model"], PPOModel)
