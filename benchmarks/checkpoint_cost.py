"""What a run's checkpoints cost (issue 49): the same ``scripts/train_all_seeds.py`` run with its
default checkpoint interval and with ``--checkpoint-interval 100000000`` (checkpoints at the
start and the end only), alternated in one session (``_protocol_ab``). The training states are
the same; the difference in training time (wall time less compilation) is the checkpoints':
their held-out evaluations, showcases, saves, digests and rows.

python benchmarks/checkpoint_cost.py --json benchmarks/results/checkpoint_cost.json   # swing alone, 5 seeds
python benchmarks/checkpoint_cost.py --steps 500000 --repeats 1                       # shorter
python benchmarks/checkpoint_cost.py --against grouped --steps 500000                 # grouped quick evaluations

``ratio_sparse_over_default`` < 1: the checkpoints' share of the default run is 1 - ratio.
``--against grouped`` pairs the default run with ``--group-quick-evaluations true`` instead
(``ratio_grouped_over_default``: the same states and rows, the quick evaluations grouped)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _protocol_ab import measure_and_record  # noqa: E402

from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402

AGAINST = {"sparse": ["--checkpoint-interval", "100000000"], "grouped": ["--group-quick-evaluations", "true"]}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["swing"], help="--tasks of every run")
    parser.add_argument("--repeats", type=positive_int, default=1, help="pairs of runs, alternated")
    parser.add_argument("--steps", type=positive_int, default=None, help="--steps (default: the task's)")
    parser.add_argument("--seeds", nargs="+", default=None, help="--seeds (default: the protocol's)")
    parser.add_argument(
        "--against",
        choices=tuple(AGAINST),
        default="sparse",
        help="what the default run is paired with: checkpoints at the start and end only, or grouped quick evaluations",
    )
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more flags for every run (last)")
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    common = ["--tasks", *args.tasks] + (["--steps", str(args.steps)] if args.steps else [])
    common += (["--seeds", *args.seeds] if args.seeds else []) + list(args.extra)
    ratio_name = f"ratio_{args.against}_over_default"
    measure_and_record(AGAINST[args.against], common, args.repeats, ratio_name, args.json, with_key=args.against)
    return 0


if __name__ == "__main__":
    sys.exit(main())
