"""Held-out evaluation of a baseline policy, printed as a table or one JSON object.

    python scripts/evaluate.py --task swing --policy structured --json
    python scripts/evaluate.py --task hrv --policy oracle --json
    python scripts/evaluate.py --checkpoint artifacts/protocol --task swing --seed 0 --step latest --json
    python scripts/evaluate.py --run-dir artifacts/mixed --task gymnax:CartPole-v1 --seed 0 --json
    python scripts/evaluate.py --run-dir artifacts/mixed --task gymnax:CartPole-v1 --policy random --json

Policies by task (the baselines of purehr.tasks): swing {structured, zero, random}; hrv
{oracle, no-op, random}; any other task (a suite's, <suite>:<environment>, or your own,
module:factory) its floors {random} and, for continuous actions, {zero}, and a module's own
``BASELINES`` by name (docs/environments.md); or ``ppo``, the trained
policy restored from a run directory's checkpoint (--run-dir, or its older name --checkpoint;
deterministic: the mode of the policy); the output names the checkpoint's seed and step (with
--json, under "checkpoint"). With a run directory, a baseline is evaluated on the environment
the run recorded (its held-out parameters): ``--policy random --seed 0`` there gives the
manifest's random floor.
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

from purehr.cli.arguments import HelpFormatter, task_name
from purehr.cli.cache_flags import add_compile_cache_flags, start_compile_cache
from purehr.protocol_settings import MAX_HELDOUT_EPISODES as MAX_EPISODES
from purehr.reports.results_table import algorithm_label
from purehr.run import restore
from purehr.run.compiled.task_setup import recorded_setup
from purehr.run.store.run_dir import RunDirectory, read_checkpoint_rows
from purehr.tasks import TASK_NAMES, get_task
from purehr.types import Policy
from purehr.viz.pbt_figures import ancestors

PPO = "ppo"
"""``--policy ppo``: the trained policy of a run directory's checkpoint, whatever its algorithm (PPO,
PQN, SAC; the default with --run-dir)."""
POLICIES = {name: tuple(baseline.flag for baseline in get_task(name).baselines) for name in TASK_NAMES}
"""The baselines of the built-in tasks, by ``--policy`` flag (any other task: ``policies_of``)."""


def policies_of(task: str) -> tuple[str, ...]:
    """The ``--policy`` flags of ``task``'s baselines: its reference (if any), then its floors."""
    return POLICIES.get(task) or tuple(baseline.flag for baseline in get_task(task).baselines)


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


def load_recorded_task(run_dir: str, task: str) -> Evaluation:
    """The environment a run recorded for ``task`` (its constructor arguments) at the held-out
    parameters its checkpoints and floors were evaluated on."""
    manifest = RunDirectory(Path(run_dir)).read_manifest()
    if task not in manifest["tasks"]:
        raise ValueError(f"task {task!r} is not in the run {run_dir} (it has {manifest['tasks']})")
    setup = recorded_setup(manifest, task)
    return Evaluation(setup.env, setup.eval_env_params, setup.task.env_evaluation)


def load_checkpoint(args: argparse.Namespace) -> tuple[Evaluation, Policy, dict]:
    """The restored policy, the environment (held-out params) it was trained for, and which
    checkpoint it is, of which algorithm (``--step latest`` names no step: the output must)."""
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
        "algorithm": algorithm_label(RunDirectory(Path(args.checkpoint)).read_manifest(), args.task),
    }
    lineage = pbt_lineage(args.checkpoint, args.task, restored.seed, restored.steps)
    if lineage is not None:  # a PBT member: the weights may be another member's
        checkpoint["pbt_weights_of_seed"] = lineage["weights_of_seed"]
        checkpoint["pbt_weights_descend_from_seed"] = lineage["descend_from_seed"]
        note = pbt_weights_note(args.checkpoint, args.task, restored.seed, restored.steps)
        if note is not None:
            print(f"note: {note}", file=sys.stderr)
    return (
        Evaluation(restored.env, restored.env_params, evaluation.heldout_evaluation),
        restored.pure_policy,
        checkpoint,
    )


