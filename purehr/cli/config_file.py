"""``--config FILE`` (scripts/train_all_seeds.py): a run's flags from a TOML file, or from a
run's ``manifest.json`` to repeat it (docs/how-to/config_files.md).

The file's top-level keys are the script's long flags (underscores or dashes); its ``[task.NAME]``
sections hold one task's config fields, and ``[task.NAME.env]`` its environment's keyword
arguments. Every value goes through the flag's own argparse type, so a bad one is refused as
the flag would refuse it; flags given beside the file override it. The resolved settings are
recorded in the manifest (``run_config``), which ``--config RUN/manifest.json`` reads back."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

from purehr.cli.ppo_flags import DEST_PREFIX, FIELDS, config_values
from purehr.cli.profile_flags import profile_layer
from purehr.run.planning.settings import SettingsLayer
from purehr.tasks import TASK_NAMES
from purehr.tasks.profiles import PROFILES

TASK_SECTION = "task"
ENV_SECTION = "env"
NOT_IN_FILE = ("help", "config")
NOT_RECORDED = ("resume", "overwrite", "run_name", "run_dir", "distributed", "coordinator_address")
NOT_RECORDED += ("num_processes", "process_id")
"""What says where and how this invocation runs, not what it trains: a repeat chooses them anew."""


@dataclasses.dataclass(frozen=True)
class ResolvedArgs:
    """The parsed flags; ``task_overrides`` from the file's sections; ``record``: what the manifest
    keeps (``run_config``); ``source_line``: where the settings came from, for the plan; ``path``:
    the file; ``file_keys``: its top-level keys (as a file writes them) the command line does not give
    (both set on ``args`` too, as ``config_path`` and ``file_keys``)."""

    args: argparse.Namespace
    task_overrides: dict[str, dict[str, Any]]
    record: dict[str, Any]
    source_line: str | None
    path: Path | None = None
    file_keys: frozenset[str] = frozenset()


def parse_with_config(parser: argparse.ArgumentParser, argv: list[str] | None) -> ResolvedArgs:
    """The command line over ``--config``'s file (when given); a bad file, key or value is a
    usage error (exit 2, one line) before anything is read or written but the file."""
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    given = parser.parse_args(argv)
    if given.config is None:
        given.config_path, given.file_keys = None, frozenset()
        return ResolvedArgs(given, {}, _record(parser, given, {}, None), None)
    path = Path(given.config)
    try:
        table, digest = read_table(path)
        tokens, sections = file_tokens(parser, table, path)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    args = _parse_as(parser, tokens, f"{path}: ")
    args = parser.parse_args(argv, namespace=args)  # the command line wins
    on_command_line = command_line_flags(parser, argv)
    try:
        task_overrides = _task_values(parser, sections, path, on_command_line)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    in_file = {key.replace("-", "_") for key in table} | {
        key.replace("-", "_") for section in sections.values() for key in section
    }
    overriding = [words for key, words in on_command_line.items() if key in in_file]
    line = f"from {path}" + (f"; {' '.join(overriding)} given on the command line overrides it" if overriding else "")
    record = _record(parser, args, sections, (path, digest), on_command_line)
    file_keys = frozenset(key.replace("-", "_") for key in table) - set(on_command_line) - {TASK_SECTION}
    args.config_path, args.file_keys = path, file_keys  # where the settings' sources come from (the plan's)
    return ResolvedArgs(args, task_overrides, record, line, path, file_keys)


def read_table(path: Path) -> tuple[dict[str, Any], str]:
    """(the settings, the file's SHA-256): a TOML file's table, or a manifest's ``run_config``."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"--config {path}: cannot be read ({error.strerror or error})") from None
    digest = hashlib.sha256(data).hexdigest()
    if path.suffix == ".json":
        try:
            record = json.loads(data).get("run_config")
        except (ValueError, AttributeError):
            raise ValueError(f"--config {path}: not a run's manifest.json (not a JSON object)") from None
        if not isinstance(record, dict) or not isinstance(record.get("values"), dict):
            raise ValueError(
                f"--config {path}: records no run_config (a run started by scripts/train_all_seeds.py "
                "records it); expected a .toml file or such a manifest.json"
            )
        return record["values"], digest
    try:
        return tomllib.loads(data.decode("utf-8")), digest
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"--config {path}: not valid TOML ({error})") from None


