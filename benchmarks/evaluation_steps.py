"""The sequential loop iterations of a default run's checkpoints, per task (issue 49): what
decides their cost on an accelerator, where a loop costs its length, not its width.

python benchmarks/evaluation_steps.py                        # swing and hrv, 5 seeds
python benchmarks/evaluation_steps.py --tasks hrv --json out.json
python benchmarks/evaluation_steps.py --profile accelerator   # the accelerator profile's defaults

Read from the traced program (``benchmarks/_evaluation_steps.py``); nothing is compiled
or run. A profile that groups the quick evaluations (``group_quick_evaluations``: the quick
checkpoints between two full ones evaluated together, vmapped over the checkpoints, at the full
one) is counted as it runs; ``grouped_total`` is what the run would count grouped, either way."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_json  # noqa: E402

from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402
from purehr.tasks.profiles import PROFILES  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["swing", "hrv"], help="tasks, with their default settings")
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds vmapped, as the run does")
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default="cpu",
        help="the task defaults counted (purehr.tasks.profiles): cpu, the tasks' own; accelerator, the GPU/TPU "
        "profile's",
    )
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from _evaluation_steps import evaluation_steps

    from purehr.run.compiled.task_setup import build_task_setup
    from purehr.tasks import get_task
    from purehr.tasks.profiles import profile_config, profile_protocol

    record = {}
    for task in args.tasks:
        config = profile_config(get_task(task).default_config, args.profile, task)
        protocol = profile_protocol(get_task(task).default_protocol, args.profile, task)
        counts = evaluation_steps(build_task_setup(task, config, protocol=protocol), args.seeds)
        grouped = protocol.replace(group_quick_evaluations=True)
        counts["grouped_total"] = evaluation_steps(build_task_setup(task, config, protocol=grouped), 1)["run_total"]
        counts["config"] = {name: getattr(config, name) for name in ("num_envs", "num_steps", "minibatch_size")}
        record[task] = counts
        print(
            f"{task}: {counts['checkpoints']} checkpoints ({counts['full_checkpoints']} full, "
            f"{counts['quick_checkpoints']} quick{', grouped' if counts['grouped'] else ''}); sequential "
            f"iterations: full evaluation "
            f"{counts['full_evaluation']:,}, quick {counts['quick_evaluation']:,}, showcase {counts['showcase']:,}; "
            f"the run's checkpoints {counts['run_total']:,} (grouped: {counts['grouped_total']:,}) against "
            f"{counts['training_total']:,} for its {counts['updates']} updates"
        )
    import datetime

    import jax

    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    meta = {"command": [sys.executable, *sys.argv], "date": when, "jax": jax.__version__}
    write_json(args.json, {**meta, "profile": args.profile, "tasks": record})
    return 0


if __name__ == "__main__":
    sys.exit(main())
