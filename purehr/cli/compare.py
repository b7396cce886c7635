"""Compare two or more recorded runs on the tasks they share: per task and metric the IQM of
each run, the difference of IQMs and the probability of improvement with 95% stratified bootstrap
intervals, a one-line verdict ("no detectable difference" when the difference's interval covers
zero), and the aggregate and performance profiles of the return normalised between each task's
floor and reference policy. The first run is compared with each of the others.

    python scripts/compare.py results/protocol results/algorithms/raw/pqn_hrv_600k_defaults_dense.json
    python scripts/compare.py RUN_A RUN_B --label ppo --label pqn --json

A run is a run directory or a study's JSON record (studies/scripts/robustness_study.py,
algorithm_study.py). Runs whose held-out episodes differ (other task arguments, evaluation
episodes or baseline scores) are refused, naming the difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command's flags; ``prog`` names it in the usage line (None: the script's file name)."""
    from purehr.cli.arguments import HelpFormatter

    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories or study JSON records (two or more)")
    parser.add_argument(
        "--label",
        action="append",
        default=None,
        help="a name for each run, in order (default: its folder or file name)",
    )
    parser.add_argument(
        "--unchecked-episodes",
        action="store_true",
        help="compare runs whose held-out episodes cannot be checked (not recorded); never runs whose episodes differ",
    )
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replicates, 200 to 100,000")
    parser.add_argument(
        "--figure",
        default=None,
        metavar="PATH",
        help="also draw the performance profiles side by side to PATH (.png or .pdf; an existing file is refused)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (NaN as null)")
    return parser


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """``scripts/compare.py`` (``prog`` None) or ``purehr compare`` (``prog`` "purehr compare")."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error(f"give two or more runs to compare, got {len(args.runs)}")
    if args.label is not None and len(args.label) != len(args.runs):
        parser.error(f"--label given {len(args.label)} times for {len(args.runs)} runs: one per run, in order")
    labels = args.label or [None] * len(args.runs)
    if len(set(filter(None, labels))) != len(list(filter(None, labels))):
        parser.error(f"--label {labels}: each run needs its own name")
    if args.figure is not None and (Path(args.figure).suffix not in (".png", ".pdf") or Path(args.figure).exists()):
        state = "exists (not overwritten)" if Path(args.figure).exists() else "is neither .png nor .pdf"
        parser.error(f"--figure {args.figure} {state}")
    if not 200 <= args.reps <= 100_000:
        parser.error(f"--reps {args.reps}: expected 200 to 100,000 bootstrap replicates")
    from purehr.reports.analysis import to_json_safe
    from purehr.reports.comparison import compare_runs, comparison_text
    from purehr.reports.scores import read_scores

    try:
        runs = [read_scores(path, label) for path, label in zip(args.runs, labels)]
        names = [run.label for run in runs]
        if len(set(names)) != len(names):
            runs = [
                read_scores(path, f"{run.label} ({index})") for index, (path, run) in enumerate(zip(args.runs, runs), 1)
            ]
        comparison = compare_runs(runs, allow_unchecked=args.unchecked_episodes, reps=args.reps)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.figure is not None:
        from purehr.viz.statistics_figures import comparison_figure

        try:
            comparison_figure(comparison).savefig(args.figure, bbox_inches="tight", dpi=150)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(to_json_safe(comparison), indent=2, allow_nan=False))
    else:
        print(comparison_text(comparison), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