def _flag_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each long flag by its key in a file (``learning_rate``), without help and --config."""
    actions = {}
    for action in parser._actions:
        for option in action.option_strings:
            key = option.lstrip("-").replace("-", "_")
            if option.startswith("--") and key not in NOT_IN_FILE:
                actions[key] = action
    return actions


def _unknown(key: str, where: str, known) -> ValueError:
    return ValueError(f"{where}: unknown key {key!r}; expected one of: {', '.join(sorted(known))}")


def file_tokens(parser, table: dict[str, Any], path: Path) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(the top-level keys as command-line words, the ``[task.NAME]`` sections); an unknown key
    is refused naming it and the known ones."""
    actions = _flag_actions(parser)
    _refuse_two_spellings(table, f"--config {path}")
    tokens: list[str] = []
    sections = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name == TASK_SECTION:
            sections = _sections(value, path, actions)
            continue
        if name not in actions:
            raise _unknown(key, f"--config {path}", [*actions, f"[{TASK_SECTION}.NAME]"])
        tokens += flag_words(actions[name], value, f"--config {path}: {key}")
    for task, section in sections.items():
        for env_key, env_value in section.get(ENV_SECTION, {}).items():
            tokens += ["--env-arg", task, f"{env_key}={json.dumps(env_value)}"]
    return tokens, sections


def _sections(value, path: Path, actions) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ValueError(f"--config {path}: {TASK_SECTION} holds [{TASK_SECTION}.NAME] sections, one per task")
    for task, section in value.items():
        _refuse_two_spellings(section, f"--config {path} [{TASK_SECTION}.{task}]")
        for key, field in section.items():
            if key == ENV_SECTION:
                if not isinstance(field, dict):
                    raise ValueError(f"--config {path}: [{TASK_SECTION}.{task}.{ENV_SECTION}] must be a table")
                continue
            if key.replace("-", "_") not in FIELDS:
                raise _unknown(key, f"--config {path} [{TASK_SECTION}.{task}]", [*FIELDS, ENV_SECTION])
    return value


def _refuse_two_spellings(table: dict[str, Any], where: str) -> None:
    """One key written both ways (``learning_rate`` and ``learning-rate``) is refused: TOML keeps
    both, and whichever came last would win unseen."""
    seen: dict[str, str] = {}
    for key in table:
        name = key.replace("-", "_")
        if name in seen:
            raise ValueError(f"{where}: both {seen[name]!r} and {key!r} set {name}; keep one of them")
        seen[name] = key


def flag_words(action: argparse.Action, value: Any, where: str) -> list[str]:
    """One file value as the words the flag takes on a command line."""
    option = next(o for o in action.option_strings if o.startswith("--"))
    if action.nargs == 0:  # a switch
        if not isinstance(value, bool):
            raise ValueError(f"{where} = {value!r}: expected true or false")
        return [option] if value else []
    if isinstance(action, argparse._AppendAction):
        if not isinstance(value, list) or not all(isinstance(v, list) for v in value):
            raise ValueError(
                f"{where} = {value!r}: expected a list of [{', '.join(action.metavar or ['VALUE'])}] lists"
            )
        return [word for item in value for word in [option, *map(_word, item)]]
    if isinstance(value, dict):
        raise ValueError(f"{where}: expected a value, not a table")
    if action.nargs is None or action.nargs == "?":
        if isinstance(value, list):
            raise ValueError(f"{where} = {value!r}: expected one value, not a list")
        return [option, _word(value)]
    values = value if isinstance(value, list) else [value]
    if not values and action.nargs == "+":  # no words would leave the flag's default, unrecorded
        raise ValueError(f"{where} = []: expected at least one value, as {option} takes (or leave the key out)")
    return [option, *map(_word, values)]


