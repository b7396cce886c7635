"""Environment steps per second of simulation, policy rollout and full PPO training.

    python benchmarks/throughput.py --json benchmarks/results/throughput.json
    python benchmarks/throughput.py --quick --json /tmp/quick.json         # the test's subset
    python benchmarks/throughput.py --tasks swing --dtypes float32 --seeds 1 5 --envs 8
    python benchmarks/throughput.py --threads --json benchmarks/results/throughput_threads.json
    python benchmarks/throughput.py --goals --json benchmarks/results/throughput_goals.json

For each task, dtype, seed count and environment count, three programs, each one jit:

- ``simulation``: uniform random actions, auto-reset, one ``lax.scan`` over time with a
  ``vmap`` over seeds and environments inside;
- ``rollout``: the same scan, actions sampled from the task's PPO policy network (what
  PPO's rollout phase does, without GAE or the update);
- ``training``: ``purehr.ppo.make_train`` end to end (rollout + GAE + 4 epochs x 8
  minibatches per update), seeds vmapped inside the scan over updates.

Every program does the same environment steps per seed (``updates x envs x num_steps``), so
a seed count's wall time compares directly with another's. Compilation
(``jit(...).lower().compile()``) is timed apart from the run (best of ``--repeats``, one
run when the first takes over 3 s). Memory: XLA's own account of each compiled program
(arguments + outputs + temporaries, ``compiled.memory_analysis()``), the device's peak where
the backend reports it (GPU/TPU ``memory_stats()``), and the process's peak resident set
(``resource.getrusage``, monotone over the worker's life). float64 runs in a subprocess with
``JAX_ENABLE_X64=1`` (x64 is process-wide), as does every thread setting of ``--threads``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import load_averages, write_json

ROOT = Path(__file__).resolve().parents[1]

TASKS = ("swing", "hrv")
DTYPES = ("float32", "float64")
SEEDS = (1, 5, 32)
ENVS = (8, 64, 512)
MODES = ("simulation", "rollout", "training")
NUM_STEPS = 128  # rollout length per update (the protocol uses 256)
STEPS_PER_SEED = 2**15  # target env steps per seed per program (at least one update)
NUM_MINIBATCHES = 8  # minibatch = batch / 8, as the swing protocol (2,048 / 256)
QUICK = dict(tasks=("hrv",), dtypes=("float32",), seeds=(1,), envs=(8,), num_steps=16, steps_per_seed=256, hidden=(16,))
THREAD_SETTINGS = {
    "default": {},
    "PJRT_NPROC=1": {"PJRT_NPROC": "1"},
    "xla_cpu_multi_thread_eigen=false": {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"},
}
THREAD_GRID = dict(tasks=("swing",), dtypes=("float32",), seeds=(1, 5), envs=(8,), modes=("simulation", "training"))
RECORD_FIELDS = (
    "seeds",
    "envs",
    "num_steps",
    "updates",
    "env_steps",
    "compile_s",
    "run_s",
    "steps_per_s",
    "program_bytes",
    "peak_rss_bytes",
)


# ---------------------------------------------------------------------------- worker side
def _config(task: str, envs: int, num_steps: int, steps_per_seed: int, hidden, policy=None):
    from purehr.tasks import get_task

    batch = envs * num_steps
    updates = max(1, steps_per_seed // batch)
    changes = dict(
        num_envs=envs,
        num_steps=num_steps,
        minibatch_size=max(1, batch // NUM_MINIBATCHES),
        total_timesteps=updates * batch,
    )
    if hidden:
        changes.update(actor_hidden=tuple(hidden), critic_hidden=tuple(hidden))
    if policy:
        changes.update(policy=policy)
    return get_task(task).default_config.replace(**changes), updates


def _random_action(space):
    import jax
    import jax.numpy as jnp

    from purehr.envs import spaces

    if isinstance(space, spaces.MultiDiscrete):
        nvec = jnp.asarray(space.nvec, jnp.int32)
        return lambda key: jax.random.randint(key, nvec.shape, 0, nvec)
    if isinstance(space, spaces.Discrete):
        return lambda key: jax.random.randint(key, (), 0, space.n)
    return space.sample


def _simulation_program(env, params, seeds: int, envs: int, length: int):
    import jax
    import jax.numpy as jnp

    from purehr.envs.wrappers import AutoResetWrapper

    wrapped = AutoResetWrapper(env)
    sample = jax.vmap(jax.vmap(_random_action(env.action_space(params))))
    reset = jax.vmap(jax.vmap(wrapped.reset, in_axes=(0, None)), in_axes=(0, None))
    step = jax.vmap(jax.vmap(wrapped.step, in_axes=(0, 0, 0, None)), in_axes=(0, 0, 0, None))

    def grid_keys(key):
        return jax.random.split(key, seeds * envs).reshape(seeds, envs, -1)

    def run(key):
        _, state = reset(grid_keys(key), params)

        def body(carry, _):
            state, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            _, state, reward, *_ = step(grid_keys(step_key), state, sample(grid_keys(action_key)), params)
            return (state, key), jnp.mean(reward)

        (_, _), rewards = jax.lax.scan(body, (state, key), None, length)
        return rewards

    return run


def _rollout_program(config, env, seeds: int, length: int):
    """PPO's rollout phase alone, the trainer's own (``PPO.rollout``): pre-drawn randomness,
    policy forward, sample, log-prob, environment step, the bootstrap values."""
    import jax
    import jax.numpy as jnp

    from purehr.algorithms.ppo.algorithm import make_ppo

    ppo = make_ppo(config, env)
    rollouts = length // config.num_steps

    def one_seed(runner):
        def next_rollout(runner, _):
            rollout = ppo.rollout(runner)
            trajectory = rollout.trajectory
            checksum = jnp.mean(trajectory.reward) + jnp.mean(trajectory.log_prob + rollout.next_values)
            continued = dict(env_state=rollout.env_state, observation=rollout.observation, key=rollout.key)
            return runner.replace(**continued, policy_state=rollout.policy_state), checksum

        _, out = jax.lax.scan(next_rollout, runner, None, rollouts)
        return out

    def run(keys):
        return jax.vmap(one_seed)(jax.vmap(ppo.init)(keys))

    return run


def _jitted(fn):
    """``fn`` jitted, unless it is already (``make_train``'s program carries its own XLA options,
    which only a top-level ``jax.jit`` may take: wrapping it again raised)."""
    import jax

    return fn if hasattr(fn, "lower") else jax.jit(fn)


def _measure(fn, args, env_steps: int, repeats: int) -> dict:
    import jax

    started = time.perf_counter()
    compiled = _jitted(fn).lower(*args).compile()
    compile_s = time.perf_counter() - started
    memory = compiled.memory_analysis()
    program_bytes = None
    if memory is not None:
        program_bytes = int(memory.argument_size_in_bytes + memory.output_size_in_bytes + memory.temp_size_in_bytes)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        elapsed = time.perf_counter() - started
        best = min(best, elapsed)
        if elapsed > 3.0:
            break
    record = {
        "env_steps": env_steps,
        "compile_s": round(compile_s, 3),
        "run_s": round(best, 6),
        "steps_per_s": round(env_steps / best, 1),
        "program_bytes": program_bytes,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    stats = jax.devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        record["device_peak_bytes"] = int(stats["peak_bytes_in_use"])
    return record


def worker(args) -> None:
    import jax

    from purehr.algorithms.trainer import make_train
    from purehr.engine.seeds import keys_for_seeds
    from purehr.tasks import get_task

    dtype = "float64" if jax.config.jax_enable_x64 else "float32"
    for task in args.tasks:
        env = get_task(task).make_env()
        for envs in args.envs:
            config, updates = _config(task, envs, args.num_steps, args.steps_per_seed, args.hidden, args.policy)
            length = updates * config.num_steps
            for seeds in args.seeds:
                keys = keys_for_seeds(range(seeds))
                env_steps = seeds * envs * length
                for mode in args.modes:
                    if mode == "simulation":
                        record = _measure(
                            _simulation_program(env, env.default_params, seeds, envs, length),
                            (jax.random.PRNGKey(0),),
                            env_steps,
                            args.repeats,
                        )
                    elif mode == "rollout":
                        record = _measure(
                            _rollout_program(config, env, seeds, length), (keys,), env_steps, args.repeats
                        )
                    else:
                        train = make_train(config, env)
                        record = _measure(train.jitted, (keys, None), env_steps, args.repeats)
                    record = dict(
                        task=task,
                        dtype=dtype,
                        mode=mode,
                        seeds=seeds,
                        envs=envs,
                        num_steps=config.num_steps,
                        updates=updates,
                        **record,
                    )
                    print("RECORD " + json.dumps(record), flush=True)


def goals_worker(args) -> None:
    """The two CPU goals measured robustly on a shared machine: the four swing programs
    (simulation and training, 1 and 5 seeds, 8 envs) compiled once, then run in turn for
    ``--rounds`` rounds; the minimum of each is kept (load from other jobs only adds time)."""
    import jax

    from purehr.algorithms.trainer import make_train
    from purehr.engine.seeds import keys_for_seeds
    from purehr.tasks import get_task

    env = get_task("swing").make_env()
    config, updates = _config("swing", 8, args.num_steps, args.steps_per_seed, args.hidden, args.policy)
    length = updates * config.num_steps
    programs = {}
    for seeds in (1, 5):
        keys = keys_for_seeds(range(seeds))
        for mode in ("simulation", "training"):
            fn = (
                _simulation_program(env, env.default_params, seeds, 8, length)
                if mode == "simulation"
                else make_train(config, env).jitted
            )
            call_args = (jax.random.PRNGKey(0),) if mode == "simulation" else (keys, None)
            started = time.perf_counter()
            compiled = _jitted(fn).lower(*call_args).compile()
            programs[(mode, seeds)] = (compiled, call_args, time.perf_counter() - started)
            jax.block_until_ready(compiled(*call_args))
    times = {name: [] for name in programs}
    for _ in range(args.rounds):
        for name, (compiled, call_args, _) in programs.items():
            started = time.perf_counter()
            jax.block_until_ready(compiled(*call_args))
            times[name].append(time.perf_counter() - started)
    for (mode, seeds), (_, _, compile_s) in programs.items():
        runs = times[(mode, seeds)]
        env_steps = seeds * 8 * length
        record = dict(
            task="swing",
            dtype="float32",
            mode=mode,
            seeds=seeds,
            envs=8,
            num_steps=config.num_steps,
            updates=updates,
            env_steps=env_steps,
            compile_s=round(compile_s, 3),
            run_s=round(min(runs), 6),
            run_s_median=round(float(sorted(runs)[len(runs) // 2]), 6),
            runs=len(runs),
            steps_per_s=round(env_steps / min(runs), 1),
            program_bytes=None,
            peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        )
        print("RECORD " + json.dumps(record), flush=True)


# ---------------------------------------------------------------------------- parent side
def machine() -> dict:
    import jax

    info = {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
    }
    try:
        info["cpu_model"] = next(
            line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return info


def run_worker(dtype: str, extra_env: dict, grid: dict, options: list[str]) -> list[dict]:
    env = dict(os.environ, JAX_ENABLE_X64="1" if dtype == "float64" else "0", **extra_env)
    if "XLA_FLAGS" in extra_env and os.environ.get("XLA_FLAGS"):
        env["XLA_FLAGS"] = os.environ["XLA_FLAGS"] + " " + extra_env["XLA_FLAGS"]
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        "--tasks",
        *grid["tasks"],
        "--seeds",
        *map(str, grid["seeds"]),
        "--envs",
        *map(str, grid["envs"]),
        "--modes",
        *grid["modes"],
        *options,
    ]
    records = []
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
    for line in process.stdout:
        if line.startswith("RECORD "):
            record = json.loads(line[len("RECORD ") :])
            records.append(record)
            print(
                f"  {record['task']:5s} {record['dtype']:7s} {record['mode']:10s} seeds {record['seeds']:3d} "
                f"envs {record['envs']:4d}: compile {record['compile_s']:6.2f} s, run {record['run_s']:7.3f} s, "
                f"{record['steps_per_s']:>12,.0f} steps/s",
                file=sys.stderr,
                flush=True,
            )
    if process.wait() != 0:
        raise RuntimeError(f"worker {' '.join(command)} exited with {process.returncode}")
    return records


def goals(records: list[dict]) -> dict:
    """The issue's two CPU goals, evaluated wherever the grid has the numbers."""

    def find(**match):
        return next((r for r in records if all(r.get(k) == v for k, v in match.items())), None)

    out = {"training_over_simulation": [], "seeds5_over_seeds1_wall": []}
    for r in records:
        if r["mode"] == "training":
            sim = find(task=r["task"], dtype=r["dtype"], mode="simulation", seeds=r["seeds"], envs=r["envs"])
            if sim:
                out["training_over_simulation"].append(
                    dict(
                        task=r["task"],
                        dtype=r["dtype"],
                        seeds=r["seeds"],
                        envs=r["envs"],
                        ratio=round(r["steps_per_s"] / sim["steps_per_s"], 3),
                    )
                )
        if r["seeds"] == 5:
            one = find(task=r["task"], dtype=r["dtype"], mode=r["mode"], seeds=1, envs=r["envs"])
            if one:
                out["seeds5_over_seeds1_wall"].append(
                    dict(
                        task=r["task"],
                        dtype=r["dtype"],
                        mode=r["mode"],
                        envs=r["envs"],
                        ratio=round(r["run_s"] / one["run_s"], 3),
                    )
                )
    swing = [g for g in out["training_over_simulation"] if g["task"] == "swing"]
    five = [g for g in out["seeds5_over_seeds1_wall"] if g["mode"] == "training"]
    out["swing_training_at_least_40pct_of_simulation"] = all(g["ratio"] >= 0.4 for g in swing) if swing else None
    out["five_seeds_at_most_3x_one_seed"] = all(g["ratio"] <= 3.0 for g in five) if five else None
    return out


