"""Held-out evaluation of a baseline policy, printed as a table or one JSON object.

    python scripts/evaluate.py --task swing --policy structured --json
    python scripts/evaluate.py --task hrv --policy oracle --json
    python scripts/evaluate.py --checkpoint artifacts/protocol --task swing --seed 0 --step latest --json

Policies by task (the baselines of purehr.tasks): swing {structured, zero, random}; hrv
{oracle, no-op, random}; or a trained PPO policy restored from a run directory's checkpoint
(deterministic: the mode of the policy); the output names the checkpoint's seed and step
(with --json, under "checkpoint").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax

from purehr.cli.arguments import HelpFormatter
from purehr.ppo.config import MAX_HELDOUT_EPISODES as MAX_EPISODES
from purehr.run import restore
from purehr.tasks import TASK_NAMES, get_task
from purehr.types import Policy

POLICIES = {name: tuple(baseline.flag for baseline in get_task(name).baselines) for name in TASK_NAMES}


@dataclass(frozen=True)
class Evaluation:
    """What one task needs: its environment and params, and its held-out evaluator."""

    env: object
    env_params: object
    heldout_evaluation: Callable


def load_task(task: str) -> Evaluation:
    """The task's default environment and its own held-out evaluation (purehr.tasks)."""
    env = get_task(task).make_env()
    return Evaluation(env, env.default_params, get_task(task).env_evaluation)


def load_checkpoint(args: argparse.Namespace) -> tuple[Evaluation, Policy, dict]:
    """The restored PPO policy, the environment (held-out params) it was trained for, and
    which checkpoint it is (``--step latest`` names no step: the output must)."""
    with warnings.catch_warnings(record=True) as caught:  # said as one line each, not as a source line
        warnings.simplefilter("always")
        restored = restore(args.checkpoint, task=args.task, seed=args.seed, step=args.step)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    evaluation = load_task(args.task)
    checkpoint = {
        "run_dir": str(args.checkpoint),
        "seed": restored.seed,
        "actual_steps": restored.steps,
        "target_steps": restored.target_steps,
        "requested_step": args.step,
    }
    return (
        Evaluation(restored.env, restored.env_params, evaluation.heldout_evaluation),
        restored.pure_policy,
        checkpoint,
    )


def describe_policy(args: argparse.Namespace, checkpoint: dict | None) -> str:
    """What was evaluated, in words: a baseline's name, or the checkpoint's run, seed and step."""
    if checkpoint is None:
        return args.policy if args.seed == 0 or args.policy != "random" else f"{args.policy} (seed {args.seed})"
    latest = ", the latest" if checkpoint["requested_step"] == "latest" else ""
    return (
        f"PPO checkpoint of {checkpoint['run_dir']}, seed {checkpoint['seed']}, step "
        f"{checkpoint['actual_steps']:,}{latest} (saved for target {checkpoint['target_steps']:,})"
    )


def build_policy(args: argparse.Namespace, evaluation: Evaluation) -> Policy:
    """The baseline policy that ``args`` names. The random policy draws from the episodes' keys:
    ``--seed 0`` gives the protocol's draws (the manifest's ``random`` floor), another seed
    other draws on the same held-out episodes."""
    policy = get_task(args.task).baseline_by_flag(args.policy).make_policy(evaluation.env, evaluation.env_params)
    if args.policy != "random" or args.seed == 0:
        return policy
    return lambda observation, t, key: policy(observation, t, jax.random.fold_in(key, args.seed))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--task", required=True, choices=TASK_NAMES, help="task to evaluate on")
    parser.add_argument(
        "--policy",
        default=None,
        help="a baseline policy, by task: "
        + "; ".join(f"{task}: {', '.join(p)}" for task, p in POLICIES.items())
        + " (default: not set; give --policy or --checkpoint)",
    )
    parser.add_argument(
        "--checkpoint",
        default=None,
        metavar="RUN_DIR",
        help="evaluate the PPO policy saved in this run directory instead of --policy",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="with --checkpoint: the training seed; with --policy random: its draws (0: the protocol's); "
        "the other baselines are deterministic",
    )
    parser.add_argument(
        "--step", default="latest", help="with --checkpoint: environment steps (actual or target) or 'latest'"
    )
    parser.add_argument("--num-episodes", type=int, default=100, help=f"held-out episodes, 1 to {MAX_EPISODES:,}")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.checkpoint is not None:
        if args.policy is not None:
            parser.error("give either --policy or --checkpoint, not both")
        if args.step != "latest":
            try:
                args.step = int(args.step)
            except ValueError:
                parser.error(f"--step {args.step!r}: expected an integer number of environment steps or 'latest'")
        args.policy = "checkpoint"
    elif args.policy is None:
        parser.error("one of --policy or --checkpoint is required")
    elif args.policy not in POLICIES[args.task]:
        parser.error(
            f"--policy {args.policy!r} is not a {args.task} policy; choose from {', '.join(POLICIES[args.task])}"
        )
    if not 0 <= args.seed < 2**32:
        parser.error(f"--seed {args.seed}: expected 0 to {2**32 - 1:,} (a seed is an unsigned 32-bit integer)")
    if not 1 <= args.num_episodes <= MAX_EPISODES:
        parser.error(
            f"--num-episodes {args.num_episodes}: expected 1 to {MAX_EPISODES:,} (every episode's "
            "trajectory is held on the device at once)"
        )
    if args.checkpoint is not None and not Path(args.checkpoint).is_dir():
        state = "is a file" if Path(args.checkpoint).exists() else "does not exist"
        parser.error(f"--checkpoint {args.checkpoint} {state}; expected a run directory (one that holds manifest.json)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    checkpoint = None
    if args.checkpoint is not None:
        try:
            evaluation, policy, checkpoint = load_checkpoint(args)
        except (FileNotFoundError, ValueError, RuntimeError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    else:
        if args.seed != 0 and args.policy != "random":
            print(
                f"note: --seed {args.seed} changes nothing: the {args.policy} policy is deterministic", file=sys.stderr
            )
        evaluation = load_task(args.task)
        policy = build_policy(args, evaluation)
    start = time.perf_counter()
    metrics = jax.jit(
        lambda: evaluation.heldout_evaluation(
            evaluation.env, evaluation.env_params, policy, num_episodes=args.num_episodes
        )
    )()
    metrics = {name: float(value) for name, value in jax.device_get(metrics).items()}
    wall = time.perf_counter() - start
    if args.json:
        # NaN (no successful episode) is not JSON: write null.
        output = {name: (None if math.isnan(v) else v) for name, v in metrics.items()}
        if checkpoint is not None:
            output["checkpoint"] = {key: checkpoint[key] for key in ("run_dir", "seed", "actual_steps", "target_steps")}
        print(json.dumps(output))
    else:
        print(
            f"{args.task} / {describe_policy(args, checkpoint)}: {args.num_episodes} "
            f"held-out episodes ({wall:.1f} s with compilation)"
        )
        for name, value in metrics.items():
            print(f"  {name:24s} {value:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
