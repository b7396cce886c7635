"""The one-scan trainer against a conventional host-loop PPO on the same swing task and config.

    python benchmarks/host_loop_ppo.py --steps 65536 --seeds 5 --json benchmarks/results/host_loop.json

The host loop is PPO as most JAX/PyTorch code writes it: per update, one jitted rollout call
(a ``lax.scan`` over the 256 steps of 8 environments), the trajectory copied to NumPy, GAE
as a NumPy loop over time, advantages normalised in NumPy, then 4 epochs x 8 minibatches of a
jitted ``value_and_grad`` + Adam step, each called from Python with a NumPy minibatch; seeds
one after another (a conventional script trains one seed per run). Same network, same loss
(``purehr.algorithms.ppo.loss.ppo_loss``), same optimiser, same truncation handling; only where the loop
lives differs. The one-scan trainer is ``purehr.ppo.make_train`` with all seeds in one call.

Reported: the one-scan trainer's compilation and run time apart; the host loop's wall time
for all seeds (its first seed compiles the two jitted functions on first call), and one seed
again, warm, times the seed count (its run time without compilation). ``speedup_run`` is warm
host loop over one-scan run; ``speedup_wall`` compares the two with compilation included.
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
import optax
from _common import load_averages, write_json

from purehr.algorithms.ppo.algorithm import make_ppo
from purehr.algorithms.ppo.loss import Batch, ppo_loss
from purehr.algorithms.trainer import make_train
from purehr.cli.arguments import HelpFormatter, output_file, positive_int, task_name
from purehr.engine.distributions import make_distribution
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.spaces import flatten_observation
from purehr.envs.wrappers import training_wrappers
from purehr.tasks import get_task


def numpy_gae(rewards, values, next_values, terminated, done, gamma, gae_lambda):
    """The same recursion as purehr.engine.gae, as a NumPy loop over time."""
    advantages = np.zeros_like(rewards)
    next_advantage = np.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] * (1.0 - terminated[t]) - values[t]
        next_advantage = delta + gamma * gae_lambda * (1.0 - done[t]) * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values


def make_host_loop(config, env):
    ppo = make_ppo(config, env)
    network, env_params = ppo.network, ppo.env_params
    train_env = training_wrappers(env)
    action_space = env.action_space(env_params)
    flatten = jax.vmap(flatten_observation)
    hparams = config.hyperparams()
    num_updates = config.num_updates

    def distribution(actor_output, log_std):
        return make_distribution(action_space, actor_output, log_std)

    def learning_rate(count):
        update = count // (config.num_minibatches * config.num_epochs)
        return config.learning_rate * (1.0 - update / num_updates)

    optimizer = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate if config.anneal_lr else config.learning_rate, eps=1e-5),
    )

    @jax.jit
    def rollout(params, env_state, observation, key, update_index):
        step_params = ppo.env_params_at(update_index, hparams)

        def env_step(carry, _):
            env_state, observation, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            flat = flatten(observation)
            actor_output, log_std, value = network.apply(params, flat)
            policy = distribution(actor_output, log_std)
            action = policy.sample(action_key)
            observation, env_state, reward, terminated, truncated, info = jax.vmap(
                train_env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(step_key, config.num_envs), env_state, policy.to_env_action(action), step_params)
            return (env_state, observation, key), {
                "observation": flat,
                "action": action,
                "log_prob": policy.log_prob(action),
                "value": value,
                "reward": reward.astype(jnp.float32),
                "terminated": terminated,
                "done": jnp.logical_or(terminated, truncated),
                "final_observation": flatten(info["final_observation"]),
            }

        (env_state, observation, key), trajectory = jax.lax.scan(
            env_step, (env_state, observation, key), None, config.num_steps
        )
        next_values = network.apply(params, trajectory.pop("final_observation"), method=type(network).value)
        return env_state, observation, key, trajectory, next_values

    @jax.jit
    def minibatch_update(params, opt_state, minibatch):
        (_, stats), grads = jax.value_and_grad(ppo_loss, has_aux=True)(
            params, network.apply, distribution, minibatch, hparams
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, stats["loss"]

    def train_one_seed(key):
        runner = jax.jit(ppo.init)(key)  # same init as the one-scan trainer
        params, env_state, observation, key = runner.params, runner.env_state, runner.observation, runner.key
        opt_state = optimizer.init(params)
        rng = np.random.default_rng(int(jax.random.randint(key, (), 0, 2**31 - 1)))
        for update_index in range(num_updates):
            env_state, observation, key, trajectory, next_values = rollout(
                params, env_state, observation, key, update_index
            )
            trajectory = jax.device_get(trajectory)
            next_values = np.asarray(next_values)
            advantages, targets = numpy_gae(
                trajectory["reward"],
                trajectory["value"],
                next_values,
                trajectory["terminated"].astype(np.float32),
                trajectory["done"].astype(np.float32),
                np.float32(config.gamma),
                np.float32(config.gae_lambda),
            )
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            batch = Batch(trajectory["observation"], trajectory["action"], trajectory["log_prob"], advantages, targets)
            batch = Batch(*(value.reshape((config.batch_size,) + value.shape[2:]) for value in batch))
            for _ in range(config.num_epochs):
                permutation = rng.permutation(config.batch_size)
                for start in range(0, config.batch_size, config.minibatch_size):
                    index = permutation[start : start + config.minibatch_size]
                    params, opt_state, loss = minibatch_update(
                        params, opt_state, Batch(*(value[index] for value in batch))
                    )
        jax.block_until_ready(params)
        return params

    return train_one_seed, rollout, minibatch_update


def heldout_return(task, env, config, params_per_seed) -> list[float]:
    ppo = make_ppo(config, env)
    setup_eval = jax.jit(lambda p: task.heldout_evaluation(env, env.default_params, ppo.policy(p), num_episodes=20))
    return [float(setup_eval(p)["return_mean"]) for p in params_per_seed]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--steps", type=positive_int, default=65536, help="environment steps per seed")
    parser.add_argument("--seeds", type=positive_int, default=5, help="number of seeds (0 .. N-1)")
    parser.add_argument(
        "--task",
        default="swing",
        type=task_name,
        help="task to train: swing, hrv, <suite>:<environment> (gymnax:CartPole-v1) or module:factory",
    )
    parser.add_argument("--json", type=output_file, default=None, help="write the results here")
    parser.add_argument("--evaluate", action="store_true", help="also held-out return (20 episodes) per seed")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)

    task = get_task(args.task)
    env = task.make_env()
    config = task.default_config.replace(total_timesteps=args.steps)
    keys = keys_for_seeds(range(args.seeds))
    load_before = os.getloadavg()

    # --- one scan: all seeds, one call ---
    train = make_train(config, env)
    started = time.perf_counter()
    compiled = train.jitted.lower(keys, None).compile()
    scan_compile = time.perf_counter() - started
    started = time.perf_counter()
    result = jax.block_until_ready(compiled(keys, None))
    scan_run = time.perf_counter() - started

    # --- host loop: seeds one after another; the first seed's first update compiles ---
    train_one_seed, _, _ = make_host_loop(config, env)
    started = time.perf_counter()
    host_params = [train_one_seed(keys[i]) for i in range(args.seeds)]
    host_wall = time.perf_counter() - started
    started = time.perf_counter()
    train_one_seed(keys[0])
    host_run_one_seed = time.perf_counter() - started

    env_steps = args.seeds * config.num_updates * config.batch_size
    out = {
        "command": " ".join(["host_loop_ppo.py"] + (sys.argv[1:] if argv is None else list(argv))),
        "task": args.task,
        "seeds": args.seeds,
        "env_steps_per_seed": config.num_updates * config.batch_size,
        "config": {
            k: v
            for k, v in config.to_dict().items()
            if k in ("num_envs", "num_steps", "num_epochs", "minibatch_size", "actor_hidden", "critic_hidden")
        },
        "one_scan": {
            "compile_s": round(scan_compile, 2),
            "run_s": round(scan_run, 2),
            "steps_per_s": round(env_steps / scan_run),
        },
        "host_loop": {
            "wall_s_all_seeds_incl_compile": round(host_wall, 2),
            "run_s_one_seed_warm": round(host_run_one_seed, 2),
            "run_s_all_seeds_warm": round(host_run_one_seed * args.seeds, 2),
            "steps_per_s_warm": round(env_steps / (host_run_one_seed * args.seeds)),
        },
        **load_averages(load_before),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
    }
    out["speedup_run"] = round(out["host_loop"]["run_s_all_seeds_warm"] / scan_run, 2)
    out["speedup_wall"] = round(host_wall / (scan_compile + scan_run), 2)
    if args.evaluate:
        out["heldout_return_one_scan"] = heldout_return(
            task, env, config, [jax.tree.map(lambda x: x[i], result.runner.params) for i in range(args.seeds)]
        )
        out["heldout_return_host_loop"] = heldout_return(task, env, config, host_params)
    print(json.dumps(out, indent=1))
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
