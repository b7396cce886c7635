"""Grouped quick evaluations (issue 49; ``ProtocolSettings.group_quick_evaluations``): a group of
quick evaluations vmapped over the group's parameter sets against the same evaluations one at a
time, as a run makes them: their held-out statistics side by side (bit for bit, or the largest
relative difference) and, on this machine, the time of each (interleaved, best of ``--repeats``).

python benchmarks/grouped_evaluation.py --json benchmarks/results/grouped_evaluation.json

The parameter sets are ``--group`` x ``--seeds`` initial networks (distinct keys), their weights
scaled by 3 so that the policies act (a task's default network at its default quick evaluation)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_json  # noqa: E402

from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--task", default="swing", help="a task with quick checkpoints (its default protocol)")
    parser.add_argument("--group", type=positive_int, default=9, help="parameter sets per group (swing: 9)")
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds vmapped, as the run does")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed calls of each, interleaved")
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def compare(grouped: dict, singles: list[dict]) -> dict[str, dict[str, float]]:
    """Per statistic: slots whose [seed] values equal the single evaluation's bit for bit, and
    the largest relative difference elsewhere."""
    import numpy as np

    result = {}
    for name in grouped:
        equal, worst = 0, 0.0
        for slot, single in enumerate(singles):
            a, b = np.asarray(single[name], np.float64), np.asarray(grouped[name][slot], np.float64)
            if np.array_equal(a, b, equal_nan=True):
                equal += 1
            else:
                scale = np.maximum(np.abs(a), 1e-30)
                worst = max(worst, float(np.nanmax(np.abs(a - b) / scale)))
        result[name] = {"slots_bit_identical": equal, "slots": len(singles), "max_relative_difference": worst}
    return result


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import datetime

    import jax

    from purehr.run.compiled.task_setup import build_task_setup
    from purehr.tasks import get_task

    setup = build_task_setup(args.task, get_task(args.task).default_config)
    episodes = setup.protocol.quick_eval_episodes
    keys = jax.random.split(jax.random.PRNGKey(0), args.group * args.seeds)
    params = jax.tree.map(lambda x: 3.0 * x, setup.algorithm.network_params(jax.vmap(setup.algorithm.init)(keys)))
    stacked = jax.tree.map(lambda x: x.reshape((args.group, args.seeds, *x.shape[1:])), params)
    slots = [jax.tree.map(lambda x, i=i: x[i], stacked) for i in range(args.group)]
    one = jax.jit(jax.vmap(lambda p: setup.evaluate(p, episodes)))
    group = jax.jit(jax.vmap(jax.vmap(lambda p: setup.evaluate(p, episodes))))
    grouped, singles = jax.block_until_ready((group(stacked), [one(slot) for slot in slots]))  # compiled here
    times = {"grouped_s": [], "one_by_one_s": []}
    for _ in range(args.repeats):
        started = time.perf_counter()
        jax.block_until_ready(group(stacked))
        times["grouped_s"].append(time.perf_counter() - started)
        started = time.perf_counter()
        jax.block_until_ready([one(slot) for slot in slots])
        times["one_by_one_s"].append(time.perf_counter() - started)
    best = {name: min(values) for name, values in times.items()}
    statistics = compare(grouped, singles)
    print(
        f"{args.task}: {args.group} quick evaluations ({episodes} episodes x {args.seeds} seeds) grouped "
        f"{best['grouped_s']:.3f} s, one by one {best['one_by_one_s']:.3f} s "
        f"(ratio {best['grouped_s'] / best['one_by_one_s']:.2f}, {jax.default_backend()})"
    )
    for name, entry in statistics.items():
        print(
            f"  {name}: {entry['slots_bit_identical']}/{entry['slots']} slots bit-identical"
            + (
                f", largest relative difference {entry['max_relative_difference']:.1e}"
                if entry["max_relative_difference"]
                else ""
            )
        )
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    write_json(
        args.json,
        {
            "command": [sys.executable, *sys.argv],
            "date": when,
            "jax": jax.__version__,
            "backend": jax.default_backend(),
            "task": args.task,
            "group": args.group,
            "seeds": args.seeds,
            "episodes": episodes,
            "times": times,
            "best": best,
            "statistics": statistics,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
