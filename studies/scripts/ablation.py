"""Ablation table: each design change of a task turned off, one at a time, over five seeds.

    python studies/scripts/ablation.py --task hrv --out results/ablation
    python studies/scripts/ablation.py --task swing --steps 10000000 --out results/ablation

Each variant trains every seed in one compiled call and is judged on the task's held-out
protocol. Writes <task>.csv, <task>.md (the table) and <task>.json (command, machine, load,
timing) to --out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, task_name

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--task", required=True, type=task_name, help="task to ablate (its variants: swing and hrv have them)"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="environment steps per seed (default: the task's protocol budget)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4], help="training seeds")
    parser.add_argument(
        "--variants",
        nargs="+",
        default=None,
        help="only these variants, by name; the levers outside the core table "
        "(e.g. 'minibatch 256') run only when named (default: the core table)",
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from purehr.run.store.machine import environment_description
    from purehr.tasks import get_task
    from studies import ablation

    if args.task not in ablation.VARIANTS:
        parser.exit(
            2,
            f"error: --task {args.task}: no ablation is defined for it (the variants are design changes of "
            f"{', '.join(sorted(ablation.VARIANTS))}); scripts/sweep.py --task {args.task} varies its PPO settings\n",
        )
    steps = args.steps if args.steps is not None else get_task(args.task).default_config.total_timesteps
    if steps <= 0 or len(set(args.seeds)) != len(args.seeds) or min(args.seeds) < 0:
        parser.exit(2, f"error: --steps {steps} must be positive and --seeds {args.seeds} distinct and >= 0\n")
    for suffix in (".csv", ".md", ".json"):
        if (args.out / f"{args.task}{suffix}").exists():
            parser.exit(2, f"error: {args.out / (args.task + suffix)} exists; choose another --out\n")
    try:
        rows, timing = ablation.run_ablation(
            args.task, steps, args.seeds, args.variants, log=lambda text: print(text, file=sys.stderr, flush=True)
        )
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    description = environment_description()
    description.update(
        command=["python", "studies/scripts/ablation.py", *(sys.argv[1:] if argv is None else argv)],
        task=args.task,
        steps_per_seed=steps,
        seeds=args.seeds,
        **timing,
    )
    paths = ablation.write_outputs(args.out, args.task, rows, description)
    print(ablation.format_markdown(args.task, rows))
    print(f"wall time {timing['wall_time_s']:.1f} s; wrote {', '.join(map(str, paths))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