def pbt_lineage(run_dir, task: str, seed: int, steps: int) -> dict | None:
    """For a PBT run's member (None otherwise), from the lineage its checkpoints.csv files record
    (``pbt_parent``): ``weights_of_seed``, whose weights its checkpoint at ``steps`` holds (the
    step after the checkpoint's evaluation may have copied another member's in);
    ``descend_from_seed``, the original member they descend from; and ``last_copy`` (seed,
    steps): the last time it took another member's weights, or None."""
    run = RunDirectory(Path(run_dir))
    manifest = run.read_manifest()
    seeds = list(manifest.get("seeds") or [])
    if not manifest.get("pbt") or seed not in seeds:
        return None
    rows = {
        s: [r for r in read_checkpoint_rows(run.checkpoints_csv(task, s)) if r["actual_steps"] <= steps] for s in seeds
    }
    shared = min(len(member) for member in rows.values())
    if not shared or "pbt_parent" not in rows[seed][-1]:
        return None
    parents = [[int(rows[s][k]["pbt_parent"]) for s in seeds] for k in range(shared)]
    origin = int(ancestors(parents, seeds)[-1][seeds.index(seed)])
    copies = [(int(row["pbt_parent"]), row["actual_steps"]) for row in rows[seed][:shared] if row["pbt_parent"] != seed]
    return {
        "weights_of_seed": parents[-1][seeds.index(seed)],
        "descend_from_seed": origin,
        "last_copy": (copies or [None])[-1],
    }


def pbt_weights_note(run_dir, task: str, seed: int, steps: int) -> str | None:
    """Where a PBT member's checkpoint holds weights that are not its own: whose, in words."""
    lineage = pbt_lineage(run_dir, task, seed, steps)
    if lineage is None or lineage["descend_from_seed"] == seed == lineage["weights_of_seed"]:
        return None
    parent, origin = lineage["weights_of_seed"], lineage["descend_from_seed"]
    said = f"{task} seed {seed}'s checkpoint at {steps:,} steps holds "
    if parent != seed:
        said += (
            f"seed {parent}'s weights, not its own: PBT copied them into it at this checkpoint, after the held-out "
            f"evaluation its checkpoints.csv row records (of seed {seed}'s own weights)"
        )
        return said + (
            f"; by the run's lineage (checkpoints.csv pbt_parent) they descend from seed {origin}'s"
            if origin != parent
            else ""
        )
    copied_from, copied_at = lineage["last_copy"]
    return said + (
        f"weights that descend from seed {origin}'s, not its own: PBT last copied another member's weights into "
        f"it (seed {copied_from}'s) at {copied_at:,} steps (the run's lineage, checkpoints.csv pbt_parent)"
    )


def describe_policy(args: argparse.Namespace, checkpoint: dict | None) -> str:
    """What was evaluated, in words: a baseline's name, or the checkpoint's run, seed and step."""
    if checkpoint is None:
        name = args.policy if args.seed == 0 or args.policy != "random" else f"{args.policy} (seed {args.seed})"
        return name if getattr(args, "checkpoint", None) is None else f"{name} on the environment of {args.checkpoint}"
    latest = {"latest": ", the latest", "reported": ", the reported"}.get(checkpoint["requested_step"], "")
    return (
        f"{checkpoint.get('algorithm', 'PPO')} checkpoint of {checkpoint['run_dir']}, seed {checkpoint['seed']}, step "
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


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command's flags; ``prog`` names it in the usage line (None: the script's file name)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--task",
        required=True,
        type=task_name,
        help="task to evaluate on: swing, hrv, <suite>:<environment> (gymnax:CartPole-v1) or module:factory",
    )
    parser.add_argument(
        "--policy",
        default=None,
        help=f"{PPO} (a run directory's checkpoint) or a baseline policy, by task: "
        + "; ".join(f"{task}: {', '.join(p)}" for task, p in POLICIES.items())
        + "; any other task: its floors, random (and zero for continuous actions) "
        f"(default: {PPO} with --run-dir; give --policy or --run-dir)",
    )
    parser.add_argument(
        "--run-dir",
        default=None,
        metavar="RUN_DIR",
        help=f"the run directory whose checkpoint --policy {PPO} evaluates (a baseline: on the run's environment)",
    )
    parser.add_argument("--checkpoint", default=None, metavar="RUN_DIR", help="the older name of --run-dir")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="with --checkpoint: the training seed; with --policy random: its draws (0: the protocol's); "
        "the other baselines are deterministic",
    )
    parser.add_argument(
        "--step",
        default="latest",
        help="with --checkpoint: environment steps (actual or target), 'latest' or 'reported' (the checkpoint "
        "the run reports: docs/protocol.md)",
    )
    parser.add_argument("--num-episodes", type=int, default=100, help=f"held-out episodes, 1 to {MAX_EPISODES:,}")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_compile_cache_flags(parser)
    return parser


