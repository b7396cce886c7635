"""Swing simulation throughput, the structured controller's held-out metrics, and its tuning.

    python benchmarks/swing_simulation.py            # throughput + held-out evaluation
    python benchmarks/swing_simulation.py --tune     # grid search of the controller constants

Throughput: ``num_envs`` auto-resetting swings stepped with uniform random actions inside
one jitted ``lax.scan`` (vmap over environments inside the scan body); compilation is
timed apart (``lower().compile()``), the run is the best of ``--repeats``.
Results are recorded in benchmarks/README.md under "Swing simulation".
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from purehr.cli.arguments import HelpFormatter, positive_int
from purehr.envs.swing import ControllerParams, SwingEnv, heldout_evaluation, make_structured_policy
from purehr.envs.swing.controller import DEFAULT_CONTROLLER
from purehr.envs.wrappers import AutoResetWrapper


def timed(compiled, *args, repeats: int = 2) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        best = min(best, time.perf_counter() - start)
    return best


def throughput(num_envs: int, num_steps: int, x64: bool, repeats: int) -> dict:
    """Environment steps per second of random-action simulation, compile time apart."""
    with jax.enable_x64(x64):
        env = AutoResetWrapper(SwingEnv())
        params = env.default_params

        def run(key):
            reset_keys = jax.random.split(key, num_envs)
            _, states = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, params)

            def body(carry, t):
                states, key = carry
                key, action_key = jax.random.split(key)
                actions = jax.random.uniform(action_key, (num_envs, 2), minval=-1.0, maxval=1.0)
                _, states, reward, *_ = jax.vmap(env.step, in_axes=(None, 0, 0, None))(key, states, actions, params)
                return (states, key), jnp.mean(reward)

            (states, _), rewards = jax.lax.scan(body, (states, key), jnp.arange(num_steps))
            return states.plant.theta, rewards

        key = jax.random.PRNGKey(0)
        start = time.perf_counter()
        compiled = jax.jit(run).lower(key).compile()
        compile_s = time.perf_counter() - start
        run_s = timed(compiled, key, repeats=repeats)
        dtype = str(compiled(key)[0].dtype)
    return {
        "num_envs": num_envs,
        "num_steps": num_steps,
        "dtype": dtype,
        "compile_s": round(compile_s, 2),
        "run_s": round(run_s, 3),
        "steps_per_s": round(num_envs * num_steps / run_s),
    }


def heldout(repeats: int) -> dict:
    """Held-out metrics of the structured controller and the cost of one evaluation."""
    env = SwingEnv()
    params = env.default_params
    evaluate = jax.jit(lambda: heldout_evaluation(env, params, make_structured_policy(params)))
    start = time.perf_counter()
    compiled = evaluate.lower().compile()
    compile_s = time.perf_counter() - start
    run_s = timed(compiled, repeats=repeats)
    metrics = {k: round(float(v), 4) for k, v in jax.device_get(compiled()).items()}
    return {
        "compile_s": round(compile_s, 2),
        "run_s": round(run_s, 3),
        "steps": 100 * params.horizon,
        "metrics": metrics,
    }


TUNE_GRID = {
    "squat_offset": (-0.9, -0.75, -0.6, -0.45, -0.3, 0.0),
    "lean_gain": (0.0, 0.5, 1.0),
    "lean_offset": (-2.4, -2.0, -1.57, -1.2, 0.0, 1.57, 3.14),
    "startup_amplitude": (0.02, 0.05),
}


def tune(chunk: int = 12) -> list[dict]:
    """Held-out successes and time to rotation over TUNE_GRID (gain-0 lean: offset moot)."""
    env = SwingEnv()
    params = env.default_params
    evaluate = jax.jit(
        jax.vmap(lambda controller: heldout_evaluation(env, params, make_structured_policy(params, controller)))
    )
    combos = [c for c in itertools.product(*TUNE_GRID.values()) if c[1] > 0 or c[2] == TUNE_GRID["lean_offset"][0]]
    results = []
    for first in range(0, len(combos), chunk):
        batch = combos[first : first + chunk]
        padded = batch + [batch[-1]] * (chunk - len(batch))
        columns = np.asarray(padded, np.float32).T
        controller = ControllerParams(
            squat_gain=jnp.ones(chunk),
            ramp_time=jnp.full(chunk, DEFAULT_CONTROLLER.ramp_time),
            **{name: jnp.asarray(col) for name, col in zip(TUNE_GRID, columns)},
        )
        metrics = jax.device_get(evaluate(controller))
        for i, combo in enumerate(batch):
            results.append(
                dict(
                    zip(TUNE_GRID, combo),
                    successes=int(round(float(metrics["success_rate"][i]) * 100)),
                    time_to_rotation=round(float(metrics["time_to_rotation"][i]), 2),
                    effort=round(float(metrics["effort"][i]), 1),
                )
            )
    results.sort(key=lambda r: (-r["successes"], r["time_to_rotation"]))
    return results


def machine() -> dict:
    return {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--tune", action="store_true", help="grid-search the controller")
    parser.add_argument("--repeats", type=positive_int, default=2, help="timed runs per program (best kept)")
    parser.add_argument("--small-steps", type=positive_int, default=4096, help="scan length, 8 envs")
    parser.add_argument("--large-steps", type=positive_int, default=128, help="scan length, 2048 envs")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    print(json.dumps({"machine": machine()}))
    if args.tune:
        for row in tune():
            print(json.dumps(row))
        return
    for x64 in (False, True):
        for num_envs, num_steps in ((8, args.small_steps), (2048, args.large_steps)):
            print(json.dumps({"throughput": throughput(num_envs, num_steps, x64, args.repeats)}), flush=True)
    print(json.dumps({"heldout_structured": heldout(args.repeats)}), flush=True)


if __name__ == "__main__":
    main()
