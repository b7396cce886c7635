"""The minibatch shuffle: purehr's ``random_permutation`` against ``jax.random.permutation``.

    PJRT_NPROC=1 python benchmarks/shuffle.py --json benchmarks/results/shuffle.json

One permutation per seed, vmapped over ``--seeds`` seeds as in training, for the batch sizes
of rejax's CartPole (500) and Pendulum (10,000) settings and of purehr's hrv (2,048) and swing
(4,096) defaults. Reported: the best and median of ``--repeats`` calls of each jitted program,
in milliseconds, and the ratio. Both programs are checked to return permutations first.
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

from purehr.engine.shuffle import random_permutation, shuffle_rounds

BATCH_SIZES = (500, 2048, 4096, 10_000)


def time_program(program, keys, repeats: int) -> list[float]:
    jax.block_until_ready(program(keys))
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(program(keys))
        seconds.append(time.perf_counter() - started)
    return seconds


def measure(n: int, seeds: int, repeats: int) -> dict:
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    programs = {
        "jax_random_permutation": jax.jit(jax.vmap(lambda key: jax.random.permutation(key, n))),
        "purehr_random_permutation": jax.jit(jax.vmap(lambda key: random_permutation(key, n))),
    }
    record = {"batch_size": n, "seeds": seeds, "purehr_rounds": shuffle_rounds(n)[1]}
    for name, program in programs.items():
        for permutation in np.asarray(program(keys)):
            if not np.array_equal(np.sort(permutation), np.arange(n)):
                raise AssertionError(f"{name} returned something other than a permutation of {n}")
        seconds = time_program(program, keys, repeats)
        record[name] = {"best_ms": round(min(seconds) * 1e3, 3), "median_ms": round(float(np.median(seconds)) * 1e3, 3)}
    record["speedup_best"] = round(
        record["jax_random_permutation"]["best_ms"] / record["purehr_random_permutation"]["best_ms"], 2
    )
    return record


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, output_file, positive_int

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=list(BATCH_SIZES), help="batch sizes")
    parser.add_argument("--seeds", type=positive_int, default=5, help="permutations vmapped in one call")
    parser.add_argument("--repeats", type=positive_int, default=30, help="timed calls per program")
    parser.add_argument("--json", type=output_file, default=None, help="also write the records to this file")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    records = []
    for n in args.sizes:
        records.append(measure(n, args.seeds, args.repeats))
        print(records[-1], flush=True)
    write_json(
        args.json,
        {
            "command": " ".join(["python benchmarks/shuffle.py"] + (sys.argv[1:] if argv is None else list(argv))),
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
