"""The digest of the main job's compiled training program: XLA's optimised HLO of every task x
seed in one program (the tasks' defaults at ``--steps`` per task), with what names the source
(file names, lines, op names) and the host callbacks' identifiers taken out. Run it in two
checkouts: the same digest means XLA compiles the same program, instruction for instruction,
so a change that moved or renamed code cannot have changed what trains or how fast.

    python benchmarks/program_digest.py --steps 8192 --out /tmp/program.hlo
    python benchmarks/program_digest.py --profile accelerator --grouping off   # the profile, ungrouped

It also times lowering and compiling that program (one process per number: the machine's load
moves them).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import time
from pathlib import Path

from purehr.cli.arguments import HelpFormatter, positive_int

SOURCE_TABLES = re.compile(r'^\d+ (\{file_name_id.*|"[^"]*")$\n?', re.M)
"""The trailing tables of file and location names the HLO text ends with (with their line ends: a
table's length is the number of source files, which moving code changes)."""


def normalised_hlo(text: str) -> str:
    """``text`` without what depends on where the code lives or on the process."""
    text = re.sub(r", metadata=\{[^}]*\}", "", text)  # op names, source files and lines
    text = re.sub(r"backend_config=\{[^}]*\}", "", text)
    text = re.sub(r"\b\d{9,}\b", "N", text)  # host callback identifiers (pointers)
    return SOURCE_TABLES.sub("", text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["swing", "hrv"], help="tasks in the program")
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds per task (0, 1, ...)")
    parser.add_argument("--steps", type=positive_int, default=8192, help="environment steps per task and seed")
    parser.add_argument("--out", type=Path, default=None, help="also write the normalised HLO here")
    parser.add_argument(
        "--profile",
        choices=("cpu", "accelerator"),
        default=None,
        help="the task defaults of this profile (purehr.tasks.profiles; default: the tasks' own, as at every commit)",
    )
    parser.add_argument(
        "--grouping",
        choices=("profile", "on", "off"),
        default="profile",
        help="group_quick_evaluations: as the profile (or the task) sets it, or on, or off",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import jax
    from purehr.ppo.compile_options import training_compiler_options  # the old names: they import at
    from purehr.ppo.loop import HostSlot  # every commit, so a copy of this script digests an older one

    try:
        from purehr.run.compiled.program import initial_runners
        from purehr.run.compiled.task_setup import build_setups
        from purehr.run.compiled.train_all import make_train_all
    except ImportError:  # before the engine/protocol split (6d93239 and older)
        from purehr.run.program import initial_runners
        from purehr.run.runner import make_train_all
        from purehr.run.task_setup import build_setups
    from purehr.tasks import get_task

    configs = {task: get_task(task).default_config.replace(total_timesteps=args.steps) for task in args.tasks}
    protocols = None
    if args.profile is not None or args.grouping != "profile":
        from purehr.tasks.profiles import profile_config, profile_protocol

        profile = args.profile or "cpu"
        configs = {task: profile_config(configs[task], profile, task) for task in args.tasks}
        protocols = {task: profile_protocol(get_task(task).default_protocol, profile, task) for task in args.tasks}
        if args.grouping != "profile":
            grouped = args.grouping == "on"
            protocols = {task: p.replace(group_quick_evaluations=grouped) for task, p in protocols.items()}
    setups = build_setups(args.tasks, configs, protocols=protocols)
    runners = initial_runners(setups, list(range(args.seeds)))
    started = time.perf_counter()
    lowered = jax.jit(make_train_all(setups, HostSlot()), compiler_options=training_compiler_options()).lower(runners)
    lowered_s = time.perf_counter() - started
    text = normalised_hlo(lowered.compile().as_text())
    compile_s = time.perf_counter() - started - lowered_s
    if args.out is not None:
        args.out.write_text(text)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    lines = text.count(chr(10))
    print(f"program sha256 {digest}: {lines:,} lines; lowered in {lowered_s:.1f} s, compiled in {compile_s:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
