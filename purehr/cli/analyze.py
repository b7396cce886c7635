"""Print the training-performance analysis of a run directory (see purehr/reports/analysis.py).

    python scripts/analyze_run.py --run-dir artifacts/<run> [--json]

With --json, "robust" holds the robust statistics of the reported checkpoints (IQM and mean with 95%
bootstrap intervals, the normalised return's profile, sample-efficiency curves; purehr/reports/run_statistics.py).
Each metric is printed with its direction ("higher is better", ...) and a one-line meaning
(``purehr.reports.analysis.METRIC_GUIDE``; under "metric_guide" with --json). The logs are read
by the renderer's reader: a log that render.py refuses (a truncated row) is refused here too.
An undefined value prints as "-"; a metric the task does not measure (hrv's distance,
alignment and robustness for the swing; every success metric for an environment that defines
no success, such as gymnax's CartPole-v1) is left out of its table. Intervals are clipped to the
metric's range; "*" marks one of fewer than 3 seeds (or as wide as the range).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from purehr.reports.analysis import METRIC_GUIDE, analyze_run, to_json_safe
from purehr.reports.stats import UNINFORMATIVE_NOTE


def _format(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.4g}"


def format_bytes(count: float) -> str:
    """1.818e+09 -> '1.82 GB' (decimal units, as the manifest's byte count is read)."""
    if not math.isfinite(count):
        return "not recorded"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(count) >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count:.0f} bytes"


def _interval(summary: dict) -> str:
    if not math.isfinite(summary["ci_low"]):
        return "-"  # one seed: no interval
    return f"[{_format(summary['ci_low'])}, {_format(summary['ci_high'])}]" + ("*" if summary["uninformative"] else "")


def _print_table(analysis: dict) -> None:
    wall = analysis["wall_time_s"]
    print(
        f"run {analysis['run_dir']}: wall time {f'{wall:.4g} s' if math.isfinite(wall) else 'not recorded'}, "
        f"peak memory {format_bytes(analysis['peak_memory_bytes'])}"
    )
    marked = False
    for task, report in analysis["tasks"].items():
        seeds = list(report["seeds"])
        print(
            f"\n[{task}] seeds {seeds}; consistency (std of final reward over seeds) "
            f"{_format(report['consistency'])}; all-seed samples/s "
            f"{_format(report['samples_per_second_all_seeds'])}"
        )
        header = ["metric", "direction"] + [f"seed {seed}" for seed in seeds] + ["mean", "95% t interval", "meaning"]
        rows = [header]
        for name, summary in report["aggregate"].items():
            if name in report.get("not_measured", ()):
                continue
            direction, meaning = METRIC_GUIDE.get(name, ("", ""))
            rows.append(
                [name, direction]
                + [_format(report["seeds"][seed][name]) for seed in seeds]
                + [_format(summary["mean"]), _interval(summary), meaning]
            )
            marked = marked or rows[-1][-2].endswith("*")
        widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if report.get("not_measured"):
            print(f"not measured for {task}: {', '.join(report['not_measured'])}")
        if not report.get("defines_success", True):
            print(f"{task} defines no success (held-out success NaN at every checkpoint): judge it by its return")
    if marked:
        print(f"\n{UNINFORMATIVE_NOTE}")


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command's flags; ``prog`` names it in the usage line (None: the script's file name)."""
    from purehr.cli.arguments import HelpFormatter

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument(
        "--run-dir",
        required=True,
        help="run directory (manifest.json, <task>/seed_<n>/updates.csv and checkpoints.csv)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON (NaN as null)")
    return parser


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """``scripts/analyze_run.py`` (``prog`` None) or ``purehr analyze`` (``prog`` "purehr analyze")."""
    args = build_parser(prog).parse_args(argv)
    try:
        analysis = analyze_run(args.run_dir)
    except (FileNotFoundError, ValueError) as error:
        print(f"analyze_run: {error}", file=sys.stderr)
        return 2
    if args.json:
        guide = {
            name: {"direction": direction, "meaning": meaning} for name, (direction, meaning) in METRIC_GUIDE.items()
        }
        from purehr.reports.run_statistics import run_statistics
        from purehr.run.store.run_dir import read_manifest

        if read_manifest(Path(args.run_dir)).get("pbt") is None:  # PBT members are not independent seeds
            analysis["robust"] = run_statistics(args.run_dir)
        print(json.dumps(to_json_safe(dict(analysis, metric_guide=guide)), indent=2))
    else:
        _print_table(analysis)
    return 0


if __name__ == "__main__":
    sys.exit(main())
