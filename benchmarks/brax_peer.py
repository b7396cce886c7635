"""purehr against Brax's own PPO (``brax.training.agents.ppo.train``) on a Brax environment, the
same budget, network, batch and hyperparameters, interleaved in one process.

    python benchmarks/brax_peer.py --json benchmarks/results/brax_peer.json
    python benchmarks/brax_peer.py --steps 51200 --repeats 1          # shorter

The settings are Brax's published ones for inverted_pendulum (the ``train_fn`` table of
Brax's ``notebooks/training.ipynb``) at the batch a 2-core CPU turns over, as
``purehr.tasks.suites.brax.INVERTED_PENDULUM_DEFAULTS`` maps them: Brax with num_envs 128,
batch_size 64, num_minibatches 32, unroll_length 5 (every update 64 x 32 x 5 = 10,240 steps:
16 unrolls of 5 steps per environment, 32 minibatches of 64 unrolls), num_updates_per_batch 4,
discounting 0.97, learning_rate 3e-4 constant, entropy_cost 1e-2, reward_scaling 10,
normalize_observations, episode_length 1000 and ``ppo.train``'s defaults (clipping epsilon 0.3,
GAE lambda 0.95, value coefficient 0.5, no gradient clip; ``make_ppo_networks``: policy 4 x 32,
value 5 x 256, swish, tanh-squashed Gaussian with a state-independent std of softplus(1) +
0.001 at the start); purehr the same numbers as 128 environments x 80 steps, minibatches of
320, the same networks and initial std, ``anneal_lr=False`` and a gradient clip that never
binds (``max_grad_norm=1e9``: Brax clips nothing).

Each repeat trains one seed with each library (seed = repeat index), the order alternating;
then purehr trains all those seeds again vmapped in one call (its way; Brax's ``train`` takes
one seed per call), for the wall time of every seed with compilation included.
Timed: training only. Brax's ``train`` is a Python loop over ``--chunks`` compiled epochs and
compiles again at every call; its first two epochs compile (see ``WARMUP_EPOCHS``), so its
steps/s is the median of Brax's own ``training/sps`` over the epochs after them, and its
compile time the first two epochs' wall time less what their steps take at that rate.
purehr's program is compiled once (``lower().compile()``, timed) and trains the whole budget
in one call. Both final policies are judged by the same evaluator: purehr's held-out
evaluation (``purehr.envs.rollout.heldout_evaluation``, 20 fixed episodes, the deterministic
action tanh(mean)) on the same environment through ``BraxEnv``.

What is not the same (Brax's design, not a setting): Brax computes GAE over each 5-step unroll
with the current value network in every minibatch and normalises advantages per minibatch,
scales rewards by 10, and sends every ended episode back to the state it first reset to
(Brax's ``AutoResetWrapper``); purehr computes GAE once per update over the 80-step rollout
(V(final observation) bootstrapping time limits), normalises advantages over the batch, and
resets from fresh keys. Adam's epsilon is 1e-8 in Brax, 1e-5 in purehr; Brax samples its
entropy bonus, purehr uses the latent Gaussian's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata

import jax
import numpy as np
from _common import load_averages, write_json

from purehr.algorithms.ppo.config import PPOConfig
from purehr.algorithms.trainer import make_train
from purehr.cli.arguments import HelpFormatter, output_file, positive_int
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.brax_adapter import BraxEnv
from purehr.envs.rollout import heldout_evaluation
from purehr.tasks.suites.brax import INVERTED_PENDULUM_DEFAULTS

ENVIRONMENT = "inverted_pendulum"
BRAX_SETTINGS = dict(
    num_envs=128,  # published: 2048
    batch_size=64,  # published: 1024 (batch_size * num_minibatches / num_envs = 16 unrolls either way)
    num_minibatches=32,
    unroll_length=5,
    num_updates_per_batch=4,
    discounting=0.97,
    learning_rate=3e-4,
    entropy_cost=1e-2,
    reward_scaling=10,
    normalize_observations=True,
    episode_length=1000,
    action_repeat=1,
)
"""Brax's notebooks/training.ipynb settings for inverted_pendulum (2M steps there), at 1/16 of
the environments and of the minibatch."""
EVAL_EPISODES = 20
WARMUP_EPOCHS = 2
"""Brax's epochs that compile: the first, and the second, whose inputs (the first's outputs) come
in another device layout than ``device_put_replicated``'s (jax 0.10's pmap; measured with
``jax_log_compiles``: a second 28 s XLA compilation of the epoch, then none)."""
NO_CLIP = 1e9


def provide_device_put_replicated() -> None:
    """brax 0.14.2's ``ppo.train`` calls ``jax.device_put_replicated``, which jax 0.10 took out
    of its namespace (a deprecation that raises ``AttributeError``); the implementation is still
    jax's own (``jax._src.api``), so it is put back, unchanged: Brax's epochs then see the pmap
    layout they expect, and compile once."""
    try:
        jax.device_put_replicated  # noqa: B018
    except AttributeError:
        from jax._src.api import device_put_replicated

        jax.device_put_replicated = device_put_replicated


def steps_per_update() -> int:
    return BRAX_SETTINGS["batch_size"] * BRAX_SETTINGS["num_minibatches"] * BRAX_SETTINGS["unroll_length"]


def purehr_config(total_timesteps: int) -> PPOConfig:
    """Brax's numbers in purehr's terms: the rollout of each update is the 16 unrolls of 5 steps
    Brax collects per environment, a minibatch is Brax's 64 unrolls of 5 steps."""
    num_envs = BRAX_SETTINGS["num_envs"]
    return INVERTED_PENDULUM_DEFAULTS.replace(
        total_timesteps=total_timesteps,
        num_envs=num_envs,
        num_steps=steps_per_update() // num_envs,
        minibatch_size=BRAX_SETTINGS["batch_size"] * BRAX_SETTINGS["unroll_length"],
        num_epochs=BRAX_SETTINGS["num_updates_per_batch"],
        learning_rate=BRAX_SETTINGS["learning_rate"],
        anneal_lr=False,
        gamma=BRAX_SETTINGS["discounting"],
        gae_lambda=0.95,
        clip_range=0.3,
        vf_coef=0.5,
        ent_coef=BRAX_SETTINGS["entropy_cost"],
        max_grad_norm=NO_CLIP,
        normalize_observations=BRAX_SETTINGS["normalize_observations"],
    )


