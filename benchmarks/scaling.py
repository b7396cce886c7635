"""How the one-scan trainer's wall time grows with total steps, seeds and parallel environments.

    python benchmarks/scaling.py --study steps --json benchmarks/results/scaling.json
    python benchmarks/scaling.py --study seeds --json benchmarks/results/scaling.json
    python benchmarks/scaling.py --study envs  --json benchmarks/results/scaling.json
    python benchmarks/scaling.py --plot benchmarks/results/scaling.json    # -> scaling.png beside it

Each study adds (or replaces) its own entry in the JSON, so the three can run as separate
commands. All on the swing task with its protocol network (64-64 tanh), float32, run time
only (compilation reported apart):

- ``steps``: one compiled program of ``--max-updates`` updates (protocol config, 8 envs x
  256 steps, 1 seed); a host callback stops it after k updates (the remaining updates are a
  skipped ``cond``), so every point shares one compilation. Expect a straight line.
- ``seeds``: 1, 2, 4, 8, 16 seeds in one call, 8 envs x 128 steps, ``--updates`` updates
  each. Sub-linear while the device has idle parallelism; on a 2-core CPU little is idle.
- ``envs``: 8, 32, 128, 512 environments x 128 steps, 1 seed, ``--updates`` updates,
  minibatch = batch / 8 (so the number of gradient steps per update stays 32).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np
from _common import load_averages, write_json

STUDIES = ("steps", "seeds", "envs")


def _timed_train(config, env, seeds: int, callback=None):
    from purehr.algorithms.trainer import make_train
    from purehr.engine.seeds import keys_for_seeds

    train = make_train(config, env, callback=callback)
    keys = keys_for_seeds(range(seeds))
    started = time.perf_counter()
    compiled = train.jitted.lower(keys, None).compile()
    compile_s = time.perf_counter() - started
    return compiled, keys, compile_s


def study_steps(env, base, max_updates: int) -> dict:
    config = base.replace(total_timesteps=max_updates * base.batch_size)
    state = {"stop_after": max_updates, "seen": 0}

    def callback(metrics):
        state["seen"] += 1
        return state["seen"] < state["stop_after"]

    compiled, keys, compile_s = _timed_train(config, env, 1, callback)
    points = []
    jax.block_until_ready(compiled(keys, None))  # warm-up run (full length)
    k = 2
    while k <= max_updates:
        state.update(stop_after=k, seen=0)
        started = time.perf_counter()
        jax.block_until_ready(compiled(keys, None))
        run_s = time.perf_counter() - started
        points.append(
            {
                "updates": k,
                "env_steps": k * config.batch_size,
                "run_s": round(run_s, 4),
                "steps_per_s": round(k * config.batch_size / run_s, 1),
            }
        )
        print(json.dumps(points[-1]), flush=True)
        k *= 2
    slope, intercept = np.polyfit([p["env_steps"] for p in points], [p["run_s"] for p in points], 1)
    predicted = slope * np.asarray([p["env_steps"] for p in points]) + intercept
    actual = np.asarray([p["run_s"] for p in points])
    r2 = 1 - np.sum((actual - predicted) ** 2) / np.sum((actual - actual.mean()) ** 2)
    return {
        "config": {"num_envs": config.num_envs, "num_steps": config.num_steps, "seeds": 1},
        "compile_s": round(compile_s, 2),
        "points": points,
        "linear_fit": {
            "seconds_per_million_steps": round(slope * 1e6, 3),
            "intercept_s": round(intercept, 4),
            "r_squared": round(float(r2), 4),
        },
    }


def study_seeds(env, base, updates: int, seed_counts) -> dict:
    config = base.replace(num_envs=8, num_steps=128, minibatch_size=128, total_timesteps=updates * 8 * 128)
    points = []
    for seeds in seed_counts:
        compiled, keys, compile_s = _timed_train(config, env, seeds)
        jax.block_until_ready(compiled(keys, None))
        started = time.perf_counter()
        jax.block_until_ready(compiled(keys, None))
        run_s = time.perf_counter() - started
        steps = seeds * updates * config.batch_size
        points.append(
            {
                "seeds": seeds,
                "env_steps": steps,
                "compile_s": round(compile_s, 2),
                "run_s": round(run_s, 4),
                "steps_per_s": round(steps / run_s, 1),
            }
        )
        print(json.dumps(points[-1]), flush=True)
    for point in points:
        point["wall_relative_to_one_seed"] = round(point["run_s"] / points[0]["run_s"], 3)
    return {"config": {"num_envs": 8, "num_steps": 128, "updates": updates}, "points": points}


def study_envs(env, base, updates: int, env_counts) -> dict:
    points = []
    for envs in env_counts:
        batch = envs * 128
        config = base.replace(num_envs=envs, num_steps=128, minibatch_size=batch // 8, total_timesteps=updates * batch)
        compiled, keys, compile_s = _timed_train(config, env, 1)
        jax.block_until_ready(compiled(keys, None))
        started = time.perf_counter()
        jax.block_until_ready(compiled(keys, None))
        run_s = time.perf_counter() - started
        steps = updates * batch
        points.append(
            {
                "envs": envs,
                "env_steps": steps,
                "compile_s": round(compile_s, 2),
                "run_s": round(run_s, 4),
                "steps_per_s": round(steps / run_s, 1),
            }
        )
        print(json.dumps(points[-1]), flush=True)
    return {"config": {"num_steps": 128, "updates": updates, "seeds": 1, "num_minibatches": 8}, "points": points}


def plot(json_path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = json.loads(json_path.read_text())
    studies = [s for s in STUDIES if s in data["studies"]]
    fig, axes = plt.subplots(1, len(studies), figsize=(4.2 * len(studies), 3.6), squeeze=False)
    colour = "#0072B2"
    for ax, name in zip(axes[0], studies):
        study = data["studies"][name]
        points = study["points"]
        if name == "steps":
            x = np.asarray([p["env_steps"] for p in points]) / 1e3
            y = [p["run_s"] for p in points]
            fit = study["linear_fit"]
            ax.plot(x, y, "o", color=colour, label="measured")
            grid = np.linspace(0, x.max(), 50)
            ax.plot(
                grid,
                fit["seconds_per_million_steps"] * grid / 1e3 + fit["intercept_s"],
                "--",
                color="#D55E00",
                label=f"linear fit, R² = {fit['r_squared']:.3f}",
            )
            ax.set(xlabel="environment steps (thousands), 1 seed", ylabel="run time (s)", title="total steps")
        else:
            key = "seeds" if name == "seeds" else "envs"
            x = np.asarray([p[key] for p in points])
            y = np.asarray([p["run_s"] for p in points])
            ax.loglog(x, y, "o-", color=colour, label="measured")
            ax.loglog(x, y[0] * x / x[0], "--", color="#999999", label="linear in " + key)
            ax.set(
                xlabel="seeds in one call" if name == "seeds" else "parallel environments (1 seed)",
                ylabel="run time (s)",
                title=f"{key} ({study['config']['updates']} updates)",
            )
        ax.legend(fontsize=8, frameon=False)
        ax.grid(alpha=0.3, which="both")
    machine = data.get("machine", {})
    fig.suptitle(
        f"purehr one-scan PPO, swing, float32 — {machine.get('backend', '?')}, "
        f"{machine.get('cpu_count', '?')} CPU cores (shared; see load in JSON)",
        fontsize=9,
    )
    fig.tight_layout()
    out = json_path.with_suffix(".png")
    fig.savefig(out, dpi=130)
    return out


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, output_file, positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter, epilog=__doc__)
    parser.add_argument(
        "--study", choices=STUDIES + ("all",), default=None, help="which scaling study to run (give --study or --plot)"
    )
    parser.add_argument("--json", type=output_file, default=None, help="merge this study's result into this file")
    parser.add_argument("--plot", type=Path, default=None, help="draw <json>.png from a recorded JSON")
    parser.add_argument("--max-updates", type=positive_int, default=32, help="steps study: 2, 4, ... up to this")
    parser.add_argument("--updates", type=positive_int, default=4, help="seeds/envs studies: updates per run")
    parser.add_argument(
        "--seed-counts", type=positive_int, nargs="+", default=[1, 2, 4, 8, 16], help="seeds study: seed counts"
    )
    parser.add_argument(
        "--env-counts",
        type=positive_int,
        nargs="+",
        default=[8, 32, 128, 512],
        help="envs study: environments per seed",
    )
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.plot:
        print(plot(args.plot))
        return 0
    if args.study is None:
        parser.error("give --study or --plot")

    from purehr.tasks import get_task

    task = get_task("swing")
    env = task.make_env()
    base = task.default_config
    studies = STUDIES if args.study == "all" else (args.study,)
    data = json.loads(args.json.read_text()) if args.json and args.json.exists() else {"studies": {}}
    for name in studies:
        load_before = os.getloadavg()
        started = time.perf_counter()
        if name == "steps":
            result = study_steps(env, base, args.max_updates)
        elif name == "seeds":
            result = study_seeds(env, base, args.updates, args.seed_counts)
        else:
            result = study_envs(env, base, args.updates, args.env_counts)
        result.update(
            command=" ".join(["scaling.py"] + (sys.argv[1:] if argv is None else list(argv))),
            wall_s=round(time.perf_counter() - started, 1),
            **load_averages(load_before),
        )
        data["studies"][name] = result
    data["machine"] = {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "cpu_count": os.cpu_count(),
        "devices": [str(d) for d in jax.devices()],
    }
    write_json(args.json, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
