"""Brax's own SAC (``brax.training.agents.sac.train``) beside purehr's SAC on Brax's
inverted_pendulum (``peers.py --configs brax-sac:inverted_pendulum``), measured the way
``brax_peer.py`` measures Brax's PPO (its docstring: one seed per library per repeat, the order
alternating, then purehr all those seeds vmapped in one call; Brax's steps/s the median of its
own ``training/sps`` over the epochs after the two that compile; the same held-out evaluator).

Brax publishes no SAC settings for inverted_pendulum (its ``notebooks/training.ipynb``
``train_fn`` table trains it with PPO); its SAC settings there are for hopper and walker2d.
``BRAX_SAC_SETTINGS`` are hopper's (the first), on inverted_pendulum, at a cut budget
(``STEPS``: the 8,192-step prefill and 64 actor steps of 128 environments, 4 epochs of 16;
published 6,553,600) and a replay buffer the size of that budget (Brax's own default when
``max_replay_size`` is None; published 1,048,576, which this budget never fills, so nothing
it stores changes). ``SAC_FIELDS`` maps each key to the ``SACConfig`` field it sets.

What is not the same (``DIFFERENCES``, said in the record too):
"""

from __future__ import annotations

import json
import time

import jax
import numpy as np
from brax_peer import WARMUP_EPOCHS, judged, provide_device_put_replicated

from purehr.algorithms.sac.config import SACConfig
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.brax_adapter import BraxEnv

ENVIRONMENT = "inverted_pendulum"
CHUNKS = 4
"""Brax's compiled training epochs (its num_evals - 1): the first two compile."""
ACTOR_STEPS_PER_CHUNK = 16
BRAX_SAC_SETTINGS = dict(
    num_evals=CHUNKS + 1,
    reward_scaling=30,
    episode_length=1000,
    normalize_observations=True,
    action_repeat=1,
    discounting=0.997,
    learning_rate=6e-4,
    num_envs=128,
    batch_size=512,
    grad_updates_per_step=64,
    max_devices_per_host=1,
    max_replay_size=1048576,
    min_replay_size=8192,
)
"""Brax's notebooks/training.ipynb ``train_fn`` for hopper (sac.train; its ``num_timesteps``
and ``seed`` are the benchmark's), the budget cut below."""
STEPS = BRAX_SAC_SETTINGS["min_replay_size"] + CHUNKS * ACTOR_STEPS_PER_CHUNK * BRAX_SAC_SETTINGS["num_envs"]
BRAX_SAC_DEFAULTS = dict(tau=0.005, alpha_learning_rate=3e-4, target_entropy_per_action=-0.5, initial_log_alpha=0.0)
"""What ``sac.train`` fixes in its code (brax 0.14.2): tau's default, the alpha optimiser's
Adam(3e-4), ``losses.make_losses``' target entropy -0.5 x action size, log alpha 0 at the start;
``make_sac_networks``: 256 x 256 ReLU networks."""
SAC_FIELDS = {
    "num_timesteps": "total_timesteps (STEPS, cut)",
    "num_envs": "num_envs; num_steps=1 (one step per environment and actor step)",
    "grad_updates_per_step": "gradient_steps",
    "batch_size": "sample_size",
    "min_replay_size": "learning_starts (its prefill: no gradient step before it in both)",
    "max_replay_size": "buffer_size = the budget (never filled, as 1,048,576 is not)",
    "learning_rate": "actor_learning_rate, critic_learning_rate",
    "discounting": "gamma",
    "episode_length": "BraxEnv(episode_length=1000)",
    "action_repeat": "(1: none)",
    "num_evals": "(CHUNKS + 1: its compiled epochs; its evaluations are not timed)",
    "max_devices_per_host": "(1: one device, as purehr's one program)",
    "reward_scaling": "(no SACConfig counterpart: purehr trains on the rewards as they are)",
    "normalize_observations": "(no SACConfig counterpart: purehr's SAC has no normaliser)",
    "(tau default)": "tau 0.005",
    "(alpha optimiser)": "temperature_learning_rate 3e-4",
    "(target entropy)": "target_entropy_per_dimension -0.5",
    "(log alpha 0)": "initial_temperature 1.0",
    "(make_sac_networks)": "actor_hidden = critic_hidden = (256, 256), activation relu",
}
DIFFERENCES = (
    "Brax scales rewards by 30 and normalises observations by running statistics (SACConfig has "
    "neither); its critic loss drops truncated transitions (purehr bootstraps them from their final "
    "observation) and averages over the twins (purehr sums them: twice the gradient, Adam-invariant); its "
    "std is softplus + 0.001 (purehr: log std tanh-squashed into [-5, 2]); LeCun-uniform init (purehr: "
    "scaled normals); the actor steps after the critics in both, but Brax's temperature steps first, on "
    "the pre-update policy; its prefill acts with the initial policy (purehr: uniform random actions); "
    "its auto-reset returns each environment to its first initial state (purehr draws a fresh one). "
    "purehr computes and discards the gradient steps of its warm-up updates (under the seed vmap a cond "
    "on the batched update counter runs both branches), so of its 128 updates the first 64 cost as much "
    "as training ones; Brax's prefill takes no gradient step."
)
__doc__ += "\n" + DIFFERENCES + "\n"


