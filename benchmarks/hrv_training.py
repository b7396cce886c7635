"""HRV training throughput of the one-scan trainer: 1 seed vs 5 seeds in one call, compile
time apart, peak memory; and the seed API at the protocol budget.

    python benchmarks/hrv_training.py --steps 200000 --json benchmarks/results/hrv_training.json
    python benchmarks/hrv_training.py --seed-api-steps 1000000    # train_hr_ppo at 1M steps
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time

from _common import write_json


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def time_make_train(steps: int, seeds: int) -> dict:
    import jax

    from purehr import HRWritingEnv
    from purehr.algorithms.trainer import make_train
    from purehr.engine.seeds import keys_for_seeds
    from purehr.tasks import HRV_DEFAULTS

    train = make_train(HRV_DEFAULTS.replace(total_timesteps=steps), HRWritingEnv(hrv_dim=8))
    keys = keys_for_seeds(range(seeds))
    started = time.perf_counter()
    compiled = train.jitted.lower(keys, None).compile()
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    jax.block_until_ready(compiled(keys, None))
    run_s = time.perf_counter() - started
    total = HRV_DEFAULTS.replace(total_timesteps=steps).num_updates * HRV_DEFAULTS.batch_size * seeds
    return {
        "seeds": seeds,
        "env_steps": total,
        "compile_s": compile_s,
        "run_s": run_s,
        "steps_per_s": total / run_s,
        "peak_rss_mb": peak_rss_mb(),
    }


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, output_file, positive_int

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--steps", type=positive_int, default=200_000, help="steps per seed for the 1 vs 5 seed comparison"
    )
    parser.add_argument(
        "--seed-api-steps", type=int, default=0, help="also time train_hr_ppo at this budget (0: do not)"
    )
    parser.add_argument("--json", type=output_file, default=None, help="write the results here")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    results = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_before": os.getloadavg()},
        "runs": [],
    }
    for seeds in (1, 5):
        run = time_make_train(args.steps, seeds)
        results["runs"].append(run)
        print(json.dumps(run), flush=True)
    one, five = results["runs"]
    results["five_seeds_over_one_wall_ratio"] = five["run_s"] / one["run_s"]
    if args.seed_api_steps:
        from purehr import HRWritingEnv, train_hr_ppo

        started = time.perf_counter()
        model = train_hr_ppo(HRWritingEnv(hrv_dim=8), timesteps=args.seed_api_steps)
        wall = time.perf_counter() - started
        metrics = model.evaluate()
        results["seed_api"] = {"timesteps": args.seed_api_steps, "wall_s_including_compile": wall, "heldout": metrics}
        print(json.dumps(results["seed_api"]), flush=True)
    results["machine"]["load_after"] = os.getloadavg()
    print(f"5 seeds / 1 seed wall time: {results['five_seeds_over_one_wall_ratio']:.2f}x")
    write_json(args.json, results, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
