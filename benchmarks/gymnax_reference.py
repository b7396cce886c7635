"""PureJaxRL-style reference runs on gymnax CartPole-v1 and Pendulum-v1 through the adapter.

    python benchmarks/gymnax_reference.py --json benchmarks/results/gymnax_reference.json
    python benchmarks/gymnax_reference.py --cartpole-steps 500000 --pendulum-steps 1000000   # longer

CartPole-v1 uses PureJaxRL's PPO settings (4 envs x 128 steps, 4 epochs x 4 minibatches,
lr 2.5e-4 annealed, gamma 0.99, lambda 0.95, clip 0.2, entropy 0.01, 64-64 tanh), at
PureJaxRL's own budget of 500k steps unless told otherwise. Pendulum-v1 has no PureJaxRL
gymnax config; it uses the Stable-Baselines3 zoo's Pendulum PPO numbers where they carry
over (gamma 0.9, lr 1e-3, 10 epochs, no entropy bonus) with 16 envs x 256 steps and
minibatches of 512, at a budget that fits this machine (the default below; say so when
quoting it). Five seeds in one compiled call each; final return = greedy (mean action)
return over 20 episodes per seed from ``purehr.envs.rollout.run_episodes``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import numpy as np
from _common import load_averages, write_json

from purehr.algorithms.ppo.config import PPOConfig
from purehr.algorithms.trainer import make_train
from purehr.cli.arguments import HelpFormatter, output_file, positive_int
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.gymnax_adapter import GymnaxEnv
from purehr.envs.rollout import run_episodes

CARTPOLE = PPOConfig(
    total_timesteps=500_000,
    num_envs=4,
    num_steps=128,
    num_epochs=4,
    minibatch_size=128,
    learning_rate=2.5e-4,
    gamma=0.99,
    gae_lambda=0.95,
    clip_range=0.2,
    ent_coef=0.01,
    vf_coef=0.5,
    max_grad_norm=0.5,
    actor_hidden=(64, 64),
    critic_hidden=(64, 64),
)
PENDULUM = PPOConfig(
    total_timesteps=300_000,
    num_envs=16,
    num_steps=256,
    num_epochs=10,
    minibatch_size=512,
    learning_rate=1e-3,
    gamma=0.9,
    gae_lambda=0.95,
    clip_range=0.2,
    ent_coef=0.0,
    vf_coef=0.5,
    max_grad_norm=0.5,
    actor_hidden=(64, 64),
    critic_hidden=(64, 64),
)


def run(name: str, config: PPOConfig, seeds: int) -> dict:
    env = GymnaxEnv(name)
    train = make_train(config, env)
    keys = keys_for_seeds(range(seeds))
    started = time.perf_counter()
    compiled = train.jitted.lower(keys, None).compile()
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    result = jax.block_until_ready(compiled(keys, None))
    run_s = time.perf_counter() - started

    @jax.jit
    def greedy_returns(params):
        return run_episodes(env, env.default_params, train.algorithm.policy(params), jax.random.PRNGKey(7), 20)[
            "return"
        ]

    returns = np.asarray(jax.vmap(greedy_returns)(result.runner.params)).mean(axis=1)
    steps = seeds * config.num_updates * config.batch_size
    training_returns = np.asarray(result.metrics["mean_episode_return"])[:, -5:]
    return {
        "env": name,
        "seeds": seeds,
        "env_steps_per_seed": config.num_updates * config.batch_size,
        "config": config.to_dict(),
        "compile_s": round(compile_s, 2),
        "run_s": round(run_s, 2),
        "steps_per_s": round(steps / run_s),
        "final_greedy_return_per_seed": [round(float(r), 1) for r in returns],
        "final_greedy_return_mean": round(float(returns.mean()), 1),
        "final_greedy_return_std": round(float(returns.std()), 1),
        "last_5_updates_training_return_mean": round(float(np.nanmean(training_returns)), 1),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--seeds", type=positive_int, default=5, help="number of seeds (0 .. N-1)")
    parser.add_argument(
        "--cartpole-steps",
        type=positive_int,
        default=CARTPOLE.total_timesteps,
        help="environment steps per seed on CartPole-v1",
    )
    parser.add_argument(
        "--pendulum-steps",
        type=positive_int,
        default=PENDULUM.total_timesteps,
        help="environment steps per seed on Pendulum-v1",
    )
    parser.add_argument(
        "--envs",
        nargs="+",
        default=["CartPole-v1", "Pendulum-v1"],
        choices=["CartPole-v1", "Pendulum-v1"],
        help="gymnax environments to train",
    )
    parser.add_argument("--json", type=output_file, default=None, help="write the results here")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    configs = {
        "CartPole-v1": CARTPOLE.replace(total_timesteps=args.cartpole_steps),
        "Pendulum-v1": PENDULUM.replace(total_timesteps=args.pendulum_steps),
    }
    load_before = os.getloadavg()
    results = []
    for name in args.envs:
        results.append(run(name, configs[name], args.seeds))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "config"}), flush=True)
    out = {
        "command": " ".join(["gymnax_reference.py"] + (sys.argv[1:] if argv is None else list(argv))),
        "results": results,
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
        **load_averages(load_before),
    }
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
