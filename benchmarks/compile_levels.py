"""What XLA's CPU optimisation level costs a small training program: CPU seconds to lower, to
compile and to run ``make_train`` of each task at the test suite's protocol size (4 envs x 128
steps, 32 updates, 16-wide networks, 2 seeds), one fresh process per level and task, no
persistent cache. The test suite trains at level 0 and compiles the rest at level 1
(tests/conftest.py); the product trains at level 2 (purehr.engine.compile_options).

    python benchmarks/compile_levels.py --levels 0 1 2 --tasks swing hrv
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from purehr.cli.arguments import HelpFormatter

SMALL = dict(
    total_timesteps=16384,
    num_envs=4,
    num_steps=128,
    minibatch_size=128,
    num_epochs=2,
    actor_hidden=(16,),
    critic_hidden=(16,),
    anneal_lr=False,
)


def measure(task_name: str) -> dict[str, float]:
    """CPU seconds of lowering, compiling and one run of ``task_name``'s small program, here."""
    import jax

    from purehr.algorithms.trainer import make_train
    from purehr.engine.seeds import keys_for_seeds
    from purehr.tasks import get_task

    task = get_task(task_name)
    env = task.make_env()
    config = task.settings_for(None)[0].replace(**SMALL)
    keys = keys_for_seeds([0, 1])
    trainer = make_train(config, env, env.default_params)
    start = time.process_time()
    lowered = trainer.jitted.lower(keys, None)
    lowered_at = time.process_time()
    compiled = lowered.compile()
    compiled_at = time.process_time()
    jax.block_until_ready(compiled(keys, None))
    return {
        "lower_cpu_s": round(lowered_at - start, 2),
        "compile_cpu_s": round(compiled_at - lowered_at, 2),
        "run_cpu_s": round(time.process_time() - compiled_at, 2),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--levels", nargs="+", default=["0", "1", "2"], choices=["0", "1", "2", "3"], help="training levels to measure"
    )
    parser.add_argument("--tasks", nargs="+", default=["swing", "hrv"], help="tasks, one program each")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child)))
        return 0
    for level in args.levels:
        for task in args.tasks:
            env = dict(
                os.environ,
                PUREHR_XLA_TRAINING_LEVEL=level,
                JAX_ENABLE_COMPILATION_CACHE="false",
                XLA_FLAGS="--xla_backend_optimization_level=1 --xla_cpu_use_fusion_emitters=false",  # the suite's
            )
            done = subprocess.run(
                [sys.executable, __file__, "--child", task], env=env, capture_output=True, text=True, check=True
            )
            print(json.dumps({"level": int(level), "task": task, **json.loads(done.stdout.splitlines()[-1])}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