def print_table(records: list[dict]) -> None:
    print(
        f"{'task':5s} {'dtype':7s} {'mode':10s} {'seeds':>5s} {'envs':>5s} {'env steps':>10s} "
        f"{'compile s':>9s} {'run s':>8s} {'steps/s':>12s} {'program MB':>10s}"
    )
    for r in records:
        program = f"{r['program_bytes'] / 2**20:10.1f}" if r.get("program_bytes") else f"{'n/a':>10s}"
        print(
            f"{r['task']:5s} {r['dtype']:7s} {r['mode']:10s} {r['seeds']:5d} {r['envs']:5d} {r['env_steps']:10d} "
            f"{r['compile_s']:9.2f} {r['run_s']:8.3f} {r['steps_per_s']:12,.0f} {program}"
        )


def markdown_report(reports: list[dict]) -> str:
    """One markdown table (steps/s, compile, program memory) from recorded results (read_reports)."""
    lines = [
        "| task | dtype | mode | seeds | envs | env steps | compile (s) | run (s) | env steps/s | "
        "program MB | load before -> after |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for data in reports:
        load = f"{data['load_average_before'][0]:.1f} -> {data['load_average_after'][0]:.1f}"
        for r in data["records"]:
            program = f"{r['program_bytes'] / 2**20:.1f}" if r.get("program_bytes") else "n/a"
            lines.append(
                f"| {r['task']} | {r['dtype']} | {r['mode']} | {r['seeds']} | {r['envs']} | "
                f"{r['env_steps']:,} | {r['compile_s']:.1f} | {r['run_s']:.3f} | {r['steps_per_s']:,.0f} | "
                f"{program} | {load} |"
            )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, output_file, positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter, epilog=__doc__)
    parser.add_argument(
        "--json",
        type=output_file,
        default=None,
        help="write every record and the machine here (checked before the benchmark runs)",
    )
    parser.add_argument("--quick", action="store_true", help="a tiny subset (hrv, float32, 1-2 seeds, 8 envs)")
    parser.add_argument(
        "--threads",
        action="store_true",
        help="compare thread settings (default, PJRT_NPROC=1, no multi-thread Eigen) on swing",
    )
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS, help="tasks to measure")
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES, help="precisions to measure")
    parser.add_argument("--seeds", nargs="+", type=positive_int, default=list(SEEDS), help="seed counts")
    parser.add_argument("--envs", nargs="+", type=positive_int, default=list(ENVS), help="environments per seed")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="programs to measure")
    parser.add_argument("--num-steps", type=positive_int, default=NUM_STEPS, help="rollout length per update")
    parser.add_argument(
        "--steps-per-seed",
        type=positive_int,
        default=STEPS_PER_SEED,
        help="target environment steps per seed and program (at least one update)",
    )
    parser.add_argument(
        "--hidden",
        type=positive_int,
        nargs="+",
        default=None,
        help="override hidden sizes (both nets) (default: the task's)",
    )
    parser.add_argument(
        "--policy", choices=("mlp", "gru"), default=None, help="PPO's shipped network (default: the task's)"
    )
    parser.add_argument("--repeats", type=positive_int, default=2, help="timed runs per program (best kept)")
    parser.add_argument(
        "--goals",
        action="store_true",
        help="only the two CPU goals (swing, 1 vs 5 seeds, 8 envs), programs run in turn "
        "for --rounds rounds, minimum kept (robust to a shared machine)",
    )
    parser.add_argument(
        "--rounds", type=positive_int, default=None, help="rounds of --goals (default 5) or --threads (default 3)"
    )
    parser.add_argument(
        "--report",
        type=Path,
        nargs="+",
        default=None,
        help="print a markdown table from recorded JSON files and exit (default: not set)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser


def read_reports(paths: list[Path]) -> list[dict]:
    """The recorded results ``--report`` tabulates, every file checked before anything is printed."""
    reports = []
    for path in paths:
        if not Path(path).is_file():
            raise ValueError(
                f"--report {path}: {'is a directory' if Path(path).is_dir() else 'no such file'}; "
                "expected a JSON file written by --json"
            )
        try:
            data = json.loads(Path(path).read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"--report {path} is not JSON ({error}); expected a file written by --json") from None
        missing = [
            key
            for key in ("records", "load_average_before", "load_average_after")
            if not isinstance(data, dict) or key not in data
        ]
        if missing:
            raise ValueError(f"--report {path} lacks {missing}; expected a file written by --json")
        reports.append(data)
    return reports


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, list(value) if isinstance(value, tuple) else value)
    if args.report:
        try:
            print(markdown_report(read_reports(args.report)))
        except ValueError as error:
            parser.exit(2, f"error: {error}\n")
        return 0
    if args.rounds is None:
        args.rounds = 5 if args.goals else 3
    if args.worker:
        goals_worker(args) if args.goals else worker(args)
        return 0

    started = time.perf_counter()
    load_before = os.getloadavg()
    options = [
        "--num-steps",
        str(args.num_steps),
        "--steps-per-seed",
        str(args.steps_per_seed),
        "--repeats",
        str(args.repeats),
    ] + (["--hidden", *map(str, args.hidden)] if args.hidden else [])
    options += ["--policy", args.policy] if args.policy else []
    grid = dict(tasks=args.tasks, seeds=args.seeds, envs=args.envs, modes=args.modes)
    records, thread_records = [], {}
    if args.goals:
        options += ["--goals", "--rounds", str(args.rounds)]
        grid = dict(tasks=["swing"], seeds=[1, 5], envs=[8], modes=["simulation", "training"])
        records = run_worker("float32", {}, grid, options)
    elif args.threads:
        # settings take turns, --rounds times, each its own process; a persistent compilation
        # cache per setting makes rounds after the first cheap; the fastest run of each
        # program over the rounds is kept (load from other jobs only ever adds time)
        grid = {name: list(value) for name, value in THREAD_GRID.items()}
        cache_root = Path(os.environ.get("TMPDIR", "/tmp")) / f"purehr-thread-study-{os.getpid()}"
        rounds: dict[str, list[list[dict]]] = {name: [] for name in THREAD_SETTINGS}
        for round_index in range(args.rounds):
            for name, extra in THREAD_SETTINGS.items():
                print(f"round {round_index + 1}/{args.rounds}: thread setting {name}", file=sys.stderr, flush=True)
                cache = dict(
                    extra,
                    JAX_COMPILATION_CACHE_DIR=str(cache_root / name.replace("=", "_")),
                    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                    JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
                )
                rounds[name].append(run_worker("float32", cache, grid, options))
        for name, per_round in rounds.items():
            merged = []
            for first, *later in zip(*per_round):
                fastest = min([first, *later], key=lambda r: r["run_s"])
                merged.append(
                    dict(
                        fastest,
                        compile_s=first["compile_s"],
                        rounds=len(per_round),
                        run_s_per_round=[r["run_s"] for r in (first, *later)],
                    )
                )
            thread_records[name] = merged
        records = thread_records["default"]
    else:
        for dtype in args.dtypes:
            records += run_worker(dtype, {}, grid, options)
    result = {
        "command": " ".join([Path(sys.argv[0]).name] + (sys.argv[1:] if argv is None else list(argv))),
        "machine": machine(),
        "thread_environment": {name: os.environ.get(name) for name in ("PJRT_NPROC", "XLA_FLAGS", "JAX_PLATFORMS")},
        **load_averages(load_before),
        "wall_s": round(time.perf_counter() - started, 1),
        "settings": {
            "rounds": args.rounds if (args.goals or args.threads) else 1,
            "num_steps": args.num_steps,
            "steps_per_seed": args.steps_per_seed,
            "num_minibatches": NUM_MINIBATCHES,
            "num_epochs": 4,
            "repeats": args.repeats,
            "hidden": args.hidden,
            "policy": args.policy,
            "quick": args.quick,
        },
        "records": records,
        "goals": goals(records),
    }
    if args.threads:
        result["threads"] = {name: rs for name, rs in thread_records.items()}
        result["threads_summary"] = {
            name: {f"{r['mode']}/seeds{r['seeds']}/envs{r['envs']}": r["steps_per_s"] for r in rs}
            for name, rs in thread_records.items()
        }
    print_table(records)
    print(json.dumps(result["goals"], indent=1))
    if args.threads:
        print(json.dumps(result["threads_summary"], indent=1))
    write_json(args.json, result)
    if args.json:
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
