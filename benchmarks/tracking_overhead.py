"""What ``--log tensorboard wandb`` costs the protocol: the same run with and without the
dashboards, alternated (A B B A ...) in one session so that the machine's load falls on both.

python benchmarks/tracking_overhead.py --repeats 2 --json benchmarks/results/tracking_overhead.json
python benchmarks/tracking_overhead.py --steps 100000 --seeds 0 1     # quicker, smaller

Each run is a fresh ``scripts/train_all_seeds.py`` process (``--no-render``; the dashboards'
end-of-run table and figures are published all the same). Recorded per run: the wall time of
the process, and the manifest's training time (wall time less compilation), which is where
the logging happens, and the CPU time of the process (less sensitive than wall time to what
else the shared machine runs); the ratio is logged / plain of each, over the pairs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _protocol_ab import measure_and_record  # noqa: E402

from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402

LOGGED = ["--log", "tensorboard", "wandb"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--repeats", type=positive_int, default=2, help="pairs of runs (logged, plain), alternated")
    parser.add_argument(
        "--steps", type=positive_int, default=None, help="--steps of every run (default: the protocol's)"
    )
    parser.add_argument("--seeds", nargs="+", default=None, help="--seeds of every run (default: the protocol's)")
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    extra = (["--steps", str(args.steps)] if args.steps else []) + (["--seeds", *args.seeds] if args.seeds else [])
    measure_and_record(LOGGED, extra, args.repeats, "ratio_logged_over_plain", args.json, with_key="logged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
