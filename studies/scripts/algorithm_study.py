"""One algorithm on one task, every seed in one compiled call, judged by the task's held-out
evaluation: a quick study of an algorithm's settings before they become a task's defaults, and
the tool behind ``results/algorithms/``'s learning table.

    python studies/scripts/algorithm_study.py --algorithm pqn --task hrv --seeds 0 1 2 3 4 \
        --set total_timesteps=300000 learning_rate=3e-4 --progress 50 --out study.json
    python studies/scripts/algorithm_study.py --algorithm sac --task swing --seeds 0 \
        --env-arg small_start_fraction=1.0 --progress 40

Prints one JSON line (and writes it to ``--out``): the config, environment steps, wall time
(compile included), each seed's held-out metrics and, with ``--progress N``, each seed's training
statistics averaged over every N updates (the rollout's episode return and, on tasks with a
success, its success rate on the training starts; ``--statistic`` adds more of the algorithm's
metrics, such as SAC's alpha and entropy), so the step and time at which training first
met a goal can be read without a checkpointed run. The task's config for the algorithm (``Task.config_for``:
its tuned default, else the algorithm's own) is the start; ``--set`` overrides fields (Python literals),
``--env-arg`` the keyword arguments of the task's environment for training (JSON values, as
``train_all_seeds.py``'s; the held-out starts are the task's own whatever the training starts)."""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed

import jax  # noqa: E402
import numpy as np  # noqa: E402

from purehr.algorithms.registry import ALGORITHMS  # noqa: E402
from purehr.algorithms.trainer import make_train  # noqa: E402
from purehr.cli.arguments import HelpFormatter, non_negative_int, output_file, positive_int, task_name  # noqa: E402
from purehr.cli.env_args import parse_value  # noqa: E402
from purehr.engine.seeds import keys_for_seeds  # noqa: E402
from purehr.tasks import get_task, heldout_env_params  # noqa: E402

TRAINING_STATISTICS = ("mean_episode_return", "train_success_rate")
"""The rollout metrics (``ROLLOUT_METRICS``) ``--progress`` averages per seed."""


class TrainingWindows:
    """``make_train``'s callback: each seed's training statistics (``names``: those the metrics
    have) averaged over every ``every`` updates (NaN where a window completed no episode), with
    the steps and wall seconds at its end."""

    def __init__(self, every: int, start: float, names: tuple[str, ...] = TRAINING_STATISTICS):
        self.every, self.start, self.names = every, start, names
        self.window: list[dict[str, np.ndarray]] = []
        self.rows: list[dict] = []

    def __call__(self, metrics) -> None:
        self.window.append({k: np.asarray(metrics[k], np.float64) for k in self.names if k in metrics})
        if len(self.window) < self.every:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a window with no finished episode: NaN
            means = {k: np.nanmean(np.stack([w[k] for w in self.window]), axis=0) for k in self.window[0]}
        self.window.clear()
        row = {"env_steps": int(np.asarray(metrics["env_steps"]).reshape(-1)[0])}
        row["seconds"] = round(time.perf_counter() - self.start, 1)
        row.update({k: rounded(v) for k, v in means.items()})
        self.rows.append(row)
        print(json.dumps(row), flush=True)


def rounded(values) -> list:
    """An array as a list of floats to 4 decimals, NaN as ``None`` (strict JSON has no NaN)."""
    values = np.round(np.asarray(values, np.float64), 4)
    return [None if np.isnan(v) else float(v) for v in values.reshape(-1)]


def parse_changes(items: list[str]) -> dict:
    """``FIELD=VALUE`` pairs, values as Python literals where they parse (else strings)."""
    changes = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--set {item!r}: expected FIELD=VALUE")
        try:
            changes[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            changes[name] = value
    return changes


def parse_env_args(items: list[str]) -> dict:
    """``KEY=VALUE`` pairs, values as JSON where they parse (else strings), as ``--env-arg`` of
    ``train_all_seeds.py`` reads them."""
    kwargs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise SystemExit(
                f"--env-arg {item!r}: expected KEY=VALUE with KEY a keyword name (e.g. small_start_fraction=1.0)"
            )
        kwargs[key] = parse_value(value)
    return kwargs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--algorithm", default="ppo", choices=sorted(ALGORITHMS), help="the algorithm to train")
    parser.add_argument("--task", type=task_name, default="hrv", help="the task (a name, gymnax:ID, module:factory)")
    parser.add_argument("--seeds", type=non_negative_int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds")
    parser.add_argument("--episodes", type=positive_int, default=None, help="held-out episodes (default: the task's)")
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="FIELD=VALUE", help="config fields over the task's defaults"
    )
    parser.add_argument(
        "--env-arg",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="a keyword argument of the task's environment for training (VALUE read as JSON where it is); repeat it",
    )
    parser.add_argument(
        "--progress", type=non_negative_int, default=0, help="training statistics every N updates (0: none)"
    )
    parser.add_argument(
        "--statistic",
        action="append",
        default=None,
        metavar="NAME",
        help="one more training metric for --progress to average (e.g. alpha, entropy for SAC; "
        "the algorithm's MetricNames); repeat it",
    )
    parser.add_argument("--out", type=output_file, default=None, help="also write the JSON result to this file")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    task = get_task(args.task)
    config = task.config_for(args.algorithm).replace(**parse_changes(args.set))
    env_kwargs = parse_env_args(args.env_arg or [])
    try:
        env = task.make_env(**env_kwargs)
    except (TypeError, ValueError) as error:  # an unknown keyword or a value out of range, before any work
        raise SystemExit(f"--env-arg {env_kwargs}: {error}") from None
    episodes = task.default_protocol.eval_episodes if args.episodes is None else args.episodes

    start = time.perf_counter()
    names = TRAINING_STATISTICS + tuple(args.statistic or ())
    windows = TrainingWindows(args.progress, start, names) if args.progress else None
    trainer = make_train(config, env, callback=windows)
    unknown = sorted(set(args.statistic or ()) - set(trainer.algorithm.metric_names.columns))
    if unknown:  # before the compile
        columns = ", ".join(trainer.algorithm.metric_names.columns)
        raise SystemExit(
            f"--statistic {' '.join(unknown)}: not a metric of {args.algorithm}; expected one of {columns}"
        )
    result = trainer(keys_for_seeds(args.seeds))
    jax.block_until_ready(result)
    train_seconds = time.perf_counter() - start
    algorithm = trainer.algorithm
    eval_params = heldout_env_params(algorithm, config.hyperparams())
    evaluate = jax.jit(
        jax.vmap(lambda p: task.heldout_evaluation(env, eval_params, algorithm.policy(p), num_episodes=episodes))
    )
    heldout = evaluate(algorithm.network_params(result.runner))
    if windows and all(v is None for v in rounded(heldout.get("success_rate", np.nan))):
        for row in windows.rows:  # a task without a success (gymnax's): its success rate says nothing
            row.pop("train_success_rate", None)
    record = {
        "algorithm": args.algorithm,
        "task": args.task,
        "config": config.to_dict(),
        "env_kwargs": task.env_kwargs(env),
        "env_steps": int(config.num_updates * config.batch_size),
        "train_seconds": round(train_seconds, 1),
        "seeds": args.seeds,
        "heldout_episodes": episodes,
        "diverged_at_update": np.asarray(algorithm.diverged_at_update(result.runner)).tolist(),
        "heldout": {k: rounded(v) for k, v in heldout.items()},
        "training": windows.rows if windows else None,
    }
    line = json.dumps(record, default=repr)  # an environment argument JSON cannot write: its repr
    print(line)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n")


if __name__ == "__main__":
    main()