def judged(env: BraxEnv, policy) -> np.ndarray:
    """Held-out return mean of ``policy`` (20 fixed episodes, purehr's evaluator)."""
    evaluation = jax.jit(lambda: heldout_evaluation(env, env.default_params, policy, EVAL_EPISODES))()
    return float(evaluation["return_mean"])


class BraxRun:
    def __init__(self, env: BraxEnv, total_timesteps: int, chunks: int):
        from brax.training.agents.ppo import train as brax_ppo

        provide_device_put_replicated()
        self.env, self.total_timesteps, self.chunks = env, total_timesteps, chunks
        self.train = brax_ppo.train

    def run(self, seed: int) -> dict:
        epochs: list[dict] = []
        started = time.perf_counter()
        make_policy, params, _ = self.train(
            environment=self.env.brax_env,
            num_timesteps=self.total_timesteps,
            seed=seed,
            num_evals=self.chunks + 1,  # an initial point, then one per compiled epoch
            run_evals=False,
            progress_fn=lambda step, metrics: epochs.append(
                {"step": int(step), "sps": float(metrics["training/sps"]), "walltime": metrics["training/walltime"]}
            ),
            **BRAX_SETTINGS,
        )
        call_s = time.perf_counter() - started
        steady = epochs[WARMUP_EPOCHS:]
        steady_sps = float(np.median([epoch["sps"] for epoch in steady]))
        warmup_s = float(epochs[WARMUP_EPOCHS - 1]["walltime"])
        inference = make_policy(params, deterministic=True)

        def policy(observation, t, key):
            return inference(observation[None], key)[0][0]

        return {
            "steps_per_s": steady_sps,
            "compile_s": warmup_s - epochs[WARMUP_EPOCHS - 1]["step"] / steady_sps,
            "train_s": float(epochs[-1]["walltime"]) - warmup_s,
            "call_s": call_s,
            "env_steps": epochs[-1]["step"],
            "heldout_return": judged(self.env, policy),
        }


