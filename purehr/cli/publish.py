"""Copy a finished run into a small record for results/ (final checkpoints only).

python scripts/publish_run.py artifacts/protocol results/protocol

Before anything is written, every path in the run's CSVs must stay inside the run directory and
each seed's last checkpoint must restore and match its recorded state digest; otherwise nothing
is copied and the message names the cell, file or checkpoint.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command's flags; ``prog`` names it in the usage line (None: the script's file name)."""
    from purehr.cli.arguments import HelpFormatter

    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a finished run directory")
    parser.add_argument("record_dir", type=Path, help="where to write the record (must not exist)")
    return parser


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """``scripts/publish_run.py`` (``prog`` None) or ``purehr publish`` (``prog`` "purehr publish")."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    from purehr.reports.publish import publish_run

    try:
        written = publish_run(args.run_dir, args.record_dir)
    except (ValueError, FileExistsError, FileNotFoundError) as error:
        parser.exit(2, f"error: {error}\n")
    size = sum(path.stat().st_size for path in written)
    print(
        f"wrote {len(written)} files ({size / 1e6:.1f} MB) to {args.record_dir}; each seed's last checkpoint "
        "(and reported one, where the run chose another) verified against its state digest"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
