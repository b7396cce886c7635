"""Which HRV reward learns? Train every reward form x similarity of docs/hrv_task.md with the same
seeds and budget, and compare held-out success.

    python studies/scripts/compare_rewards.py --steps 250000 --out results/reward_comparison \\
        --combinations potential/hrv_similarity          # one combination per invocation
    python studies/scripts/compare_rewards.py --out results/reward_comparison --summarize-only

One compiled call per combination (the reward form and the similarity select code, so they
are static): the scan over updates is outside, ``vmap(update)`` over seeds inside; before
training, every ``--eval-every`` updates and after the last a ``lax.cond`` runs the held-out
evaluation of docs/hrv_task.md (100 fixed episodes, difficulty 0.9, precision 0.05, deterministic
policy; plus the same episodes with N(0, 0.02^2) noise on the observed current HRV) on the
device, vmapped over seeds. Only those scalars leave the device.

Each combination writes ``<out>/<reward_form>__<similarity>/`` (curves.csv, run.json with
timing and load, final_metrics.csv last); every invocation then rebuilds from the finished
folders ``<out>/curves.csv``, ``final_metrics.csv`` (the last evaluation of every seed),
``summary.csv`` (mean and two-sided 95% t interval over seeds per combination),
``reward_comparison.{png,pdf}`` and ``comparison.json``. Held-out *return* is in each
reward's own units, so it is not comparable across reward forms; success, final distance
and alignment are.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed

from purehr.cli.arguments import HelpFormatter  # noqa: E402
from studies import reward_comparison  # noqa: E402
from studies.reward_comparison import COMBINATIONS  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--steps", type=int, default=300_000, help="environment steps per seed")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4], help="training seeds")
    parser.add_argument("--eval-every", type=int, default=10, help="updates between held-out evaluations")
    parser.add_argument("--eval-episodes", type=int, default=100, help="held-out episodes per evaluation")
    parser.add_argument(
        "--combinations", nargs="+", default=[f"{r}/{s}" for r, s in COMBINATIONS], help="reward_form/similarity pairs"
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory (one folder per combination)")
    parser.add_argument(
        "--overwrite", action="store_true", help="re-run a combination whose folder under --out is finished"
    )
    parser.add_argument("--no-figure", action="store_true", help="skip reward_comparison.png/.pdf")
    parser.add_argument(
        "--summarize-only",
        action="store_true",
        help="train nothing: rebuild summary, CSVs and figure from the finished combinations",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    combinations = []
    for text in args.combinations:
        parts = text.split("/")
        if len(parts) != 2 or (parts[0], parts[1]) not in COMBINATIONS:
            parser.exit(2, f"error: combination {text!r}: expected one of {[f'{r}/{s}' for r, s in COMBINATIONS]}\n")
        combinations.append((parts[0], parts[1]))
    if args.eval_every < 1 or args.steps < 1:
        parser.exit(2, "error: --steps and --eval-every must be positive\n")
    if not args.summarize_only:
        for reward_form, similarity in combinations:
            done = (
                reward_comparison.combination_dir(args.out, f"{reward_form}/{similarity}") / reward_comparison.FINAL_CSV
            )
            if done.exists() and not args.overwrite:
                parser.exit(
                    2,
                    f"error: {done} exists (that combination was already run); pass --overwrite, "
                    "--summarize-only, or choose another --out\n",
                )
        command = ["python", "studies/scripts/compare_rewards.py", *(sys.argv[1:] if argv is None else argv)]
        for reward_form, similarity in combinations:
            reward_comparison.run_combination(
                args.out,
                reward_form,
                similarity,
                steps=args.steps,
                seeds=args.seeds,
                eval_every=args.eval_every,
                eval_episodes=args.eval_episodes,
                command=command,
            )
    reward_comparison.summarize(args.out, args.no_figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