class PurehrRun:
    def __init__(self, env: BraxEnv, total_timesteps: int):
        self.env = env
        self.config = purehr_config(total_timesteps)
        self.train = make_train(self.config, env)
        started = time.perf_counter()
        self.compiled = self.train.jitted.lower(keys_for_seeds([0]), None).compile()
        self.compile_s = time.perf_counter() - started

    def run(self, seed: int) -> dict:
        started = time.perf_counter()
        result = jax.block_until_ready(self.compiled(keys_for_seeds([seed]), None))
        train_s = time.perf_counter() - started
        env_steps = self.config.num_updates * self.config.batch_size
        params = jax.tree.map(lambda x: x[0], result.runner.params)
        return {
            "steps_per_s": env_steps / train_s,
            "compile_s": self.compile_s,
            "train_s": train_s,
            "env_steps": env_steps,
            "heldout_return": judged(self.env, self.train.algorithm.policy(params)),
        }


def all_seeds_in_one_call(env: BraxEnv, total_timesteps: int, seeds: int) -> dict:
    """purehr's own way to train several seeds: vmapped in one compiled call (Brax's ``train``
    takes one seed per call, and compiles at each)."""
    config = purehr_config(total_timesteps)
    train = make_train(config, env)
    keys = keys_for_seeds(range(seeds))
    started = time.perf_counter()
    compiled = train.jitted.lower(keys, None).compile()
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    result = jax.block_until_ready(compiled(keys, None))
    train_s = time.perf_counter() - started
    returns = [
        judged(env, train.algorithm.policy(jax.tree.map(lambda x: x[seed], result.runner.params)))
        for seed in range(seeds)
    ]
    return {
        "seeds": seeds,
        "compile_s": round(compile_s, 1),
        "train_s": round(train_s, 1),
        "steps_per_s": round(seeds * config.num_updates * config.batch_size / train_s),
        "heldout_return_per_seed": [round(r, 1) for r in returns],
    }


def compare(total_timesteps: int, repeats: int, chunks: int, backend: str) -> dict:
    env = BraxEnv(ENVIRONMENT, backend=backend, episode_length=BRAX_SETTINGS["episode_length"])
    libraries = {"brax": BraxRun(env, total_timesteps, chunks), "purehr": PurehrRun(env, total_timesteps)}
    runs: dict[str, list[dict]] = {name: [] for name in libraries}
    for seed in range(repeats):
        order = list(libraries) if seed % 2 == 0 else list(reversed(libraries))
        for name in order:
            runs[name].append(dict(libraries[name].run(seed), seed=seed))
            print(json.dumps({"library": name, **{k: _round(v) for k, v in runs[name][-1].items()}}), flush=True)
    summary = {}
    for name, rows in runs.items():
        summary[name] = {
            "steps_per_s_median": round(float(np.median([row["steps_per_s"] for row in rows]))),
            "steps_per_s_best": round(max(row["steps_per_s"] for row in rows)),
            "compile_s_median": round(float(np.median([row["compile_s"] for row in rows])), 1),
            "heldout_return_per_seed": [round(row["heldout_return"], 1) for row in rows],
            "heldout_return_mean": round(float(np.mean([row["heldout_return"] for row in rows])), 1),
        }
    ratio = summary["purehr"]["steps_per_s_median"] / summary["brax"]["steps_per_s_median"]
    one_call = all_seeds_in_one_call(env, total_timesteps, repeats)
    print(json.dumps({"library": "purehr, all seeds in one call", **one_call}), flush=True)
    end_to_end = {
        "brax_train_calls_s": round(sum(row["call_s"] for row in runs["brax"]), 1),
        "purehr_one_call_s": round(one_call["compile_s"] + one_call["train_s"], 1),
    }
    return {
        "environment": ENVIRONMENT,
        "backend": backend,
        "total_timesteps": total_timesteps,
        "brax_settings": BRAX_SETTINGS,
        "purehr_config": libraries["purehr"].config.to_dict(),
        "runs": runs,
        "summary": summary,
        "purehr_all_seeds_one_call": one_call,
        "end_to_end_all_seeds": end_to_end,
        "ratio_purehr_over_brax_steps_per_s": round(ratio, 3),
        "purehr_at_least_as_fast": ratio >= 1.0,
        "purehr_returns_no_worse": summary["purehr"]["heldout_return_mean"]
        >= summary["brax"]["heldout_return_mean"] - 1e-6,
    }


