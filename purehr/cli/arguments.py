"""What every script's command line shares: a help formatter that shows each flag's default
next to its help, and one spelling rule for boolean values."""

from __future__ import annotations

import argparse
from pathlib import Path

from purehr.run.store.files import check_output_file

TRUE_WORDS = ("true", "yes", "1", "on")
FALSE_WORDS = ("false", "no", "0", "off")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's examples as written and ends every option's help with its
    default: ``(default: 0 1 2)``, ``(default: off)`` for a switch, ``(required)``, or
    ``(default: not set)``. A help text that already states its default is left alone."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.default is argparse.SUPPRESS or "default" in text.lower():
            return text
        if action.required:
            return f"{text} (required)"
        return f"{text} (default: {describe_default(action)})"


def describe_default(action: argparse.Action) -> str:
    """A flag's default as a user would type it (``%`` escaped for argparse's formatting)."""
    default = action.default
    if isinstance(default, bool) and action.nargs == 0:
        return "on" if default else "off"
    if default is None:
        return "not set"
    if isinstance(default, (list, tuple)):
        default = " ".join(map(str, default))
    return str(default).replace("%", "%%")


def parse_bool(text: str) -> bool:
    """``true/false``, ``yes/no``, ``1/0``, ``on/off`` in any case; anything else is refused
    with the accepted spellings (argparse prints it as a usage error, not a traceback)."""
    word = str(text).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a boolean; expected one of {'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)}"
    )


parse_bool.__name__ = "boolean"  # argparse names the type in some messages


def output_file(text: str) -> Path:
    """``type=`` of an output-file flag: :func:`check_output_file` as a usage error."""
    try:
        return check_output_file(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def positive_int(text: str) -> int:
    """``type=`` of a count that must be at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; expected a positive integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: expected a positive integer (1 or more)")
    return value


def non_negative_int(text: str) -> int:
    """``type=`` of a count or a seed that may be 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; expected an integer >= 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: expected an integer >= 0")
    return value


output_file.__name__ = "output file"
positive_int.__name__ = "positive integer"
non_negative_int.__name__ = "integer >= 0"


def task_name(text: str) -> str:
    """An argparse type: a task name ``get_task`` resolves (swing, hrv, a registered task,
    <suite>:<environment>, module:factory); a usage error with the registry's message (the
    choices) otherwise."""
    from purehr.tasks import get_task

    try:
        get_task(text)
    except (ValueError, TypeError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text
