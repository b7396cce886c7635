"""What every algorithm's config is built on (``ConfigFields``): each field declared once
(``purehr.protocol_settings.with_help``: default, help, traced, bounds, choices), and from that
one declaration its check, its flag and, for the traced fields, the pytree of hyperparameters.

Wrong types and non-finite numbers are refused by name before any value check reads them (a string
learning rate, a NaN discount, ``anneal_lr='no'``, which is truthy); numbers are normalised to
Python ``int``/``float`` and sizes to tuples, so configs compare, hash and serialise alike whatever
built them (flags, TOML, JSON, NumPy). A config's own checks across fields follow in its ``check``.
``annealed_learning_rate`` is what every config with an ``anneal_lr`` says in its
``budget_dependence`` (``purehr.algorithms.base.AlgorithmConfig``)."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purehr.protocol_settings import PROTOCOL_FIELDS, ProtocolSettings, refuse_protocol_settings, with_help

LEGACY_PROTOCOL_FIELDS = ("checkpoint_interval", "eval_episodes", "full_eval_interval", "quick_eval_episodes")
"""The protocol settings that were ``PPOConfig`` fields before they had an owner of their own: a
config class made with ``config_class(legacy_protocol=True)`` still takes them (kept, checked, in
``legacy_protocol``, which a run applies over the task's protocol settings); any other is refused."""
FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Training is float32: a config number beyond this is refused, as NaN and infinities are."""
SIZES = "tuple[int, ...]"
KINDS = ("int", "float", "bool", "str", "str | None", SIZES)
"""The annotations a config field may have: what ``check_declared_fields`` checks (a ``str`` by its
declared choices)."""
POSITIVE, NON_NEGATIVE, UNIT = (
    (lambda x: x > 0, "a finite number > 0"),
    (lambda x: x >= 0, "a finite number >= 0"),
    (lambda x: 0 <= x <= 1, "in [0, 1]"),
)
BOUNDS = {">0": (POSITIVE,), ">=0": (NON_NEGATIVE,), "[0,1]": (UNIT,), "(0,1]": (POSITIVE, UNIT)}
"""A float field's declared bounds: the checks it must pass, in order, each naming what is expected."""


def annealed_learning_rate(anneal_lr: bool) -> str | None:
    """Why a run whose learning rate decays over the budget cannot be extended (its first
    updates' rates are not a longer run's), and the way out; None without the decay."""
    if not anneal_lr:
        return None
    return (
        "its learning rate decays linearly to 0 over the budget (anneal_lr=True; train a run you mean to "
        "extend with --anneal-lr false)"
    )


NETWORK_SPEC = "'package.module:factory' or 'path/to/file.py:factory'"
"""The forms of a config's ``network`` (``purehr.engine.user_network``)."""


def network_field():
    """The ``network`` field of every algorithm's config: a user's network
    (``purehr.engine.user_network``), whose factory gets the observation and action spaces as the
    environment gives them and returns a flax torso (the algorithm adds its heads and
    normalisation) or a whole network; None: the shipped network of the config's other fields."""
    return with_help(
        None,
        "your own network: module:factory or path/to/file.py:factory (docs/how-to/own_network.md)",
        bounds="module:factory",
    )


def check_network_spec(owner: str, spec: Any) -> None:
    """Refuses a ``network`` config value that is neither None nor of the form ``NETWORK_SPEC``
    (the form alone: the module is imported when an algorithm is built)."""
    if spec is None:
        return
    module, _, factory = spec.rpartition(":") if isinstance(spec, str) else ("", "", "")
    dotted = all(part.isidentifier() for part in module.split("."))
    if not (module and factory.isidentifier() and (dotted or module.endswith(".py"))):
        raise ValueError(f"{owner}.network={spec!r}: expected None (the shipped network) or {NETWORK_SPEC}")


class ConfigFields:
    """The base of an algorithm's config, a frozen dataclass made by ``config_class``: its fields
    checked by their declarations when built, then by its own ``check``; ``replace``, ``to_dict``,
    ``from_dict`` and ``hyperparams`` (the traced fields, ``Hyperparams``) for every config alike."""

    Hyperparams: type  # set by config_class: the traced fields as a pytree of float32 arrays
    takes_legacy_protocol: bool = False  # set by config_class (PPOConfig's: LEGACY_PROTOCOL_FIELDS)
    legacy_protocol: dict  # set when built: the legacy protocol settings it was given ({} for none)

    def __post_init__(self) -> None:
        check_declared_fields(self)
        self.check()

    def check(self) -> None:
        """The config's own checks across fields (a minibatch that divides the batch, ...)."""

    @classmethod
    def hyperparameter_names(cls) -> tuple[str, ...]:
        """The traced fields, in declaration order: the leaf order of every checkpoint."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("traced"))

    def hyperparams(self):
        """The traced fields as float32 arrays (scalars; a sweep stacks them over seeds)."""
        return self.Hyperparams(**{name: jnp.float32(getattr(self, name)) for name in self.hyperparameter_names()})

    def replace(self, **changes):
        names = [f.name for f in dataclasses.fields(self)]
        legacy = set(LEGACY_PROTOCOL_FIELDS) if type(self).takes_legacy_protocol else set()
        unknown = set(changes) - set(names) - legacy
        if unknown:
            raise ValueError(f"unknown {type(self).__name__} field(s) {sorted(unknown)}; expected some of {names}")
        kept = {**self.legacy_protocol, **{name: changes.pop(name) for name in legacy & set(changes)}}
        return dataclasses.replace(self, **changes, **kept)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict):
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown {cls.__name__} field(s) {sorted(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def config_class(cls: type | None = None, *, legacy_protocol: bool = False):
    """``cls`` (a ``ConfigFields``) as a frozen dataclass whose constructor refuses a protocol
    setting naming where it goes (``SACConfig(eval_episodes=...)``: the task's ``PROTOCOL``), except,
    with ``legacy_protocol``, the ``LEGACY_PROTOCOL_FIELDS`` (kept apart in ``legacy_protocol``: not
    fields, not compared, not in ``to_dict``); with ``cls.Hyperparams``: a pytree class of its traced
    fields, named ``<Algorithm>Hyperparams``."""
    if cls is None:
        return functools.partial(config_class, legacy_protocol=legacy_protocol)
    cls = dataclasses.dataclass(frozen=True)(cls)
    generated = cls.__init__

    @functools.wraps(generated)
    def __init__(self, *args, **kwargs):
        protocol = {name: kwargs.pop(name) for name in PROTOCOL_FIELDS if name in kwargs}
        legacy = {n: v for n, v in protocol.items() if legacy_protocol and n in LEGACY_PROTOCOL_FIELDS}
        refuse_protocol_settings(cls.__name__, **{n: v for n, v in protocol.items() if n not in legacy})
        legacy = {name: value for name, value in legacy.items() if value is not None}
        if legacy:  # checked as the protocol checks them (defaults for the others)
            legacy = {name: getattr(ProtocolSettings(**legacy), name) for name in legacy}
        object.__setattr__(self, "legacy_protocol", legacy)
        generated(self, *args, **kwargs)

    cls.__init__ = __init__
    cls.takes_legacy_protocol = legacy_protocol
    name = cls.__name__.removesuffix("Config") + "Hyperparams"
    annotations = dict.fromkeys(cls.hyperparameter_names(), jax.Array)
    namespace = {"__annotations__": annotations, "__module__": cls.__module__, "__qualname__": name}
    namespace["__doc__"] = f"The traced ``{cls.__name__}`` fields as float32 arrays, in checkpoint leaf order."
    cls.Hyperparams = struct.dataclass(type(name, (), namespace))
    return cls


def check_declared_fields(config: Any) -> None:
    """Checks and normalises every field of ``config`` (a frozen dataclass) in place by its
    declaration: first each one's type (its annotation: ``KINDS``),
    then each one's bounds or choices."""
    owner = type(config).__name__
    fields = dataclasses.fields(config)
    for field in fields:
        value, bounds = getattr(config, field.name), field.metadata.get("bounds")
        if field.type == "int":
            expected = "an integer >= 0" if bounds == ">=0" else "a positive integer"
            value = _integer(owner, field.name, value, expected)
        elif field.type == "float":
            value = _finite_float(owner, field.name, value)
        elif field.type == "bool":
            value = _boolean(owner, field.name, value)
        elif field.type == SIZES:
            value = _sizes(owner, field.name, value, empty_ok=bounds == "may be empty")
        elif field.type == "str" and field.metadata.get("choices") and not isinstance(value, str):
            raise ValueError(f"{owner}.{field.name}={value!r}: expected one of {field.metadata['choices']}")
        elif field.type == "str | None" and not (value is None or isinstance(value, str)):
            raise ValueError(f"{owner}.{field.name}={value!r}: expected a string or None, got {type(value).__name__}")
        object.__setattr__(config, field.name, value)
    for field in fields:
        value, bounds = getattr(config, field.name), field.metadata.get("bounds")
        choices = field.metadata.get("choices")
        if field.type == "int" and value < (0 if bounds == ">=0" else 1):
            expected = "an integer >= 0" if bounds == ">=0" else "a positive integer"
            raise ValueError(f"{owner}.{field.name}={value!r}: expected {expected}")
        for holds, expected in BOUNDS.get(bounds, ()) if field.type == "float" else ():
            if not holds(value):
                raise ValueError(f"{owner}.{field.name}={value!r}: expected {expected}")
        if choices and value not in choices:
            raise ValueError(f"{owner}.{field.name}={value!r}: expected one of {choices}")
        if bounds == "module:factory":
            check_network_spec(owner, value)


def _integer(owner: str, name: str, value: Any, expected: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{owner}.{name}={value!r}: expected {expected}, got {type(value).__name__}")
    return int(value)


def _finite_float(owner: str, name: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(
            f"{owner}.{name}={value!r}: expected a finite real number (int or float), got {type(value).__name__}"
        )
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range
        number = math.inf
    if not abs(number) <= FLOAT32_MAX:  # NaN fails this too
        limit = f"|x| <= {FLOAT32_MAX:.4g}, the float32 range training uses"
        raise ValueError(f"{owner}.{name}={value!r}: expected a finite number ({limit})")
    return number


def _boolean(owner: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{owner}.{name}={value!r}: expected True or False, got {type(value).__name__}")
    return bool(value)


def _sizes(owner: str, name: str, sizes: Any, empty_ok: bool = False) -> tuple[int, ...]:
    if (
        not isinstance(sizes, (tuple, list))
        or not (sizes or empty_ok)
        or any(isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)) or s <= 0 for s in sizes)
    ):
        expected = "a tuple of positive ints (empty for none)" if empty_ok else "a non-empty tuple of positive ints"
        raise ValueError(f"{owner}.{name}={sizes!r}: expected {expected}")
    return tuple(int(s) for s in sizes)
