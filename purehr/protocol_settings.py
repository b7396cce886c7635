"""The protocol's own settings for a task: how often a run checkpoints and how many held-out
episodes judge it. They belong to neither the algorithm nor the environment: every algorithm is
checkpointed and judged the same way. Each task has its defaults (``Task.default_protocol``);
the command line's flags and a run's manifest (``protocol_settings {task: fields}``) carry them.

No JAX here: the command line's ``--help`` reads the fields and their help."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

MAX_HELDOUT_EPISODES = 100_000
"""The largest held-out evaluation that scripts/evaluate.py, ``PPOModel.evaluate`` and a task's
``eval_episodes`` / ``quick_eval_episodes`` accept: every episode runs at once on the device
(vmapped), and 10^8 swing episodes asked XLA for 354 GB (about 3.5 kB each), so this bound
keeps a request near 0.35 GB."""


def with_help(default, help: str, *, traced: bool = False, bounds: str | None = None, choices: tuple = ()):
    """A config field declared once: its default, its help (the text of its command-line flag), and
    what ``purehr.algorithms.config_types.ConfigFields`` checks and builds from it: ``traced`` (the
    training state carries it as a float32 array: a sweep vmaps it, PBT explores it), ``bounds``
    (``">0"``, ``">=0"``, ``"[0,1]"``; an int is positive unless ``">=0"``, a size tuple non-empty
    unless ``"may be empty"``) and ``choices`` (a string's). Its kind is its annotation's."""
    metadata = {"help": help, "traced": traced, "bounds": bounds, "choices": tuple(choices)}
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class ProtocolSettings:
    checkpoint_interval: int = with_help(50_000, "environment steps between checkpoints")
    eval_episodes: int = with_help(100, "held-out episodes of a full evaluation")
    full_eval_interval: int = with_help(1, "every N-th checkpoint gets the full evaluation; the others the quick one")
    """Every ``full_eval_interval``-th checkpoint target (and the first and last) gets the full
    held-out evaluation and a showcase episode; the targets between evaluate only
    ``quick_eval_episodes`` fixed episodes. 1 = full evaluation at every checkpoint."""
    quick_eval_episodes: int = with_help(100, "held-out episodes of a quick evaluation")
    group_quick_evaluations: bool = with_help(
        False,
        "evaluate the quick checkpoints between two full ones together, at the full one (one "
        "evaluation's length instead of one each: an accelerator's cost); a resume goes back to the "
        "last full checkpoint",
    )
    """With ``full_eval_interval`` > 1, each quick checkpoint's state waits on the host and its
    parameters are evaluated, vmapped with the others of its group, at the next full checkpoint,
    where the group's saves and rows are written in order (docs/protocol.md, "Grouped quick
    evaluations"). The states are the same, the quick statistics to float32 rounding; a kill or Ctrl-C
    loses the group's pending checkpoints. Not with ``--pbt`` (its fitness reads each
    evaluation at its checkpoint) nor W&B (it takes no step back)."""
    report_candidates: int = with_help(
        1,
        "each seed reports the checkpoint among its last N that does best on validation starts, "
        "evaluated again on the held-out ones (1: the last checkpoint, no validation)",
    )
    """After training, each seed's last ``report_candidates`` checkpoints are evaluated on
    ``validation_episodes`` validation episodes (the held-out evaluation drawn with another seed:
    the same distribution, never the held-out starts); the best (success, then speed, then the
    later) is what the run reports, by its held-out evaluation (docs/protocol.md, "The reported
    checkpoint"; ``purehr.run.choose_reported``)."""
    validation_episodes: int = with_help(20, "validation episodes per candidate checkpoint (report_candidates > 1)")

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type == "bool":
                if not isinstance(value, bool) and not _numpy_bool(value):
                    raise ValueError(f"{field.name}={value!r}: expected true or false, got {type(value).__name__}")
                object.__setattr__(self, field.name, bool(value))
                continue
            if isinstance(value, bool) or not isinstance(value, int) and not _numpy_integer(value):
                raise ValueError(f"{field.name}={value!r}: expected a positive integer, got {type(value).__name__}")
            if value <= 0:
                raise ValueError(f"{field.name}={value!r}: expected a positive integer")
            object.__setattr__(self, field.name, int(value))
        for name in ("eval_episodes", "quick_eval_episodes", "validation_episodes"):
            if getattr(self, name) > MAX_HELDOUT_EPISODES:
                raise ValueError(
                    f"{name}={getattr(self, name)!r}: expected at most {MAX_HELDOUT_EPISODES:,} "
                    "(every held-out episode runs at once on the device)"
                )
        if self.full_eval_interval > 1 and self.quick_eval_episodes > self.eval_episodes:
            raise ValueError(
                f"quick_eval_episodes={self.quick_eval_episodes}: expected at most eval_episodes={self.eval_episodes}"
            )

    def replace(self, **changes: Any) -> ProtocolSettings:
        unknown = set(changes) - set(PROTOCOL_FIELDS)
        if unknown:
            raise ValueError(f"unknown protocol setting(s) {sorted(unknown)}; expected some of {list(PROTOCOL_FIELDS)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, int | bool]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProtocolSettings:
        return cls().replace(**data)


PROTOCOL_FIELDS = tuple(field.name for field in dataclasses.fields(ProtocolSettings))


def split_settings(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``values`` by owner: (the algorithm's fields, the protocol's). A run recorded before the
    protocol had its own settings holds both in ``configs {task: ...}``; so do flags and overrides."""
    protocol = {name: value for name, value in values.items() if name in PROTOCOL_FIELDS}
    return {name: value for name, value in values.items() if name not in PROTOCOL_FIELDS}, protocol


def refuse_protocol_settings(owner: str, **given: Any) -> None:
    """``ValueError`` for a protocol setting given to an algorithm's config (``SACConfig(eval_episodes=40)``;
    only ``PPOConfig`` keeps the four it held before they had an owner, ``without_legacy_settings``),
    naming where it goes instead."""
    for name, value in given.items():
        if value is not None:
            raise ValueError(
                f"{owner}({name}={value!r}): {name} is a protocol setting, the task's, not the algorithm's; "
                f"expected it in the task module's PROTOCOL = ProtocolSettings({name}={value!r}) "
                f"(docs/environments.md), environment_task(..., default_protocol=...), or --{name.replace('_', '-')}"
            )


def without_legacy_settings(config):
    """(``config`` without the protocol settings it was written with, those settings): a config
    written when they were its fields (``PPOConfig(checkpoint_interval=...)``) still builds and
    keeps them in ``legacy_protocol``; a run applies them over the task's."""
    legacy = dict(getattr(config, "legacy_protocol", None) or {})
    return (config.replace(**dict.fromkeys(legacy)) if legacy else config), legacy


def _numpy_bool(value: Any) -> bool:
    return type(value).__module__ == "numpy" and getattr(value, "dtype", None) is not None and value.dtype.kind == "b"


def _numpy_integer(value: Any) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.dtype.kind in "iu"
