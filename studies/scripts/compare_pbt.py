"""Does population-based training pay? PBT against the default configuration's seeds and the
best cell of a grid of the same compute, on one task at the same total environment steps.

    python studies/scripts/compare_pbt.py --task swing --steps 1000000 --population 8 --pbt-runs 3 --out results/pbt

Writes to --out: comparison.csv (per arm: steps to held-out success >= 0.95 and the task's speed
at the end, mean and 95% t interval), comparison.md (the table), comparison.json (command,
machine, load, settings, every member's outcome, timing) and the runs themselves under runs/
(delete them after reading; results/pbt keeps only the tables and figures). docs/pbt.md reads
the answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed

ROOT = Path(__file__).resolve().parents[2]


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--task", default="swing", choices=["swing", "hrv"], help="the task compared")
    parser.add_argument("--steps", type=int, default=1_000_000, help="environment steps per member, seed and cell")
    parser.add_argument("--population", type=int, default=8, help="members, seeds and grid cells per arm")
    parser.add_argument("--pbt-runs", type=int, default=3, help="independent PBT runs (disjoint seeds)")
    parser.add_argument("--pbt-interval", type=int, default=2, help="the PBT step at every k-th checkpoint target")
    parser.add_argument("--out", type=Path, required=True, help="output directory (new or empty)")
    parser.add_argument(
        "--tables-only",
        action="store_true",
        help="train nothing: write comparison.csv and comparison.md again from --out's comparison.json",
    )
    return parser


def write_tables(out: Path, members: dict, population: int, task: str) -> str:
    from purehr.run.store.files import atomic_write_text, write_csv
    from studies.pbt_comparison import format_table, summarise

    rows = summarise(members, population)
    write_csv(out / "comparison.csv", list(rows[0]), rows)
    table = format_table(rows, task)
    atomic_write_text(out / "comparison.md", table + "\n")
    return table


def _members_from_json(members: dict) -> dict:
    """comparison.json's members with their seeds as integers again (JSON keys are text)."""
    return {
        arm: outcomes if arm.startswith("grid") else {int(k): v for k, v in outcomes.items()}
        for arm, outcomes in members.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tables_only:
        record = json.loads((args.out / "comparison.json").read_text())
        print(write_tables(args.out, _members_from_json(record["members"]), record["population"], record["task"]))
        return 0
    if args.out.exists() and any(args.out.iterdir()):
        parser.exit(2, f"error: --out {args.out} is not empty; choose a new directory\n")
    if args.pbt_runs < 2 or args.steps <= 0:
        parser.exit(2, f"error: --pbt-runs {args.pbt_runs} (>= 2, for an interval) and --steps {args.steps} (> 0)\n")
    from purehr.population import PBTSettings
    from purehr.run.store.files import atomic_write_json
    from purehr.run.store.machine import environment_description, load_average
    from studies.pbt_comparison import compare

    try:
        pbt = PBTSettings.checked(interval=args.pbt_interval)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    load_before = load_average()
    result = compare(args.task, args.steps, args.population, args.pbt_runs, args.out, pbt)
    table = write_tables(args.out, result["members"], args.population, args.task)
    record = dict(
        command=[sys.executable, *(sys.argv if argv is None else ["studies/scripts/compare_pbt.py", *argv])],
        machine=environment_description(),
        load_average_before=load_before,
        pbt=pbt.to_dict(),
        task=args.task,
        steps=args.steps,
        population=args.population,
        **result,
    )
    atomic_write_json(args.out / "comparison.json", json.loads(json.dumps(record, default=float)))
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
