"""Export a trained policy for use outside purehr: ONNX and a jax.export program of the
deterministic policy, contract.json and a model card (README.md), written only after the exported
policy acted as the JAX one on held-out observations (docs/how-to/export.md).

    purehr export results/protocol --task swing --seed 0 --step reported --format onnx --out swing_policy
    purehr export my_model --out my_policy            # a folder written by Model.save

Refused before anything is written: a step the run does not have, a diverged seed, a format whose
packages are not installed (pip install 'purehr[export]'), an output folder holding other files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _step(text: str) -> int | str:
    if text in ("reported", "latest"):
        return text
    try:
        return int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 'reported', 'latest' or a number of steps") from None


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command's flags; ``prog`` names it in the usage line (None: the script's file name)."""
    from purehr.cli.arguments import HelpFormatter
    from purehr.cli.cache_flags import add_compile_cache_flags

    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("source", type=Path, help="a run directory, or a saved model's folder (model.json)")
    parser.add_argument("--task", default=None, help="the run's task to export (a run directory only)")
    parser.add_argument("--seed", type=int, default=None, help="the run's seed to export (a run directory only)")
    parser.add_argument(
        "--step", type=_step, default="reported", help="'reported' (the run's reported checkpoint), 'latest' or steps"
    )
    parser.add_argument(
        "--format",
        dest="formats",
        nargs="+",
        choices=("onnx", "jax"),
        default=["onnx", "jax"],
        help="onnx (needs purehr[export]) and/or jax (a serialised jax.export program)",
    )
    parser.add_argument("--out", type=Path, required=True, help="a new or empty folder to write")
    parser.add_argument("--overwrite", action="store_true", help="replace a previous export in --out")
    parser.add_argument("--tolerance", type=float, default=None, help="largest action error allowed (default 1e-4)")
    add_compile_cache_flags(parser)
    return parser


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """``scripts/export_policy.py`` (``prog`` None) or ``purehr export``."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    from purehr.cli.cache_flags import start_compile_cache

    start_compile_cache(args, parser)
    from purehr.deploy.export import export
    from purehr.deploy.formats import MissingExportPackage
    from purehr.deploy.parity import TOLERANCE

    tolerance = TOLERANCE if args.tolerance is None else args.tolerance
    try:
        result = export(
            args.source,
            args.task,
            args.seed,
            args.step,
            out=args.out,
            formats=args.formats,
            tolerance=tolerance,
            overwrite=args.overwrite,
        )
    except (ValueError, FileExistsError, FileNotFoundError, MissingExportPackage) as error:
        parser.exit(2, f"error: {error}\n")
    parity = result.parity
    said = "; ".join(
        f"{name}: max abs error {parity[name]['max_abs_error']:.2e}, action agreement "
        f"{parity[name]['action_agreement']:.4f}"
        for name in result.contract["files"]
    )
    files = ", ".join(f"{d['file']} ({d['bytes']:,} bytes)" for d in result.contract["files"].values())
    print(
        f"wrote {args.out}: {files}, contract.json, README.md in {result.seconds['total']:.1f} s; parity on "
        f"{parity['observations']} held-out observations: {said}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
