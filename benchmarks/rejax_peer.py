"""purehr against rejax (0.1.3), its closest peer, on rejax's own published PPO settings.

    python benchmarks/rejax_peer.py --json benchmarks/results/rejax_peer.json
    python benchmarks/rejax_peer.py --envs CartPole-v1 --repeats 1      # shorter

Both libraries train the same gymnax environments (purehr through ``GymnaxEnv``) with
rejax's configs ``configs/gymnax/cartpole.yaml`` and ``pendulum.yaml`` (ppo section), 5
seeds vmapped in one jitted call each, in one process, interleaved (rejax, purehr, rejax,
purehr, ...) so both see the same machine load. Reported per library and environment:
compile time, training steps per second (best of ``--repeats`` runs), the compiled
program's memory (XLA's own account: arguments + outputs + temporaries), and the final
greedy return (deterministic action: argmax / mean), both measured by the same evaluator
(``purehr.envs.rollout.run_episodes``, 20 episodes per seed). Ratios are purehr / rejax.

What is the same and what is not (said in the JSON too):

- rejax evaluates 128 stochastic episodes every ``eval_freq`` steps inside its training
  scan; here its eval_callback is a no-op and eval_freq = total_timesteps, so both time
  training only.
- rejax keeps the learning rate constant: purehr runs with ``anneal_lr=False``.
- rejax has separate actor and critic optimisers; purehr one optimiser over both heads
  (separate networks, the same widths). rejax's ``max_grad_norm`` clips each gradient
  element (``optax.clip``), so purehr runs with ``elementwise_grad_clip=True``: with one
  optimiser a global-norm clip would let the critic's large Pendulum gradients (global norm
  150-600 against a bound of 10) shrink the actor's steps as well.
- Activation and observation normalisation are rejax's in both (Pendulum: ``swish`` and
  running mean/variance normalisation; CartPole: tanh, raw observations).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import load_averages, write_json  # noqa: E402

from purehr.envs.gymnax_adapter import GymnaxEnv  # noqa: E402
from purehr.envs.rollout import run_episodes  # noqa: E402
from purehr.ppo.config import PPOConfig  # noqa: E402
from purehr.ppo.trainer import keys_for_seeds, make_train  # noqa: E402

# rejax configs/gymnax/*.yaml, ppo section (commit 4954fbf of keraJLi/rejax)
REJAX_CONFIGS = {
    "CartPole-v1": dict(
        env="CartPole-v1",
        agent_kwargs={"activation": "tanh"},
        num_envs=5,
        num_steps=100,
        num_epochs=5,
        num_minibatches=5,
        learning_rate=0.00075,
        max_grad_norm=0.5,
        total_timesteps=100_000,
        gamma=0.99,
        gae_lambda=0.95,
        clip_eps=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
    ),
    "Pendulum-v1": dict(
        env="Pendulum-v1",
        agent_kwargs={"activation": "swish"},
        num_envs=100,
        num_steps=100,
        num_epochs=10,
        num_minibatches=10,
        learning_rate=0.001,
        max_grad_norm=10,
        total_timesteps=150_000,
        gamma=0.995,
        gae_lambda=0.95,
        clip_eps=0.2,
        ent_coef=0.0,
        vf_coef=0.5,
        normalize_observations=True,
    ),
}
EVAL_EPISODES = 20


def purehr_config(rejax: dict) -> PPOConfig:
    """The same numbers in purehr's terms (minibatch size instead of count), with rejax's
    activation, observation normalisation and element-wise gradient clip."""
    batch = rejax["num_envs"] * rejax["num_steps"]
    return PPOConfig(
        total_timesteps=rejax["total_timesteps"],
        num_envs=rejax["num_envs"],
        num_steps=rejax["num_steps"],
        num_epochs=rejax["num_epochs"],
        minibatch_size=batch // rejax["num_minibatches"],
        learning_rate=rejax["learning_rate"],
        anneal_lr=False,
        gamma=rejax["gamma"],
        gae_lambda=rejax["gae_lambda"],
        clip_range=rejax["clip_eps"],
        ent_coef=rejax["ent_coef"],
        vf_coef=rejax["vf_coef"],
        max_grad_norm=float(rejax["max_grad_norm"]),
        elementwise_grad_clip=True,
        actor_hidden=(64, 64),
        critic_hidden=(64, 64),
        activation=rejax["agent_kwargs"]["activation"],
        normalize_observations=rejax.get("normalize_observations", False),
    )


def program_bytes(compiled) -> int | None:
    analysis = compiled.memory_analysis()
    if analysis is None:
        return None
    return int(analysis.argument_size_in_bytes + analysis.output_size_in_bytes + analysis.temp_size_in_bytes)


def timed(compiled, argument) -> tuple[float, object]:
    started = time.perf_counter()
    result = jax.block_until_ready(compiled(argument))
    return time.perf_counter() - started, result


class RejaxRun:
    def __init__(self, name: str, seeds: int):
        from rejax import PPO

        self.algo = PPO.create(**REJAX_CONFIGS[name]).replace(
            eval_callback=lambda algo, ts, rng: jnp.zeros(()),
            skip_initial_evaluation=True,
            eval_freq=REJAX_CONFIGS[name]["total_timesteps"],
        )
        self.keys = jax.random.split(jax.random.PRNGKey(0), seeds)
        started = time.perf_counter()
        self.compiled = jax.jit(jax.vmap(lambda key: self.algo.train(key)[0])).lower(self.keys).compile()
        self.compile_s = time.perf_counter() - started
        iterations = -(-self.algo.total_timesteps // (self.algo.num_envs * self.algo.num_steps))
        self.env_steps = seeds * iterations * self.algo.num_envs * self.algo.num_steps

    def run(self):
        return timed(self.compiled, self.keys)

    def greedy_returns(self, train_state, env: GymnaxEnv) -> np.ndarray:
        algo = self.algo
        discrete = algo.discrete

        def returns(ts):
            def policy(observation, t, key):
                if getattr(algo, "normalize_observations", False):
                    observation = algo.normalize_obs(ts.obs_rms_state, observation)
                dist = algo.actor.apply(ts.actor_ts.params, observation[None], method="_action_dist")
                if discrete:
                    return jnp.argmax(dist.logits[0])
                space = algo.env.action_space(algo.env_params)
                return jnp.clip(dist.mean()[0], space.low, space.high)

            return run_episodes(env, env.default_params, policy, jax.random.PRNGKey(7), EVAL_EPISODES)["return"]

        return np.asarray(jax.jit(jax.vmap(returns))(train_state)).mean(axis=1)


class PurehrRun:
    def __init__(self, name: str, seeds: int, env: GymnaxEnv):
        self.config = purehr_config(REJAX_CONFIGS[name])
        self.train = make_train(self.config, env)
        self.keys = keys_for_seeds(range(seeds))
        started = time.perf_counter()
        self.compiled = self.train.jitted.lower(self.keys, None).compile()
        self.compile_s = time.perf_counter() - started
        self.env_steps = seeds * self.config.num_updates * self.config.batch_size

    def run(self):
        return timed(lambda keys: self.compiled(keys, None), self.keys)

    def greedy_returns(self, result, env: GymnaxEnv) -> np.ndarray:
        def returns(params):
            policy = self.train.ppo.policy(params)
            return run_episodes(env, env.default_params, policy, jax.random.PRNGKey(7), EVAL_EPISODES)["return"]

        return np.asarray(jax.jit(jax.vmap(returns))(result.runner.params)).mean(axis=1)


def compare(name: str, seeds: int, repeats: int) -> dict:
    env = GymnaxEnv(name)
    runs = {"rejax": RejaxRun(name, seeds), "purehr": PurehrRun(name, seeds, env)}
    seconds = {library: [] for library in runs}
    results = {}
    for _ in range(repeats):  # interleaved: both see the same load
        for library, run in runs.items():
            elapsed, results[library] = run.run()
            seconds[library].append(elapsed)
    record = {
        "env": name,
        "seeds": seeds,
        "rejax_config": REJAX_CONFIGS[name],
        "purehr_config": runs["purehr"].config.to_dict(),
    }
    for library, run in runs.items():
        returns = run.greedy_returns(results[library], env)
        best = min(seconds[library])
        record[library] = {
            "compile_s": round(run.compile_s, 2),
            "run_s": [round(s, 2) for s in seconds[library]],
            "env_steps": run.env_steps,
            "steps_per_s": round(run.env_steps / best),
            "program_memory_mb": round((program_bytes(run.compiled) or 0) / 2**20, 2),
            "greedy_return_per_seed": [round(float(r), 1) for r in returns],
            "greedy_return_mean": round(float(returns.mean()), 1),
        }
    record["ratio_purehr_over_rejax"] = {
        "steps_per_s": round(record["purehr"]["steps_per_s"] / record["rejax"]["steps_per_s"], 3),
        "compile_s": round(record["purehr"]["compile_s"] / record["rejax"]["compile_s"], 3),
    }
    record["purehr_at_least_as_fast"] = record["ratio_purehr_over_rejax"]["steps_per_s"] >= 1.0
    record["purehr_returns_no_worse"] = bool(
        record["purehr"]["greedy_return_mean"] >= record["rejax"]["greedy_return_mean"] - 1e-6
    )
    return record


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, output_file, positive_int

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--envs",
        nargs="+",
        default=list(REJAX_CONFIGS),
        choices=list(REJAX_CONFIGS),
        help="gymnax environments, each with rejax's published PPO settings",
    )
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds vmapped in each library's one call")
    parser.add_argument("--repeats", type=positive_int, default=2, help="timed runs per library (best counts)")
    parser.add_argument("--json", type=output_file, default=None, help="also write the records to this file")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        import rejax
    except ImportError:
        parser.exit(2, "error: this benchmark needs rejax: pip install -c constraints.txt '.[bench]'\n")
    load_before = os.getloadavg()
    records = []
    for name in args.envs:
        records.append(compare(name, args.seeds, args.repeats))
        summary = {
            k: records[-1][k]
            for k in ("env", "ratio_purehr_over_rejax", "purehr_at_least_as_fast", "purehr_returns_no_worse")
        }
        summary.update(
            {
                lib: {
                    k: records[-1][lib][k]
                    for k in ("steps_per_s", "compile_s", "greedy_return_mean", "program_memory_mb")
                }
                for lib in ("rejax", "purehr")
            }
        )
        print(json.dumps(summary), flush=True)
    out = {
        "command": " ".join(["python benchmarks/rejax_peer.py"] + (sys.argv[1:] if argv is None else list(argv))),
        "records": records,
        "jax": jax.__version__,
        "rejax": getattr(rejax, "__version__", "0.1.3"),
        "devices": [str(d) for d in jax.devices()],
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        **load_averages(load_before),
        "peak_host_memory_mb_whole_process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
