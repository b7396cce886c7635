"""An example of analysing a finished run in your own script: restore checkpoints, re-run
their policies on the held-out starts, and compare a seed's learning with the baseline.

    python scripts/example_analysis.py --run-dir artifacts/protocol --task swing --seed 0
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter
    from purehr.tasks import TASK_NAMES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--run-dir", type=Path, required=True, help="a finished run directory")
    parser.add_argument("--task", default="swing", choices=TASK_NAMES, help="task to analyse")
    parser.add_argument("--seed", type=int, default=0, help="training seed to analyse")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    import jax
    import numpy as np

    from purehr.run import restore
    from purehr.run.files import read_csv
    from purehr.run.run_dir import RunDirectory
    from purehr.tasks import get_task

    run_dir = RunDirectory(args.run_dir)
    manifest = run_dir.read_manifest()
    rows = read_csv(run_dir.checkpoints_csv(args.task, args.seed))
    print(
        f"{args.task} seed {args.seed}: {len(rows)} checkpoints; baseline "
        f"{manifest['baselines'][args.task]['name']} success "
        f"{manifest['baselines'][args.task]['metrics']['success_rate']:.2f}"
    )
    first, last = restore(args.run_dir, args.task, args.seed, step=0), restore(args.run_dir, args.task, args.seed)
    evaluate = get_task(args.task).heldout_evaluation
    for restored in (first, last):
        metrics = jax.jit(lambda: evaluate(restored.env, restored.env_params, restored.pure_policy))()
        logged = float(restored.checkpoint_row["eval_success_rate"])
        print(
            f"  step {restored.steps:>9,}: success {float(metrics['success_rate']):.2f} "
            f"(logged during training {logged:.2f}), return {float(metrics['return_mean']):.3f}"
        )
    moved = [
        float(np.abs(np.asarray(a) - np.asarray(b)).mean())
        for a, b in zip(jax.tree.leaves(first.params), jax.tree.leaves(last.params))
    ]
    print("  mean |parameter change| per layer:", json.dumps([round(m, 5) for m in moved]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
