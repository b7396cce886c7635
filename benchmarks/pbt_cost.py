"""What ``--pbt`` costs the protocol: the same population trained as independent seeds and as
a PBT population, alternated (A B B A ...) in one session so that the machine's load falls on
both; each run a fresh ``scripts/train_all_seeds.py`` process (``--no-render``).

python benchmarks/pbt_cost.py --repeats 2 --json benchmarks/results/pbt_cost_cpu.json

Recorded per run: the process's wall and CPU time, the manifest's compile time and training
time (wall less compilation); the ratio is PBT / seeds of each, over the pairs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _protocol_ab import measure_and_record  # noqa: E402

from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--repeats", type=positive_int, default=2, help="pairs of runs (PBT, seeds), alternated")
    parser.add_argument("--tasks", nargs="+", default=["swing", "hrv"], help="--tasks of every run")
    parser.add_argument("--steps", type=positive_int, default=200_000, help="--steps of every run")
    parser.add_argument("--population", type=positive_int, default=8, help="members (PBT) and seeds (the other)")
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    seeds = [str(seed) for seed in range(args.population)]
    common = ["--tasks", *args.tasks, "--steps", str(args.steps), "--seeds", *seeds]
    measure_and_record(["--pbt"], common, args.repeats, "ratio_pbt_over_seeds", args.json, with_key="with")
    return 0


if __name__ == "__main__":
    sys.exit(main())
