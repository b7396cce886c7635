"""Does memory matter? The GRU policy against the feed-forward MLP at the same budget, 5 seeds:
on the partially observed swing-angles and hrv-hidden-audience (where memory should pay), on
the fully observed swing and hrv (where the GRU should not be much worse), and on bsuite's
MemoryChain from gymnax (a memory benchmark nobody here wrote).

    python studies/scripts/compare_memory.py --runs artifacts/memory --out results/memory
    python studies/scripts/compare_memory.py --runs artifacts/memory --out results/memory --skip-train
    python studies/scripts/compare_memory.py --out results/memory --tables-only

The protocol runs live under --runs (one folder per arm: gru_partial, mlp_partial, gru_full,
mlp_full; studies.memory_comparison.ARMS); a missing one is trained, an unfinished
one resumed (about an hour for all four on 2 CPU cores). Writes to --out: comparison.csv (per
task and policy: held-out success, return, speed and steps to success >= 0.95 at the final
checkpoint, mean and 95% t interval; the GRU-minus-MLP differences with Welch intervals; the
memory chain's returns), comparison.md (the tables) and comparison.json (command, machine,
load, settings, every seed's outcome, timing).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed

ROOT = Path(__file__).resolve().parents[2]
ARM_NAMES = ("gru_partial", "mlp_partial", "gru_full", "mlp_full", "gru_flicker", "mlp_flicker")
"""studies.memory_comparison.ARMS's names (studies/tests/test_memory_comparison.py checks),
here so that --help and a bad flag answer without importing JAX."""


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--out", type=Path, required=True, help="output directory for the tables and the record (new or empty)"
    )
    parser.add_argument(
        "--runs", type=Path, default=Path("artifacts/memory"), help="where the arms' protocol runs live, one per arm"
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        choices=ARM_NAMES,
        default=list(ARM_NAMES),
        help="the protocol arms trained and summarised (a partial comparison while others still train)",
    )
    parser.add_argument(
        "--skip-train",
        action="store_true",
        help="train no protocol run: summarise the finished runs under --runs (the memory chain still trains)",
    )
    parser.add_argument(
        "--tables-only",
        action="store_true",
        help="train nothing: write comparison.csv and comparison.md again from --out's comparison.json",
    )
    parser.add_argument(
        "--chain-seeds", type=int, default=5, help="seeds of MemoryChain per policy (>= 2, for an interval)"
    )
    parser.add_argument(
        "--chain-steps",
        type=int,
        default=102_400,
        help="environment steps per seed on MemoryChain (tests/test_recurrent.py trains 40960)",
    )
    return parser


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuses contradicting or impossible flags before anything is imported or trained."""
    if args.tables_only:
        if args.skip_train:
            parser.error("--tables-only trains nothing already; give --tables-only or --skip-train, not both")
        if not (args.out / "comparison.json").is_file():
            parser.error(f"--tables-only: {args.out / 'comparison.json'} not found (expected a finished comparison)")
        return
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        parser.error(f"--out {args.out} is not an empty directory; choose a new one (or --tables-only to rebuild)")
    if args.chain_seeds < 2 or args.chain_steps <= 0:
        parser.error(f"--chain-seeds {args.chain_seeds} (expected >= 2) and --chain-steps {args.chain_steps} (> 0)")
    if args.skip_train:
        missing = [name for name in args.arms if not (args.runs / name / "manifest.json").is_file()]
        if missing:
            parser.error(f"--skip-train: no run of {', '.join(missing)} under --runs {args.runs}")


def write_tables(out: Path, members: dict, chain: dict) -> str:
    from purehr.run.store.files import atomic_write_text, write_csv
    from studies.memory_comparison import format_tables, memory_chain_rows, summarise

    rows = summarise(members) + memory_chain_rows(chain)
    columns = list(dict.fromkeys(name for row in rows for name in row))
    write_csv(out / "comparison.csv", columns, rows)
    table = format_tables(rows)
    atomic_write_text(out / "comparison.md", table + "\n")
    return table


def _members_from_json(members: dict) -> dict:
    """comparison.json's members with their seeds as integers again (JSON keys are text)."""
    return {
        arm: {task: {int(seed): o for seed, o in seeds.items()} for task, seeds in tasks.items()}
        for arm, tasks in members.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    if args.tables_only:
        record = json.loads((args.out / "comparison.json").read_text())
        print(write_tables(args.out, _members_from_json(record["members"]), record["memory_chain"]))
        return 0
    from purehr.run.store.files import atomic_write_json
    from purehr.run.store.machine import environment_description, load_average
    from studies import memory_comparison as memory

    load_before, started = load_average(), time.perf_counter()
    arms = [memory.ARM_BY_NAME[name] for name in dict.fromkeys(args.arms)]
    timing = {} if args.skip_train else memory.train_arms(args.runs, arms)
    try:
        run_dirs = {arm.name: args.runs / arm.name for arm in arms}
        members, runs = memory.read_outcomes(run_dirs), memory.run_records(run_dirs)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    chain = memory.memory_chain(seeds=args.chain_seeds, total_timesteps=args.chain_steps)
    args.out.mkdir(parents=True, exist_ok=True)
    table = write_tables(args.out, members, chain)
    record = dict(
        command=[sys.executable, *(sys.argv if argv is None else ["studies/scripts/compare_memory.py", *argv])],
        machine=environment_description(),
        load_average_before=load_before,
        load_average_after=load_average(),
        wall_s=time.perf_counter() - started,
        runs_dir=str(args.runs),
        runs=runs,
        success_bar=memory.SUCCESS_BAR,
        arms={arm.name: {task: c.to_dict() for task, c in arm.configs().items()} for arm in arms},
        training_timing_s=timing,
        members=members,
        memory_chain=chain,
    )
    atomic_write_json(args.out / "comparison.json", json.loads(json.dumps(record, default=float)))
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