def _word(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_as(parser: argparse.ArgumentParser, tokens: list[str], prefix: str) -> argparse.Namespace:
    """``tokens`` parsed by ``parser``, its usage errors prefixed (they name the file)."""
    original = parser.error
    parser.error = lambda message: original(f"{prefix}{message}")
    try:
        return parser.parse_args(tokens)
    finally:
        del parser.error


def _task_values(parser, sections, path: Path, on_command_line: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each section's config fields, typed by their flags; a field the command line gives is
    left to it (the command line applies to every task)."""
    actions = _flag_actions(parser)
    overrides = {}
    for task, section in sections.items():
        fields = {k.replace("-", "_"): v for k, v in section.items() if k != ENV_SECTION}
        values = {}
        for name, value in fields.items():
            if name in on_command_line:
                continue
            where = f"--config {path} [{TASK_SECTION}.{task}] {name}"
            words = flag_words(actions[name], value, where) if name in actions else []
            parsed = getattr(_parse_as(parser, words, f"{path} [{TASK_SECTION}.{task}]: "), DEST_PREFIX + name)
            values[name] = tuple(parsed) if isinstance(parsed, list) else parsed
        overrides[task] = values
    return {task: values for task, values in overrides.items() if values}


def command_line_flags(parser: argparse.ArgumentParser, argv: list[str]) -> dict[str, str]:
    """{file key: the words as typed} of each flag the command line gives (besides --config)."""
    by_option = {o: a for a in parser._actions for o in a.option_strings if o.startswith("--")}
    given: dict[str, list[str]] = {}
    current = None
    for word in argv:
        option = word.partition("=")[0]
        matches = [o for o in by_option if o == option] or [o for o in by_option if o.startswith(option)]
        if word.startswith("--") and len(matches) == 1:
            current = matches[0].lstrip("-").replace("-", "_")
            given.setdefault(current, []).append(word)
        elif current is not None and not word.startswith("-"):
            given[current].append(word)
    return {key: " ".join(words) for key, words in given.items() if key not in NOT_IN_FILE}


def _record(parser, args, sections, source, on_command_line=None) -> dict[str, Any]:
    """``run_config``: the file's path and SHA-256 (None without a file) and the resolved values
    that differ from the flags' defaults, as a file would hold them."""
    from_sections = [
        [task, f"{k}={json.dumps(v)}"] for task, s in sections.items() for k, v in s.get(ENV_SECTION, {}).items()
    ]
    values = {}
    for key, action in _flag_actions(parser).items():
        value = getattr(args, action.dest, None)
        if key == "env_arg" and value:  # the sections' environment arguments are recorded in them
            value = [item for item in value if list(item) not in from_sections] or None
        if key in NOT_RECORDED or value == action.default or value is None:
            continue
        values[key] = _jsonable(value)
    tasks = {}
    for task, section in sections.items():
        kept = {k: _jsonable(v) for k, v in section.items() if k.replace("-", "_") not in (on_command_line or {})}
        if kept:
            tasks[task] = kept
    if tasks:
        values[TASK_SECTION] = tasks
    path, digest = source if source else (None, None)
    return {"path": None if path is None else str(Path(path).resolve()), "sha256": digest, "values": values}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def settings_layers(args) -> tuple:
    """The sources of a ``purehr train`` run's field values, lowest first
    (``purehr.run.planning.settings``): a new run's profile (once chosen), the config file's top
    level and sections, the flags."""
    given = overrides_from_args(args)  # the file's top-level fields and the flags
    file_keys = getattr(args, "file_keys", frozenset())
    in_file = {name: value for name, value in given.items() if _flag_key(name) in file_keys}
    layers = []
    if not args.resume and args.profile in PROFILES:
        layers.append(profile_layer(args.profile, list(args.tasks or TASK_NAMES), args.algorithm))
    path, sections = getattr(args, "config_path", None), getattr(args, "task_overrides", None) or {}
    if path is not None or sections:
        layers.append(SettingsLayer(f"config file {path}" if path else "config file", in_file, sections))
    return (*layers, SettingsLayer("command line", {k: v for k, v in given.items() if k not in in_file}))


def _flag_key(field: str) -> str:
    """A config field's key in a config file: its flag's (``--steps`` sets ``total_timesteps``)."""
    return "steps" if field == "total_timesteps" else field


def overrides_from_args(args) -> dict:
    """The config fields the command line (and the config file's top level) gave (--steps is total_timesteps)."""
    overrides = config_values(args)
    if args.steps is not None:
        overrides["total_timesteps"] = args.steps
    return overrides
