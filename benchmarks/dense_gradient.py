"""A Dense layer's weight gradient on the CPU: flax's (XLA's dot of the inputs transposed with
the output gradient) against ``purehr.engine.dense.narrow_weight_gradient`` (one reduction per
output column), by output width, for the shapes of PQN's and SAC's peer settings (5 seeds
vmapped; rows x inputs: purejaxql's CartPole minibatch 128 x 256, rejax's Pendulum SAC sample
256 x 64). Best of 5 timings of 100 calls each, ``PJRT_NPROC=1``.

    nice python benchmarks/dense_gradient.py --json /tmp/dense_gradient.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("PJRT_NPROC", "1")
sys.path.insert(0, os.path.dirname(__file__))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _common import write_json  # noqa: E402

from purehr.cli.arguments import HelpFormatter, output_file  # noqa: E402
from purehr.engine.dense import narrow_weight_gradient  # noqa: E402

SHAPES = ((5, 128, 256), (5, 256, 64))  # (seeds, rows, inputs)
WIDTHS = (1, 2, 4, 8, 16, 32)


def best_ms(function, *arguments, calls: int = 100, repeats: int = 5) -> float:
    compiled = jax.jit(jax.vmap(function))
    jax.block_until_ready(compiled(*arguments))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            result = compiled(*arguments)
        jax.block_until_ready(result)
        times.append((time.perf_counter() - started) / calls)
    return 1e3 * min(times)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    rows = []
    for seeds, batch, inputs in SHAPES:
        for width in WIDTHS:
            x = jax.random.normal(jax.random.PRNGKey(0), (seeds, batch, inputs))
            g = jax.random.normal(jax.random.PRNGKey(1), (seeds, batch, width))
            dot = best_ms(lambda x, g: jnp.einsum("ni,no->io", x, g), x, g)
            columns = best_ms(narrow_weight_gradient, x, g)
            rows.append(
                {
                    "seeds": seeds,
                    "rows": batch,
                    "inputs": inputs,
                    "outputs": width,
                    "dot_ms": round(dot, 4),
                    "columns_ms": round(columns, 4),
                }
            )
            print(
                f"{seeds} x {batch} x {inputs} -> {width:3d}: dot {dot:.3f} ms, "
                f"columns {columns:.3f} ms ({dot / columns:.1f}x)"
            )
    record = {
        "command": " ".join(["python", *sys.argv]),
        "rows": rows,
        "jax": jax.__version__,
        "load_average": os.getloadavg(),
    }
    write_json(args.json, record)


if __name__ == "__main__":
    main()
