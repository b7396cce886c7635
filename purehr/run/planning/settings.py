"""The one resolver of a run's settings: every field a task entry trains with (its algorithm's
config and the protocol's settings), and where each value came from.

Sources, lowest first; a later one wins, field by field:

    default        the algorithm's config class (``PPOConfig()``, ...) and ``ProtocolSettings()``
    task           the task's own defaults (``Task.settings_for``: a task module's ``PPO_CONFIG`` / ``PROTOCOL``)
    given config   a config passed whole (``train_all_seeds(configs={task: config})``)
    profile NAME   ``--profile``'s values for the entry (``purehr.tasks.profiles``)
    config file    ``--config FILE``'s top-level keys, then its ``[task.NAME]`` section for the entry
    command line   flags (every entry); in Python, ``overrides`` then ``task_overrides``

A new run starts from the task's defaults; a resume from its record (``recorded``, or the sources
its manifest keeps). The manifest records each entry's sources (``setting_sources``) and the plan
printed at the start names every value that is not the default with its source."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import DEFAULT_ALGORITHM, algorithm_of
from purehr.protocol_settings import ProtocolSettings, split_settings
from purehr.tasks import get_task

RECURRENT_FIELDS = ("recurrent_width", "recurrent_skip")
"""The fields of PPO's config only ``policy="gru"`` reads."""
DEFAULT, TASK, RECORDED = "default", "task", "recorded"


@dataclass(frozen=True)
class SettingsLayer:
    """One source's values: ``every_task`` for every entry, ``per_task`` (entry -> values) over them."""

    source: str
    every_task: dict[str, Any] = field(default_factory=dict)
    per_task: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_entry(self, entry: str) -> dict[str, Any]:
        return {**self.every_task, **self.per_task.get(entry, {})}


@dataclass(frozen=True)
class EntrySettings:
    """What one task entry trains with: its config, its protocol settings, and the source of
    every field whose value is not the default (field -> source)."""

    config: AlgorithmConfig
    protocol: ProtocolSettings
    sources: dict[str, str]


def entry_settings(entry: str, algorithm: str | None) -> tuple[AlgorithmConfig, ProtocolSettings]:
    """A new run's defaults for the task entry ``entry``: an ``@ALGORITHM`` entry's (``swing@sac``),
    else the task's for ``algorithm`` (``--algorithm``; None: PPO), refused before any work
    where the algorithm cannot act in the task's actions (``Task.config_for``)."""
    task = get_task(entry)
    if task.algorithm is not None:
        return task.settings_for(None)
    return task.settings_for(task.config_for(algorithm or DEFAULT_ALGORITHM, entry=entry))


def base_sources(source: str, *settings: AlgorithmConfig | ProtocolSettings) -> dict[str, str]:
    """``source`` for every field of ``settings`` (a config, protocol settings) that differs from
    its class default."""
    sources = {}
    for one in settings:
        defaults = type(one)()
        for item in dataclasses.fields(one):
            if getattr(one, item.name) != getattr(defaults, item.name):
                sources[item.name] = source
    return sources


def resolve_entry(
    entry: str,
    config: AlgorithmConfig,
    protocol: ProtocolSettings,
    sources: dict[str, str],
    layers: Sequence[SettingsLayer],
) -> EntrySettings:
    """``entry``'s settings: ``config`` and ``protocol`` (with ``sources``: where their values came
    from) under ``layers`` in order. A field the entry's algorithm lacks is refused naming its
    flags; values that make no config together are refused naming each one's source; a GRU field
    given to the feed-forward policy is refused (it would be recorded and change nothing)."""
    values: dict[str, Any] = {}
    given: dict[str, str] = {}
    for layer in layers:
        for name, value in layer.for_entry(entry).items():
            values[name], given[name] = value, layer.source
    algorithm_values, protocol_values = split_settings(values)
    check_entry_fields(entry, config, algorithm_values)
    try:
        resolved = config.replace(**algorithm_values)
    except ValueError as error:
        order = [layer.source for layer in layers]
        raise ValueError(_not_fitting(entry, error, algorithm_values, given, order)) from None
    recurrent = [name for name in RECURRENT_FIELDS if name in algorithm_values]
    if recurrent and getattr(resolved, "policy", "gru") != "gru":
        name = recurrent[0]
        raise ValueError(
            f"{name}={values[name]!r} applies to policy='gru'; task {entry!r} trains "
            f"policy={resolved.policy!r} (add --policy gru, or leave out --{name.replace('_', '-')})"
        )
    return EntrySettings(resolved, protocol.replace(**protocol_values), {**sources, **given})


def _not_fitting(entry: str, error: ValueError, values: dict[str, Any], given: dict[str, str], order: list[str]) -> str:
    """The refusal of values that make no config together, where more than one source gave them:
    each source's values, and the ways out (a profile's: ``--profile cpu``, or set its fields too)."""
    by_source: dict[str, list[str]] = {source: [] for source in order}
    for name, value in values.items():
        by_source[given[name]].append(f"{name}={value}")
    by_source = {source: words for source, words in by_source.items() if words}
    if len(by_source) < 2:
        return f"{entry}: {error}"
    said = "; ".join(f"{' '.join(words)} {_from(source)}" for source, words in by_source.items())
    profile = next((source for source in by_source if source.startswith("profile ")), None)
    if profile is None:
        return f"{entry}: {error}; {said}. Expected values that fit together"
    theirs = [word.partition("=")[0] for word in by_source[profile]]
    flags = " and ".join(f"--{name.replace('_', '-')}" for name in theirs)
    return (
        f"{entry}: {error}; {said}. Expected values that fit together: give --profile cpu (the task's defaults "
        f"under yours), or set {flags} too"
    )


def _from(source: str) -> str:
    if source.startswith("profile "):
        return f"from --{source}"
    return "given" if source in ("command line", "given") else f"from {source}"


def check_entry_fields(entry: str, config: AlgorithmConfig, given: dict[str, Any]) -> None:
    """``ValueError`` naming a field (a flag) that ``entry``'s algorithm's config lacks, the
    algorithm and its flags: a flag that would change nothing is refused, not ignored."""
    names = {f.name for f in dataclasses.fields(config)}
    for name in given:
        if name not in names:
            algorithm = algorithm_of(config).name
            flags = ", ".join(f"--{n.replace('_', '-')}" for n in sorted(names - {"total_timesteps"}))
            raise ValueError(
                f"--{name.replace('_', '-')} does not apply to task entry {entry!r}: it trains {algorithm}, "
                f"whose flags are {flags} (and --steps)"
            )


def sources_line(
    entry: str, config: AlgorithmConfig, protocol: ProtocolSettings, sources: dict[str, str]
) -> str | None:
    """The plan's line of ``entry``'s values that are not the defaults, by source (None: none)."""
    shown = {**config.to_dict(), **protocol.to_dict()}
    by_source: dict[str, list[str]] = {}
    for name, source in sources.items():
        value = shown.get(name)
        text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        by_source.setdefault(source, []).append(f"{name}={text}")
    if not by_source:
        return None
    return f"    {entry}: " + "; ".join(f"{source}: {' '.join(words)}" for source, words in by_source.items())
