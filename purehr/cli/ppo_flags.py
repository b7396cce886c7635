"""Command-line flags generated from ``PPOConfig``: one rule for every script, so a new config
field gets its flag, type and help everywhere at once."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from purehr.cli.arguments import parse_bool
from purehr.ppo.config import BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, SIZES_FIELDS, PPOConfig

DEST_PREFIX = "ppo_"
FIELDS = tuple(field.name for field in dataclasses.fields(PPOConfig))
FIELD_HELP = {field.name: field.metadata["help"] for field in dataclasses.fields(PPOConfig)}
"""Each field's help, declared beside it in ``PPOConfig`` (``with_help``)."""


def layer_sizes(text: str) -> tuple[int, ...]:
    """``64,64`` -> (64, 64): one network shape as one word, for flags that take several shapes."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated layer sizes such as 64,64") from None
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive layer sizes")
    return sizes


def _value_type(name: str, several: bool) -> Callable[[str], Any]:
    if name in SIZES_FIELDS:
        return layer_sizes if several else int
    if name in BOOL_FIELDS:
        return parse_bool
    return int if name in INT_FIELDS else float if name in FLOAT_FIELDS else str


def add_config_flags(
    group: argparse._ActionsContainer,
    fields: Iterable[str],
    *,
    several: bool = False,
    default_note: Callable[[str], str] = lambda name: "",
) -> None:
    """``--<field>`` for each named ``PPOConfig`` field (stored as ``ppo_<field>``, None when
    not given). ``several``: each flag takes one or more values (a sweep's axis; a layer-width
    tuple is then written 64,64); otherwise one value (a layer-width tuple as 64 64)."""
    for name in fields:
        if name not in FIELDS:
            raise ValueError(f"{name!r} is not a PPOConfig field")
        sizes = name in SIZES_FIELDS
        metavar = ("SIZES" if sizes else "VALUE") if several else name.upper()
        example = (" each written 64,64" if several else ", e.g. 64 64") if sizes else ""
        group.add_argument(
            f"--{name.replace('_', '-')}",
            dest=f"{DEST_PREFIX}{name}",
            default=None,
            type=_value_type(name, several),
            nargs="+" if several or sizes else None,
            metavar=metavar,
            help=f"{FIELD_HELP[name]}{example}{default_note(name)}",
        )


def config_values(args: argparse.Namespace, *, several: bool = False) -> dict[str, Any]:
    """{field: value} of the generated flags the command line gave (a layer-width list as a
    tuple); with ``several``, {field: list of values}."""
    given = {
        name[len(DEST_PREFIX) :]: value
        for name, value in vars(args).items()
        if name.startswith(DEST_PREFIX) and value is not None
    }
    if several:
        return given
    return {name: tuple(value) if isinstance(value, list) else value for name, value in given.items()}
