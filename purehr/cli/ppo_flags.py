"""Command-line flags generated from the registered algorithms' config classes (``PPOConfig``
and the others ``purehr.algorithms.registry`` names: the union of their fields, a field several
share being one flag) and the protocol's settings (``ProtocolSettings``: checkpoint and
evaluation cadence): one rule for every script, so a new field gets its flag, type and help
everywhere at once. A flag's type is its field's declared type; the run gives each value to its
owner (``purehr.protocol_settings.split_settings``) and refuses one the entry's algorithm lacks
(``purehr.run.planning.settings.resolve_entry``)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from purehr.algorithms.registry import ALGORITHMS, DEFAULT_ALGORITHM
from purehr.cli.arguments import parse_bool
from purehr.protocol_settings import ProtocolSettings

DEST_PREFIX = "ppo_"


def _union_of_fields() -> tuple[tuple[dataclasses.Field, ...], dict[str, tuple[str, ...]]]:
    """(each field once: the default algorithm's first, then the others' new ones, then the
    protocol's; field -> the algorithms whose config has it)."""
    order = [DEFAULT_ALGORITHM, *(name for name in ALGORITHMS if name != DEFAULT_ALGORITHM)]
    fields: dict[str, dataclasses.Field] = {}
    owners: dict[str, list[str]] = {}
    for algorithm in order:
        for field in dataclasses.fields(ALGORITHMS[algorithm].config_class()):
            fields.setdefault(field.name, field)
            owners.setdefault(field.name, []).append(algorithm)
    return (*fields.values(), *dataclasses.fields(ProtocolSettings)), {k: tuple(v) for k, v in owners.items()}


CONFIG_FIELDS, FIELD_ALGORITHMS = _union_of_fields()
"""``FIELD_ALGORITHMS``: config field -> the algorithms it applies to (the protocol's settings
apply to every algorithm and are absent)."""
FIELDS = tuple(field.name for field in CONFIG_FIELDS)
FIELD_HELP = {field.name: field.metadata["help"] for field in CONFIG_FIELDS}
"""Each field's help, declared beside it in the config class (``with_help``)."""
FIELD_TYPES = {field.name: str(field.type) for field in CONFIG_FIELDS}
"""Each field's declared type as written (``int``, ``float``, ``bool``, ``str``, ``tuple[int, ...]``)."""


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
    declared = FIELD_TYPES[name]
    if declared.startswith("tuple"):  # layer widths
        return layer_sizes if several else int
    if declared == "bool":
        return parse_bool
    return {"int": int, "float": float}.get(declared, str)


def add_config_flags(
    group: argparse._ActionsContainer,
    fields: Iterable[str],
    *,
    several: bool = False,
    default_note: Callable[[str], str] = lambda name: "",
) -> None:
    """``--<field>`` for each named config field (stored as ``ppo_<field>``, None when
    not given). ``several``: each flag takes one or more values (a sweep's axis; a layer-width
    tuple is then written 64,64); otherwise one value (a layer-width tuple as 64 64)."""
    for name in fields:
        if name not in FIELDS:
            raise ValueError(f"{name!r} is not a field of a registered algorithm's config ({', '.join(ALGORITHMS)})")
        sizes = FIELD_TYPES[name].startswith("tuple")
        metavar = ("SIZES" if sizes else "VALUE") if several else name.upper()
        example = (" each written 64,64" if several else ", e.g. 64 64") if sizes else ""
        group.add_argument(
            f"--{name.replace('_', '-')}",
            dest=f"{DEST_PREFIX}{name}",
            default=None,
            type=_value_type(name, several),
            nargs="+" if several or sizes else None,
            metavar=metavar,
            help=f"{FIELD_HELP[name]}{example}{applies_to(name)}{default_note(name)}",
        )


def applies_to(name: str) -> str:
    """`` [ppo, pqn]``: the algorithms a flag applies to, where not every registered one has it."""
    owners = FIELD_ALGORITHMS.get(name)
    return "" if owners is None or len(owners) == len(ALGORITHMS) else f" [{', '.join(owners)} only]"


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
