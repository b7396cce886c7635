"""Render a run directory: learning figures, final metrics and the swing training replay.

python scripts/render.py --run-dir artifacts/<run> [--tasks swing hrv] [--no-replay]
"""

from __future__ import annotations

import argparse
import sys

from purehr.cli.arguments import HelpFormatter
from purehr.cli.cache_flags import add_compile_cache_flags, start_compile_cache


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command's flags; ``prog`` names it in the usage line (None: the script's file name)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--run-dir", required=True, help="the run directory to render")
    parser.add_argument("--tasks", nargs="+", default=None, help="tasks to render (default: every task of the run)")
    parser.add_argument("--no-replay", action="store_true", help="skip the swing replay video and HTML player")
    add_compile_cache_flags(parser)
    return parser


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """``scripts/render.py`` (``prog`` None) or ``purehr render`` (``prog`` "purehr render")."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    start_compile_cache(args, parser)
    from purehr.reports.run_statistics import draw_statistics
    from purehr.run.store.files import RunDirectoryError
    from purehr.viz.render import render_run

    unwritable = _unwritable_figures(args.run_dir)
    if unwritable:
        print(f"render: {unwritable}", file=sys.stderr)
        return 2
    try:
        written = render_run(args.run_dir, tasks=args.tasks, replay=not args.no_replay)
        written += draw_statistics(args.run_dir)  # IQM curves and profiles (reports: above viz)
    except RunDirectoryError as error:
        print(f"render: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the disk filled up, or the folder went read-only, while rendering
        print(f"render: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


def _unwritable_figures(run_dir: str) -> str | None:
    """Why the run's ``figures/`` cannot be written (a read-only run directory: a published
    record, a mount), checked before any work; None when it can (or there is no run: refused next)."""
    from pathlib import Path

    from purehr.run.store.run_dir import FIGURES, check_run_directory_path

    run = Path(run_dir)
    if not run.is_dir():
        return None
    try:
        check_run_directory_path(run / FIGURES)
    except OSError as error:
        return (
            f"the figures go into {run / FIGURES}, which cannot be written ({error}); copy the run somewhere "
            f"you can write (cp -r {run} DIR) and render the copy"
        )
    return None


if __name__ == "__main__":
    sys.exit(main())
