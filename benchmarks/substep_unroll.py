"""Unrolling the swing's RK4 sub-steps (issue 49): the time of a jitted scan of ``SwingEnv.step``
and its results against today's rolled loop, per ``unroll`` of the sub-steps' ``fori_loop``.

python benchmarks/substep_unroll.py                     # unroll 1 2 4 8, 4,096 envs x 64 steps
python benchmarks/substep_unroll.py --unroll 1 8 --json out.json

Each control step is ``params.substeps`` (8) RK4 steps in a ``fori_loop``: an evaluation's 1,600
steps are 12,800 sequential loop iterations, which is what a loop costs on an accelerator.
Unrolling divides that count; this measures what it does to the time and to the numbers on
the backend at hand. The unroll is applied for this process only, by tracing the step with
``jax.lax.fori_loop`` given ``unroll`` (the only fori_loop the traced step holds)."""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_averages, write_json  # noqa: E402

from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--unroll", type=positive_int, nargs="+", default=[1, 2, 4, 8], help="unrolls to time")
    parser.add_argument("--envs", type=positive_int, default=4096, help="environments stepped side by side")
    parser.add_argument("--steps", type=positive_int, default=64, help="control steps in the scan")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed calls after the first (best kept)")
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def measure(unroll: int, envs: int, steps: int, repeats: int) -> dict:
    """The rewards and final angles of one rolled-out scan, its best time, its while ops."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from purehr.tasks import get_task

    env = get_task("swing").make_env()
    params = env.default_params
    keys = jax.random.split(jax.random.PRNGKey(0), envs)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    actions = jax.random.uniform(jax.random.PRNGKey(1), (envs, 2), minval=-1.0, maxval=1.0)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def roll(states):
        def body(state, t):
            _, state, reward, *_ = step(keys, state, actions * jnp.cos(t), params)
            return state, reward

        return jax.lax.scan(body, states, jnp.arange(steps, dtype=jnp.float32))

    rolled_loop = jax.lax.fori_loop
    jax.lax.fori_loop = functools.partial(rolled_loop, unroll=unroll)
    try:
        compiled = jax.jit(roll).lower(states).compile()
    finally:
        jax.lax.fori_loop = rolled_loop
    final, rewards = jax.block_until_ready(compiled(states))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(compiled(states))
        times.append(time.perf_counter() - started)
    return {
        "unroll": unroll,
        "while_ops": compiled.as_text().count(" while("),
        "best_s": min(times),
        "rewards": np.asarray(rewards),
        "theta": np.asarray(final.plant.theta),
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import jax
    import numpy as np

    before = os.getloadavg()
    rows = [measure(unroll, args.envs, args.steps, args.repeats) for unroll in args.unroll]
    reference = rows[0]
    print(f"{jax.devices()[0].device_kind}: {args.envs} envs x {args.steps} steps, against the first")
    record = []
    for row in rows:
        summary = {
            "unroll": row["unroll"],
            "while_ops": row["while_ops"],
            "best_s": row["best_s"],
            "ratio_to_reference": row["best_s"] / reference["best_s"],
            "rewards_max_difference": float(np.abs(row["rewards"] - reference["rewards"]).max()),
            "theta_max_difference": float(np.abs(row["theta"] - reference["theta"]).max()),
        }
        record.append(summary)
        print(
            f"unroll {summary['unroll']}: {summary['while_ops']} while ops, {summary['best_s']:.3f} s "
            f"({summary['ratio_to_reference']:.2f}x), max difference rewards {summary['rewards_max_difference']:.1e}, "
            f"theta {summary['theta_max_difference']:.1e}"
        )
    record = {"command": [sys.executable, *sys.argv], "device": str(jax.devices()[0]), "rows": record}
    write_json(args.json, record | load_averages(before))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