def brax_sac_as_purehr(settings: dict, total_timesteps: int) -> SACConfig:
    """Brax's SAC numbers in ``SACConfig`` terms (``SAC_FIELDS``), on ``total_timesteps``."""
    unknown = set(settings) - set(SAC_FIELDS)
    if unknown:
        raise ValueError(f"Brax sac settings {sorted(unknown)}: not mapped; expected only {sorted(SAC_FIELDS)}")
    if settings["action_repeat"] != 1:
        raise ValueError(f"Brax sac action_repeat={settings['action_repeat']}: expected 1 (purehr repeats none)")
    return SACConfig(
        total_timesteps=total_timesteps,
        num_envs=settings["num_envs"],
        num_steps=1,
        gradient_steps=settings["grad_updates_per_step"],
        sample_size=settings["batch_size"],
        buffer_size=total_timesteps,
        learning_starts=settings["min_replay_size"],
        actor_learning_rate=settings["learning_rate"],
        critic_learning_rate=settings["learning_rate"],
        temperature_learning_rate=BRAX_SAC_DEFAULTS["alpha_learning_rate"],
        gamma=settings["discounting"],
        tau=BRAX_SAC_DEFAULTS["tau"],
        initial_temperature=float(np.exp(BRAX_SAC_DEFAULTS["initial_log_alpha"])),
        target_entropy_per_dimension=BRAX_SAC_DEFAULTS["target_entropy_per_action"],
        actor_hidden=(256, 256),
        critic_hidden=(256, 256),
        activation="relu",
    )


class BraxSACRun:
    """One seed per call of Brax's ``sac.train`` (a Python loop of pmapped epochs, compiled at
    every call)."""

    def __init__(self, env: BraxEnv, total_timesteps: int):
        from brax.training.agents.sac import train as brax_sac

        provide_device_put_replicated()
        self.env, self.total_timesteps, self.train = env, total_timesteps, brax_sac.train

    def run(self, seed: int) -> dict:
        epochs: list[dict] = []
        started = time.perf_counter()
        make_policy, params, _ = self.train(
            environment=self.env.brax_env,
            num_timesteps=self.total_timesteps,
            seed=seed,
            num_eval_envs=1,  # its per-epoch evaluation (untimed by it) kept small
            progress_fn=lambda step, metrics: (
                "training/sps" in metrics  # not its initial evaluation
                and epochs.append(
                    {"step": int(step), "sps": float(metrics["training/sps"]), "walltime": metrics["training/walltime"]}
                )
            ),
            **{**BRAX_SAC_SETTINGS, "max_replay_size": self.total_timesteps},
        )
        call_s = time.perf_counter() - started
        steady_sps = float(np.median([epoch["sps"] for epoch in epochs[WARMUP_EPOCHS:]]))
        warmup_s = float(epochs[WARMUP_EPOCHS - 1]["walltime"])
        trained = epochs[WARMUP_EPOCHS - 1]["step"] - BRAX_SAC_SETTINGS["min_replay_size"]
        inference = make_policy(params, deterministic=True)

        def policy(observation, t, key):
            return inference(observation[None], key)[0][0]

        return {
            "steps_per_s": steady_sps,
            "compile_s": warmup_s - trained / steady_sps,  # compilation, its prefill included
            "train_s": float(epochs[-1]["walltime"]) - warmup_s,
            "call_s": call_s,
            "env_steps": epochs[-1]["step"],
            "heldout_return": judged(self.env, policy),
        }