def _round(value):
    return round(value, 2) if isinstance(value, float) else value


def markdown(record: dict) -> str:
    summary = record["summary"]
    lines = [
        "| library | steps/s (median of repeats) | compile s (median) | held-out return per seed | mean |",
        "|---|---:|---:|---|---:|",
    ]
    for name in ("brax", "purehr"):
        row = summary[name]
        returns = ", ".join(f"{r:.1f}" for r in row["heldout_return_per_seed"])
        lines.append(
            f"| {name} | {row['steps_per_s_median']:,} | {row['compile_s_median']} | {returns} | "
            f"{row['heldout_return_mean']:.1f} |"
        )
    one_call = record["purehr_all_seeds_one_call"]
    returns = ", ".join(f"{r:.1f}" for r in one_call["heldout_return_per_seed"])
    lines.append(
        f"| purehr, {one_call['seeds']} seeds in one call | {one_call['steps_per_s']:,} (all seeds) | "
        f"{one_call['compile_s']} (once) | {returns} | "
        f"{np.mean(one_call['heldout_return_per_seed']):.1f} |"
    )
    end_to_end = record["end_to_end_all_seeds"]
    lines.append(f"\npurehr / Brax steps/s (one seed each): {record['ratio_purehr_over_brax_steps_per_s']}")
    lines.append(
        f"every seed, compilation included: Brax's {one_call['seeds']} train calls "
        f"{end_to_end['brax_train_calls_s']} s, purehr's one call {end_to_end['purehr_one_call_s']} s"
    )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--steps", type=positive_int, default=122_880, help="environment steps per seed (a multiple of 10,240 x chunks)"
    )
    parser.add_argument("--repeats", type=positive_int, default=3, help="seeds trained by each library, interleaved")
    parser.add_argument(
        "--chunks", type=positive_int, default=4, help="Brax's compiled epochs (its num_evals - 1); 3 or more"
    )
    parser.add_argument(
        "--backend",
        default="positional",
        choices=("positional", "generalized", "spring", "mjx"),
        help="Brax physics backend, the same for both libraries",
    )
    parser.add_argument("--json", type=output_file, default=None, help="also write the record to this file")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        import brax  # noqa: F401
    except ImportError:
        parser.exit(2, "error: this benchmark needs brax: pip install -c constraints.txt '.[brax]'\n")
    unit = steps_per_update() * args.chunks
    if args.chunks <= WARMUP_EPOCHS or args.steps % unit:
        parser.error(
            f"--steps {args.steps} --chunks {args.chunks}: expected --chunks >= 3 (Brax's first two epochs "
            f"compile) and --steps a multiple of {steps_per_update():,} x chunks = {unit:,}, so both libraries "
            "train the same updates"
        )
    load_before = os.getloadavg()
    record = compare(args.steps, args.repeats, args.chunks, args.backend)
    print(markdown(record), flush=True)
    out = {
        "command": " ".join(["python benchmarks/brax_peer.py"] + (sys.argv[1:] if argv is None else list(argv))),
        "record": record,
        "jax": jax.__version__,
        "brax": metadata.version("brax"),
        "devices": [str(d) for d in jax.devices()],
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        **load_averages(load_before),
    }
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
