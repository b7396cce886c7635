"""What a memory costs: the GRU policy's training throughput against the MLP's at the same batch.

    PJRT_NPROC=1 python benchmarks/recurrent_speed.py --json benchmarks/results/recurrent_speed.json

For each task (default: the partially observed variants, where the GRU is meant to be used) and
each policy setting, one jitted ``vmap(update)`` over ``--seeds`` seeds is compiled, then the
settings are timed in turns (``--repeats`` rounds, each setting once per round) so the
machine's load falls on all of them alike; the rollout alone is timed the same way. Reported
per setting: environment steps per second of whole updates (rollout, GAE, epochs), of the
rollout alone, the ratio to the MLP, and the compile time of the update.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import jax
import numpy as np
from _common import load_averages, write_json

from purehr.algorithms.ppo.algorithm import make_ppo
from purehr.engine.seeds import keys_for_seeds
from purehr.tasks import get_task

SETTINGS = {
    "mlp": {},
    "gru 64, same minibatch": {"policy": "gru", "recurrent_width": 64},
    "gru 64, minibatch 1024": {"policy": "gru", "recurrent_width": 64, "minibatch_size": 1024},
    "gru 128, same minibatch": {"policy": "gru", "recurrent_width": 128},
}
"""The MLP at the task's defaults, and the GRU at the same batch: the task's minibatch (swing's
256 = 16 minibatches of 2 environments' sequences) and 1,024 (the memory comparison's swing
setting, 4 minibatches), at width 64 (the comparison's) and 128 (the default)."""


def programs(task_name: str, changes: dict, seeds: int):
    task = get_task(task_name)
    config = task.default_config.replace(**changes)
    ppo = make_ppo(config, task.make_env())
    runner = jax.jit(jax.vmap(ppo.init))(keys_for_seeds(range(seeds)))
    started = time.perf_counter()
    update = jax.jit(jax.vmap(ppo.update)).lower(runner).compile()
    compile_s = time.perf_counter() - started
    rollout = jax.jit(jax.vmap(ppo.rollout)).lower(runner).compile()
    jax.block_until_ready(update(runner))
    jax.block_until_ready(rollout(runner))
    return config, runner, update, rollout, compile_s


def timed(program, runner) -> float:
    started = time.perf_counter()
    jax.block_until_ready(program(runner))
    return time.perf_counter() - started


def measure(task_name: str, seeds: int, repeats: int) -> list[dict]:
    built = {name: programs(task_name, changes, seeds) for name, changes in SETTINGS.items()}
    update_s = {name: [] for name in SETTINGS}
    rollout_s = {name: [] for name in SETTINGS}
    for _ in range(repeats):  # in turns: the load falls on every setting alike
        for name, (_, runner, update, rollout, _) in built.items():
            update_s[name].append(timed(update, runner))
            rollout_s[name].append(timed(rollout, runner))
    records = []
    for name, (config, _, _, _, compile_s) in built.items():
        steps = seeds * config.batch_size
        records.append(
            {
                "task": task_name,
                "setting": name,
                "changes": SETTINGS[name],
                "batch": f"{config.num_envs} envs x {config.num_steps} steps, minibatch {config.minibatch_size}",
                "update_steps_per_s": round(steps / float(np.median(update_s[name]))),
                "rollout_steps_per_s": round(steps / float(np.median(rollout_s[name]))),
                "update_compile_s": round(compile_s, 1),
            }
        )
    mlp = records[0]
    for record in records:
        record["update_ratio_to_mlp"] = round(record["update_steps_per_s"] / mlp["update_steps_per_s"], 3)
        record["rollout_ratio_to_mlp"] = round(record["rollout_steps_per_s"] / mlp["rollout_steps_per_s"], 3)
    return records


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, output_file, positive_int

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--tasks", nargs="+", default=["swing-angles", "hrv-hidden-audience"], help="tasks (any registered name)"
    )
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds vmapped in one update")
    parser.add_argument("--repeats", type=positive_int, default=5, help="timed rounds (each setting once per round)")
    parser.add_argument("--json", type=output_file, default=None, help="also write the records to this file")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    for name in args.tasks:
        get_task(name)  # an unknown task is refused before anything compiles
    load_before = os.getloadavg()
    records = []
    for name in args.tasks:
        for record in measure(name, args.seeds, args.repeats):
            records.append(record)
            print(record, flush=True)
    write_json(
        args.json,
        {
            "command": " ".join(
                ["python benchmarks/recurrent_speed.py"] + (sys.argv[1:] if argv is None else list(argv))
            ),
            "records": records,
            "jax": jax.__version__,
            "devices": [str(d) for d in jax.devices()],
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            **load_averages(load_before),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
