"""MkDocs hook: the reference pages' generated parts, read from the code at build time.

``<!-- purehr-help: COMMAND -->`` becomes ``purehr COMMAND --help`` (the command's own parser);
``<!-- purehr-fields: module:Class -->`` a table of a config dataclass's fields (name, default,
help: the help that sits beside each field); ``<!-- purehr-config-keys -->`` the top-level keys a
``--config`` file takes (``purehr train``'s long flags). So the flags and keys in the docs are
the code's, never a copy that can drift."""

from __future__ import annotations

import dataclasses
import importlib
import os
import re

MARKER = re.compile(r"<!-- purehr-(help|fields|config-keys):?\s*([\w.:]*)\s*-->")
WIDTH = "100"  # argparse wraps at $COLUMNS: fixed, so the page is the same on every terminal


def _help(command: str) -> str:
    from purehr.cli.main import COMMANDS

    if command not in COMMANDS:
        raise ValueError(f"purehr-help: unknown command {command!r}; expected one of {sorted(COMMANDS)}")
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parser = importlib.import_module(COMMANDS[command][0]).build_parser(prog=f"purehr {command}")
        text = parser.format_help()
    finally:
        if previous is None:
            os.environ.pop("COLUMNS")
        else:
            os.environ["COLUMNS"] = previous
    return f"```text\n{text.rstrip()}\n```"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _fields(target: str) -> str:
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module), name)
    rows = ["| field (`--flag`) | default | what it sets |", "| --- | --- | --- |"]
    for field in dataclasses.fields(cls):
        if field.name.startswith("_"):
            continue
        default = field.default if field.default is not dataclasses.MISSING else "(required)"
        if not field.metadata.get("help"):  # the reference would show an empty cell: the field's help is missing
            raise ValueError(f"{target}.{field.name} has no help beside it (dataclasses.field metadata 'help')")
        flag = "--" + field.name.replace("_", "-")
        rows.append(f"| `{field.name}` (`{flag}`) | `{_cell(default)}` | {_cell(field.metadata['help'])} |")
    return "\n".join(rows)


def _config_keys() -> str:
    """The keys ``purehr.cli.config_file`` reads: each long flag of ``purehr train`` but --help and
    --config, dashes as underscores."""
    from purehr.cli.config_file import _flag_actions
    from purehr.cli.train import build_parser

    return ", ".join(f"`{key}`" for key in sorted(_flag_actions(build_parser())))


def on_page_markdown(markdown: str, **_) -> str:
    def generated(match: re.Match) -> str:
        kind, argument = match.groups()
        if kind == "help":
            return _help(argument)
        if kind == "fields":
            return _fields(argument)
        return _config_keys()

    markdown = MARKER.sub(generated, markdown)
    if "<!-- purehr-" in markdown:  # a marker this hook does not know would vanish from the page unseen
        line = markdown[markdown.index("<!-- purehr-") :].split("\n", 1)[0]
        raise ValueError(f"unknown generated-reference marker {line!r}; expected purehr-help, -fields or -config-keys")
    return markdown
