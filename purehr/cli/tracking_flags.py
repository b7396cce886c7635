"""``--log`` and the dashboards' options, shared by the scripts that train (train_all_seeds,
sweep); what they give is checked by ``purehr.tracking.TrackingSettings``."""

from __future__ import annotations

import argparse

from purehr.tracking.settings import BACKENDS, DEFAULT_WANDB_PROJECT, WANDB_MODES, TrackingSettings


def add_tracking_flags(parser: argparse.ArgumentParser, *, directory_note: str) -> None:
    group = parser.add_argument_group("dashboards (besides the CSV logs, which are always written)")
    group.add_argument(
        "--log",
        nargs="+",
        default=[],
        choices=list(BACKENDS),
        metavar="BACKEND",
        help=f"log to these as it trains: {', '.join(BACKENDS)} (several at once; pip install -e '.[tracking]'); "
        "every step exactly once, also across a kill and --resume (docs/protocol.md, 'Watching a run')",
    )
    group.add_argument(
        "--log-dir", default=None, help=f"TensorBoard's directory (default: {directory_note}/tensorboard)"
    )
    group.add_argument(
        "--wandb-mode",
        choices=WANDB_MODES,
        default=None,
        help="W&B mode (default: WANDB_MODE if set, else offline: nothing leaves the machine until `wandb sync`)",
    )
    group.add_argument("--wandb-project", default=DEFAULT_WANDB_PROJECT, help="W&B project")
    group.add_argument("--wandb-entity", default=None, help="W&B entity (team or user; default: yours)")


def tracking_from_args(args) -> TrackingSettings:
    """The dashboards' settings the command line gives (checked: backends known and installed)."""
    return TrackingSettings(
        backends=tuple(args.log),
        log_dir=args.log_dir,
        wandb_mode=args.wandb_mode,
        wandb_project=args.wandb_project,
        wandb_entity=args.wandb_entity,
    ).validated()