class PurehrSACRun:
    def __init__(self, env: BraxEnv, config: SACConfig, seeds: int = 1):
        self.env, self.config = env, config
        self.train = make_train(config, env)
        started = time.perf_counter()
        self.compiled = self.train.jitted.lower(keys_for_seeds(range(seeds)), None).compile()
        self.compile_s = time.perf_counter() - started

    def run(self, *seeds: int) -> dict:
        started = time.perf_counter()
        result = jax.block_until_ready(self.compiled(keys_for_seeds(seeds), None))
        train_s = time.perf_counter() - started
        env_steps = len(seeds) * self.config.num_updates * self.config.batch_size
        returns = [
            judged(self.env, self.train.algorithm.policy(jax.tree.map(lambda x: x[i], result.runner.actor_params)))
            for i in range(len(seeds))
        ]
        return {
            "steps_per_s": env_steps / train_s,
            "compile_s": self.compile_s,
            "train_s": train_s,
            "env_steps": env_steps,
            "heldout_return": float(np.mean(returns)),
            "heldout_return_per_seed": returns,
        }


def compare(repeats: int, total_timesteps: int = STEPS) -> dict:
    """Brax and purehr one seed each per repeat (order alternating), then purehr all the seeds
    in one vmapped call; ratios purehr / Brax of the medians."""
    env = BraxEnv(ENVIRONMENT, episode_length=BRAX_SAC_SETTINGS["episode_length"])
    config = brax_sac_as_purehr(BRAX_SAC_SETTINGS, total_timesteps)
    libraries = {"brax": BraxSACRun(env, total_timesteps), "purehr": PurehrSACRun(env, config)}
    runs: dict[str, list[dict]] = {name: [] for name in libraries}
    for seed in range(repeats):
        for name in list(libraries) if seed % 2 == 0 else list(reversed(libraries)):
            runs[name].append(dict(libraries[name].run(seed), seed=seed))
            row = {k: round(v, 2) if isinstance(v, float) else v for k, v in runs[name][-1].items()}
            print(json.dumps({"library": name, **row}, default=str), flush=True)
    one_call = PurehrSACRun(env, config, seeds=repeats)
    all_seeds = dict(one_call.run(*range(repeats)), seeds=repeats)
    print(json.dumps({"library": "purehr, all seeds in one call", **all_seeds}, default=str), flush=True)
    summary = {
        name: {
            "steps_per_s_median": round(float(np.median([r["steps_per_s"] for r in rows]))),
            "compile_s_median": round(float(np.median([r["compile_s"] for r in rows])), 1),
            "heldout_return_per_seed": [round(r["heldout_return"], 1) for r in rows],
            "heldout_return_mean": round(float(np.mean([r["heldout_return"] for r in rows])), 1),
        }
        for name, rows in runs.items()
    }
    ours, theirs = summary["purehr"], summary["brax"]
    ratio = round(ours["steps_per_s_median"] / theirs["steps_per_s_median"], 3)
    compile_ratio = round(ours["compile_s_median"] / theirs["compile_s_median"], 3)
    return {
        "config": f"brax-sac:{ENVIRONMENT}",
        "total_timesteps": total_timesteps,
        "brax_settings": BRAX_SAC_SETTINGS,
        "purehr_config": config.to_dict(),
        "not_the_same": DIFFERENCES,
        "runs": runs,
        "summary": summary,
        "purehr_all_seeds_one_call": all_seeds,
        "end_to_end_all_seeds": {
            "brax_train_calls_s": round(sum(r["call_s"] for r in runs["brax"]), 1),
            "purehr_one_call_s": round(one_call.compile_s + all_seeds["train_s"], 1),
        },
        "ratio_purehr_over_peer": {"steps_per_s": ratio, "compile_s": compile_ratio},
        "purehr_1.2x_as_fast": ratio >= 1.2,
        "purehr_first_call_no_slower": compile_ratio <= 1.0,
        "purehr_returns_no_worse": ours["heldout_return_mean"] >= theirs["heldout_return_mean"] - 1e-6,
    }
