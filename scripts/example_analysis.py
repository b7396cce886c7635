"""An example of analysing a finished run in your own script: read the held-out metrics every
checkpoint logged, restore the checkpoints that are on disk, re-run their policies on the
held-out starts, and see how far training moved the parameters.

    python scripts/example_analysis.py --run-dir results/protocol --task hrv --seed 0

It runs on the record a fresh clone has (results/protocol): a published record ships each
seed's last checkpoint only (checkpoints.csv still lists every checkpoint with its metrics), so
the parameters are compared with the initial ones, which the seed rebuilds exactly. A run of
your own (artifacts/protocol) has every checkpoint, step 0 included.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, task_name

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--run-dir", type=Path, required=True, help="a finished run directory or a published record")
    parser.add_argument(
        "--task",
        default="swing",
        type=task_name,
        help="task to analyse: swing, hrv, <suite>:<environment> (gymnax:CartPole-v1) or module:factory",
    )
    parser.add_argument("--seed", type=int, default=0, help="training seed to analyse")
    parser.add_argument("--num-episodes", type=int, default=100, help="held-out episodes per restored checkpoint")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.num_episodes < 1:
        parser.error(f"--num-episodes {args.num_episodes}: expected at least 1")

    import jax
    import numpy as np

    from purehr.run import restore
    from purehr.run.compiled.program import initial_runners
    from purehr.run.compiled.task_setup import recorded_setup
    from purehr.run.store.run_dir import (
        RunDirectory,
        completed_checkpoint_steps,
        is_published_record,
        read_checkpoint_rows,
    )
    from purehr.tasks import get_task

    run_dir = RunDirectory(args.run_dir)
    manifest = run_dir.read_manifest()
    rows = read_checkpoint_rows(run_dir.checkpoints_csv(args.task, args.seed))
    on_disk = set(completed_checkpoint_steps(run_dir.checkpoint_dir(args.task, args.seed)))
    shipped = [row["actual_steps"] for row in rows if row["actual_steps"] in on_disk]
    where = "shipped in this record" if is_published_record(run_dir.root, manifest) else "on disk"
    if not shipped:
        parser.exit(2, f"error: {run_dir.checkpoint_dir(args.task, args.seed)} holds none of the listed checkpoints\n")
    # a suite's or your own task has no reference policy (metrics None), only floors, and an
    # environment that defines no success logs it as NaN: such a task is read by its return
    baseline = manifest["baselines"][args.task]
    metric = "success_rate" if any(math.isfinite(row["eval_success_rate"]) for row in rows) else "return_mean"
    label = {"success_rate": "success", "return_mean": "return"}[metric]
    if baseline.get("metrics") is not None:
        against = f"baseline {baseline['name']} {label} {baseline['metrics'][metric]:.2f}"
    else:
        floors = ", ".join(f"{name} {metrics[metric]:.2f}" for name, metrics in (baseline.get("floors") or {}).items())
        against = f"no reference policy; floors' {label}: {floors or '-'}"
    if metric == "return_mean":
        against += " (the environment defines no success: read by its return)"
    print(
        f"{args.task} seed {args.seed}: {len(rows)} checkpoints listed, {len(shipped)} {where} "
        f"({', '.join(f'{steps:,}' for steps in shipped)}); {against}"
    )
    sampled = [rows[i] for i in sorted(set(np.linspace(0, len(rows) - 1, min(len(rows), 8)).round().astype(int)))]
    print(f"  held-out {label} logged during training (steps: {label}):")
    print("   ", ", ".join(f"{row['actual_steps']:,}: {row[f'eval_{metric}']:.2f}" for row in sampled))

    # the earliest and the latest checkpoint on disk (a record: the latest only)
    restored = [restore(args.run_dir, args.task, args.seed, step=steps) for steps in sorted({shipped[0], shipped[-1]})]
    evaluate = get_task(args.task).heldout_evaluation
    for checkpoint in restored:
        metrics = jax.jit(
            lambda c=checkpoint: evaluate(c.env, c.env_params, c.pure_policy, num_episodes=args.num_episodes)
        )()
        logged = float(checkpoint.checkpoint_row[f"eval_{metric}"])
        also = "" if metric == "return_mean" else f", return {float(metrics['return_mean']):.3f}"
        print(
            f"  step {checkpoint.steps:>9,}: {label} {float(metrics[metric]):.2f} on {args.num_episodes} "
            f"episodes (logged during training {logged:.2f}){also}"
        )

    # the parameters the seed started from: step 0's, or rebuilt from the seed as training did
    if restored[0].steps == 0:
        initial = restored[0].params
    else:
        setup = recorded_setup(manifest, args.task)
        initial = jax.tree.map(lambda leaf: leaf[0], initial_runners([setup], [args.seed])[args.task].params)
    moved = [
        float(np.abs(np.asarray(a) - np.asarray(b)).mean())
        for a, b in zip(jax.tree.leaves(initial), jax.tree.leaves(restored[-1].params))
    ]
    print(
        f"  mean |parameter change| per layer, initial parameters to step {restored[-1].steps:,}:",
        json.dumps([round(m, 5) for m in moved]),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
