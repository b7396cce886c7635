"""``purehr COMMAND ...``: the console command (``[project.scripts]`` in pyproject.toml; ``python -m
purehr`` is the same). Each command is one module of this folder, with ``build_parser(prog)`` and
``main(argv, prog=...)``; ``scripts/<name>.py`` of a checkout are thin wrappers of the same modules,
so ``purehr train ...`` is ``python scripts/train_all_seeds.py ...``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

COMMANDS: dict[str, tuple[str, str, str]] = {
    "train": (
        "purehr.cli.train",
        "scripts/train_all_seeds.py",
        "train every task for every seed, then evaluate and render",
    ),
    "evaluate": (
        "purehr.cli.evaluate",
        "scripts/evaluate.py",
        "held-out evaluation of a checkpoint or a baseline policy",
    ),
    "sweep": (
        "purehr.cli.sweep",
        "scripts/sweep.py",
        "hyperparameter sweep: grid x seeds in one compiled call per shape",
    ),
    "render": (
        "purehr.cli.render",
        "scripts/render.py",
        "render a run directory: learning figures, metrics, the replay",
    ),
    "analyze": ("purehr.cli.analyze", "scripts/analyze_run.py", "the training-performance analysis of a run directory"),
    "publish": ("purehr.cli.publish", "scripts/publish_run.py", "copy a finished run into a small record for results/"),
    "compare": (
        "purehr.cli.compare",
        "scripts/compare.py",
        "compare runs: IQM differences and probability of improvement with bootstrap intervals",
    ),
    "export": (
        "purehr.cli.export",
        "scripts/export_policy.py",
        "a trained policy as ONNX and jax.export, checked against JAX, with its contract and model card",
    ),
}
"""command -> (its module, the checkout's script that runs it, its one-line summary)."""


def usage() -> str:
    """``purehr --help``: the commands, one line each."""
    width = max(map(len, COMMANDS))
    lines = [
        "usage: purehr COMMAND [ARGS ...]",
        "",
        "Pure-JAX reinforcement-learning trainer (PPO, PQN, SAC). Commands:",
        "",
        *(f"  {name.ljust(width)}  {summary}" for name, (_, _, summary) in COMMANDS.items()),
        "",
        "purehr COMMAND --help prints the command's own flags. In a checkout, each command is also its script",
        "(purehr train: python scripts/train_all_seeds.py; analyze: analyze_run.py; publish: publish_run.py;",
        "export: export_policy.py;",
        "the others by their names).",
        "python -m purehr COMMAND is the same as purehr COMMAND.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``purehr COMMAND ARGS``: the command's ``main`` with ARGS, named ``purehr COMMAND``;
    exit status 2 for a missing or unknown command, naming the known ones."""
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or words[0] in ("-h", "--help"):
        (sys.stdout if words else sys.stderr).write(usage())
        return 0 if words else 2
    name, rest = words[0], words[1:]
    if name not in COMMANDS:
        known = ", ".join(COMMANDS)
        sys.stderr.write(
            f"usage: purehr COMMAND [ARGS ...]\npurehr: error: unknown command {name!r} (choose from {known})\n"
        )
        return 2
    module = importlib.import_module(COMMANDS[name][0])  # by name: --help of one command loads only its module
    prog = f"purehr {name}"
    if name == "train":  # the manifest records the command line as typed
        return module.main(rest, prog=prog, command=list(sys.argv) if argv is None else None)
    return module.main(rest, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