def parse_args(argv=None, prog: str | None = None) -> argparse.Namespace:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    start_compile_cache(args, parser)
    if args.run_dir is not None and args.checkpoint is not None:
        parser.error("give --run-dir or --checkpoint (its older name), not both")
    option = "--run-dir" if args.run_dir is not None else "--checkpoint"
    args.checkpoint = args.checkpoint if args.run_dir is None else args.run_dir
    choices = (PPO, *policies_of(args.task))
    if args.policy is None and args.checkpoint is None:
        parser.error(f"one of --policy or --run-dir is required (policies of {args.task}: {', '.join(choices)})")
    args.policy = PPO if args.policy is None else args.policy
    if args.policy not in choices:
        parser.error(f"--policy {args.policy!r} is not a {args.task} policy; choose from {', '.join(choices)}")
    if args.policy == PPO and args.checkpoint is None:
        parser.error(f"--policy {PPO} evaluates a trained checkpoint: give --run-dir RUN_DIR")
    if args.policy == PPO and args.step not in ("latest", "reported"):
        try:
            args.step = int(args.step)
        except ValueError:
            parser.error(
                f"--step {args.step!r}: expected an integer number of environment steps, 'latest' or 'reported'"
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
        parser.error(f"{option} {args.checkpoint} {state}; expected a run directory (one that holds manifest.json)")
    return args


def main(argv=None, *, prog: str | None = None) -> int:
    """``scripts/evaluate.py`` (``prog`` None) or ``purehr evaluate`` (``prog`` "purehr evaluate")."""
    args = parse_args(argv, prog)
    checkpoint = None
    try:
        if args.policy == PPO:
            evaluation, policy, checkpoint = load_checkpoint(args)
        else:
            if args.seed != 0 and args.policy != "random":
                print(
                    f"note: --seed {args.seed} changes nothing: the {args.policy} policy is deterministic",
                    file=sys.stderr,
                )
            evaluation = (
                load_task(args.task) if args.checkpoint is None else load_recorded_task(args.checkpoint, args.task)
            )
            policy = build_policy(args, evaluation)
    except (FileNotFoundError, ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    metrics = jax.jit(
        lambda: evaluation.heldout_evaluation(
            evaluation.env, evaluation.env_params, policy, num_episodes=args.num_episodes
        )
    )()
    metrics = {name: float(value) for name, value in jax.device_get(metrics).items()}
    wall = time.perf_counter() - start
    if args.json:
        # NaN (no successful episode; no success defined) is not JSON: write null.
        output = {name: (None if math.isnan(v) else v) for name, v in metrics.items()}
        if checkpoint is not None:
            output["checkpoint"] = {
                key: value for key, value in checkpoint.items() if key not in ("requested_step", "algorithm")
            }
        elif args.checkpoint is not None:
            output["environment_of"] = str(args.checkpoint)  # a baseline on the run's recorded environment
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
