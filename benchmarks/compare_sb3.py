"""purehr against Stable-Baselines3 PPO on the HRV task, same budget, same held-out episodes.

    pip install -e ".[bench]"          # stable-baselines3, torch 2.13.0 (CPU), gymnasium
    python benchmarks/compare_sb3.py --steps 40960 --seeds 2 --json benchmarks/results/sb3_hrv.json

SB3 trains through ``purehr.envs.to_gymnasium(HRWritingEnv(hrv_dim=8), flatten=True)`` in a
``DummyVecEnv`` of 8 copies with the HRV protocol's PPO settings (8 x 256 rollout, minibatch
64, 4 epochs, lr 3e-4 decaying linearly, gamma 0.99, lambda 0.95, clip 0.2, entropy 0.01,
value 0.5, grad norm 0.5, actor 256-128-64 / critic 256-128 ReLU, separate networks). purehr
trains the same config with ``make_train`` (all seeds in one call). Both final policies are
scored by ``purehr.envs.hrv.heldout_evaluation`` on the same 100 held-out episodes
(deterministic actions; the SB3 policy is called through ``jax.pure_callback``).

Differences that remain: SB3 initialises orthogonally and treats a time-limit truncation by
adding ``gamma * V(terminal obs)`` to the reward (same effect as our bootstrap); its
``log_std``-free categorical heads are the same family. Steps per second are environment
steps over wall time of ``learn`` (SB3) and of the compiled call (purehr, compile apart).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import load_averages, write_json

from purehr.algorithms.trainer import make_train
from purehr.cli.arguments import HelpFormatter, output_file, positive_int
from purehr.engine.seeds import keys_for_seeds
from purehr.envs import HRWritingEnv, to_gymnasium
from purehr.envs.hrv import heldout_evaluation
from purehr.envs.spaces import flatten_observation
from purehr.tasks import HRV_DEFAULTS


def sb3_policy_for_jax(model):
    """A purehr policy ``(obs, t, key) -> action`` that asks the torch model on the host."""
    action_shape = jax.ShapeDtypeStruct(model.action_space.shape, jnp.int32)

    def host_predict(flat_observation):
        action, _ = model.predict(np.asarray(flat_observation), deterministic=True)
        return np.asarray(action, np.int32)

    def policy(observation, t, key):
        return jax.pure_callback(
            host_predict, action_shape, flatten_observation(observation), vmap_method="expand_dims"
        )

    return policy


def train_sb3(env, config, steps: int, seed: int) -> tuple[object, float]:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    vec_env = DummyVecEnv(
        [lambda i=i: to_gymnasium(env, flatten=True, seed=seed * 1000 + i) for i in range(config.num_envs)]
    )
    model = PPO(
        "MlpPolicy",
        vec_env,
        learning_rate=lambda remaining: config.learning_rate * remaining,
        n_steps=config.num_steps,
        batch_size=config.minibatch_size,
        n_epochs=config.num_epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        ent_coef=config.ent_coef,
        vf_coef=config.vf_coef,
        max_grad_norm=config.max_grad_norm,
        seed=seed,
        device="cpu",
        verbose=0,
        policy_kwargs=dict(
            net_arch=dict(pi=list(config.actor_hidden), vf=list(config.critic_hidden)), activation_fn=torch.nn.ReLU
        ),
    )
    started = time.perf_counter()
    model.learn(total_timesteps=steps)
    return model, time.perf_counter() - started


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--steps", type=positive_int, default=40960, help="environment steps per seed (both)")
    parser.add_argument("--seeds", type=positive_int, default=2, help="number of seeds (0 .. N-1)")
    parser.add_argument("--json", type=output_file, default=None, help="write the results here")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    load_before = os.getloadavg()

    env = HRWritingEnv(hrv_dim=8)
    params = env.default_params
    config = HRV_DEFAULTS.replace(total_timesteps=args.steps)
    steps = config.num_updates * config.batch_size

    # --- purehr: every seed in one compiled call ---
    train = make_train(config, env)
    keys = keys_for_seeds(range(args.seeds))
    started = time.perf_counter()
    compiled = train.jitted.lower(keys, None).compile()
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    result = jax.block_until_ready(compiled(keys, None))
    purehr_run = time.perf_counter() - started
    ppo = train.algorithm
    score = jax.jit(lambda p: heldout_evaluation(env, params, ppo.policy(p)))
    purehr_eval = [
        {k: float(v) for k, v in score(jax.tree.map(lambda x: x[i], result.runner.params)).items()}
        for i in range(args.seeds)
    ]

    # --- SB3: one seed after another, through the Gymnasium wrapper ---
    sb3_runs = []
    for seed in range(args.seeds):
        model, learn_s = train_sb3(env, config, steps, seed)
        metrics = heldout_evaluation(env, params, sb3_policy_for_jax(model))
        sb3_runs.append(
            {
                "seed": seed,
                "learn_s": round(learn_s, 2),
                "steps_per_s": round(steps / learn_s, 1),
                "heldout": {k: float(v) for k, v in metrics.items()},
            }
        )

    def mean(values):
        return round(float(np.mean(values)), 4)

    out = {
        "command": " ".join(["compare_sb3.py"] + (sys.argv[1:] if argv is None else list(argv))),
        "task": "hrv (hrv_dim=8, default params, no curriculum)",
        "env_steps_per_seed": steps,
        "seeds": args.seeds,
        "purehr": {
            "compile_s": round(compile_s, 2),
            "run_s_all_seeds": round(purehr_run, 2),
            "steps_per_s": round(args.seeds * steps / purehr_run, 1),
            "heldout_return_mean": mean([e["return_mean"] for e in purehr_eval]),
            "heldout_success_rate": mean([e["success_rate"] for e in purehr_eval]),
            "heldout_final_distance": mean([e["final_distance"] for e in purehr_eval]),
            "per_seed": purehr_eval,
        },
        "sb3": {
            "learn_s_total": round(sum(r["learn_s"] for r in sb3_runs), 2),
            "steps_per_s": round(args.seeds * steps / sum(r["learn_s"] for r in sb3_runs), 1),
            "heldout_return_mean": mean([r["heldout"]["return_mean"] for r in sb3_runs]),
            "heldout_success_rate": mean([r["heldout"]["success_rate"] for r in sb3_runs]),
            "heldout_final_distance": mean([r["heldout"]["final_distance"] for r in sb3_runs]),
            "per_seed": sb3_runs,
        },
        "versions": {
            "jax": jax.__version__,
            "stable_baselines3": __import__("stable_baselines3").__version__,
            "torch": __import__("torch").__version__,
        },
        **load_averages(load_before),
        "cpu_count": os.cpu_count(),
    }
    out["speedup_steps_per_s"] = round(out["purehr"]["steps_per_s"] / out["sb3"]["steps_per_s"], 1)
    print(json.dumps(out, indent=1))
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
