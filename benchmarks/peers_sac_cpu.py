"""rejax's SAC and purehr's on rejax's Pendulum config, timed in CPU seconds as well as wall
seconds: on a machine shared with other jobs the wall time of a run moves with their load (the
peers.py pairs of one run differed 2x), while the CPU time the process spends is the work its
program does, nearly whatever the load. Same programs as ``peers.py --configs
rejax-sac:Pendulum-v1`` (5 seeds vmapped, rejax's evaluation off), at a budget of ``--steps``
per seed (default the published 10,000), interleaved, ``--repeats`` times. PJRT_NPROC=1.

    nice python benchmarks/peers_sac_cpu.py --steps 10000 --repeats 3 --json /tmp/sac_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("PJRT_NPROC", "1")
sys.path.insert(0, os.path.dirname(__file__))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _common import write_json  # noqa: E402
from _rejax_offpolicy_peer import SAC_CONFIGS, rejax_sac_as_purehr  # noqa: E402

from purehr.algorithms.trainer import make_train  # noqa: E402
from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402
from purehr.engine.seeds import keys_for_seeds  # noqa: E402
from purehr.envs.gymnax_adapter import GymnaxEnv  # noqa: E402


def compiled_program(library: str, steps: int, seeds: int):
    """(call, compiled program, compile wall s) of ``library``'s SAC ("rejax-sac" or "purehr") on
    rejax's Pendulum config at ``steps`` per seed, ``seeds`` vmapped (rejax's evaluation off).
    The time is rejax's ``lower().compile()``, and purehr's ``make_train`` with it."""
    settings = {**SAC_CONFIGS["Pendulum-v1"], "total_timesteps": steps, "eval_freq": steps}
    if library == "rejax-sac":
        import rejax

        algo = rejax.SAC.create(**settings).replace(
            eval_callback=lambda a, ts, rng: jnp.zeros(()), skip_initial_evaluation=True
        )
        keys = jax.random.split(jax.random.PRNGKey(0), seeds)
        started = time.perf_counter()
        program = jax.jit(jax.vmap(lambda key: algo.train(key)[0])).lower(keys).compile()
        return (lambda: program(keys)), program, time.perf_counter() - started
    keys = keys_for_seeds(range(seeds))
    started = time.perf_counter()
    program = make_train(rejax_sac_as_purehr(settings), GymnaxEnv("Pendulum-v1")).jitted.lower(keys, None).compile()
    return (lambda: program(keys, None)), program, time.perf_counter() - started


def compiled_programs(steps: int, seeds: int) -> dict:
    """{library: (call, compile wall s)} at ``steps`` per seed."""
    programs = {}
    for library in ("rejax-sac", "purehr"):
        call, _, compile_s = compiled_program(library, steps, seeds)
        programs[library] = (call, compile_s)
    return programs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--steps", type=positive_int, default=10_000, help="environment steps per seed")
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds vmapped in each library's one call")
    parser.add_argument("--repeats", type=positive_int, default=3, help="interleaved timed calls per library")
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    load_before = os.getloadavg()
    programs = compiled_programs(args.steps, args.seeds)
    runs = {library: {"wall_s": [], "cpu_s": []} for library in programs}
    for _ in range(args.repeats):  # interleaved
        for library, (call, _) in programs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            jax.block_until_ready(call())
            runs[library]["cpu_s"].append(round(time.process_time() - cpu, 2))
            runs[library]["wall_s"].append(round(time.perf_counter() - wall, 2))
    env_steps = args.steps * args.seeds
    for library, (_, compile_s) in programs.items():
        runs[library].update(
            compile_s=round(compile_s, 2),
            steps_per_cpu_s=round(env_steps / min(runs[library]["cpu_s"])),
            steps_per_wall_s=round(env_steps / min(runs[library]["wall_s"])),
        )
    record = {
        "command": " ".join(["python", *sys.argv]),
        "steps_per_seed": args.steps,
        "seeds": args.seeds,
        "runs": runs,
        "ratio_purehr_over_rejax": {
            unit: round(runs["purehr"][unit] / runs["rejax-sac"][unit], 3)
            for unit in ("steps_per_cpu_s", "steps_per_wall_s")
        },
        "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "jax": jax.__version__,
    }
    print(json.dumps(record, indent=1))
    write_json(args.json, record)


if __name__ == "__main__":
    main()
