"""Train SAC on a task for several seeds in one compiled call (``make_train``) and judge each seed
on the task's held-out evaluation, as the protocol's checkpoints do; a study tool, not the
protocol (no checkpoints, no dashboards).

    python scripts/sac_heldout.py --task swing --seeds 5 total_timesteps=300000 num_envs=16 gamma=0.995
"""

from __future__ import annotations

import argparse
import ast
import time
import warnings

import jax
import numpy as np

from purehr.algorithms.sac.config import SACConfig
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.tasks import get_task, heldout_env_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="swing")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--progress", type=int, default=50, help="print training statistics every N updates")
    parser.add_argument("fields", nargs="*", help="SACConfig fields as name=value (Python literals)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", "Mean of empty slice")
    fields = {}
    for item in args.fields:
        name, _, value = item.partition("=")
        try:
            fields[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            fields[name] = value
    config = SACConfig(**fields)
    task = get_task(args.task)
    env = task.make_env()
    start = time.perf_counter()

    window: list[dict] = []

    def progress(metrics):
        """Every update's metrics kept; the last ``--progress`` updates' means printed."""
        window.append({name: np.asarray(metrics[name]) for name in ("mean_episode_return", "train_success_rate")})
        if len(window) < args.progress:
            return
        steps = int(metrics["env_steps"][0])
        mean = {name: np.nanmean(np.stack([w[name] for w in window])) for name in window[0]}
        window.clear()
        print(
            f"{steps:>9,} steps {time.perf_counter() - start:7.1f} s  return {mean['mean_episode_return']:9.2f}"
            f"  train success {mean['train_success_rate']:.2f}  alpha {np.nanmean(metrics['alpha']):.3f}"
            f"  q {np.nanmean(metrics['q_mean']):8.2f}",
            flush=True,
        )

    trainer = make_train(config, env, callback=progress)
    result = trainer(keys_for_seeds(range(args.seeds)))
    jax.block_until_ready(result)
    train_s = time.perf_counter() - start
    params = heldout_env_params(trainer.algorithm, config.hyperparams())
    evaluate = jax.jit(
        jax.vmap(
            lambda p: task.heldout_evaluation(env, params, trainer.algorithm.policy(p), num_episodes=args.eval_episodes)
        )
    )
    evaluation = jax.tree.map(np.asarray, evaluate(result.runner.actor_params))
    print(f"config {config.to_dict()}")
    print(
        f"{config.num_updates * config.batch_size:,} steps per seed, {args.seeds} seeds: "
        f"{train_s:.1f} s training (with compilation)"
    )
    for name in ("success_rate", "time_to_rotation", "return_mean"):
        if name in evaluation:
            print(f"held-out {name:>17}: " + " ".join(f"{v:8.3f}" for v in evaluation[name]))
    print("diverged_at_update:", np.asarray(result.runner.diverged_at).tolist())


if __name__ == "__main__":
    main()
