"""One algorithm on one task, every seed in one compiled call, judged by the task's held-out
evaluation: a quick study of an algorithm's settings before they become a task's defaults.

    python scripts/algorithm_study.py --algorithm pqn --task hrv --seeds 0 1 2 3 4 \
        --set total_timesteps=300000 learning_rate=3e-4

Prints one JSON line: the config, environment steps, wall time (compile included) and each
seed's held-out metrics. The task's defaults are used where they are the algorithm's, else the
algorithm's own; ``--set`` overrides fields (Python literals)."""

from __future__ import annotations

import argparse
import ast
import json
import time

import jax
import numpy as np

from purehr.algorithms.registry import algorithm_of, default_config
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.tasks import get_task, heldout_env_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algorithm", default="ppo")
    parser.add_argument("--task", default="hrv")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--episodes", type=int, default=None, help="held-out episodes (default: the task's)")
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE")
    args = parser.parse_args()
    task = get_task(args.task)
    config = task.default_config
    if algorithm_of(config).name != args.algorithm:
        config = default_config(args.algorithm)
    changes = {}
    for item in args.set:
        name, _, value = item.partition("=")
        try:
            changes[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            changes[name] = value
    config = config.replace(**changes)
    env = task.make_env()
    episodes = task.default_protocol.eval_episodes if args.episodes is None else args.episodes

    start = time.perf_counter()
    trainer = make_train(config, env)
    result = trainer(keys_for_seeds(args.seeds))
    jax.block_until_ready(result)
    train_seconds = time.perf_counter() - start
    algorithm = trainer.algorithm
    eval_params = heldout_env_params(algorithm, config.hyperparams())
    evaluate = jax.jit(
        jax.vmap(lambda p: task.heldout_evaluation(env, eval_params, algorithm.policy(p), num_episodes=episodes))
    )
    heldout = evaluate(algorithm.network_params(result.runner))
    print(
        json.dumps(
            {
                "algorithm": args.algorithm,
                "task": args.task,
                "config": config.to_dict(),
                "env_steps": int(config.num_updates * config.batch_size),
                "train_seconds": round(train_seconds, 1),
                "seeds": args.seeds,
                "diverged_at_update": np.asarray(algorithm.diverged_at_update(result.runner)).tolist(),
                "heldout": {k: np.round(np.asarray(v, np.float64), 4).tolist() for k, v in heldout.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
