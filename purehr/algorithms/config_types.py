"""The type check every algorithm's config runs first: wrong types and non-finite numbers refused
by name, before any value check reads them (a string learning rate, a NaN discount,
``anneal_lr='no'``, which is truthy); numbers normalised to Python ``int``/``float`` and sizes
to tuples, so configs compare, hash and serialise alike whatever built them (flags, TOML, JSON,
NumPy).

Each config names its fields by kind (``INT_FIELDS``, ``FLOAT_FIELDS``, ...) and calls
``normalise_fields`` from ``__post_init__``; its own value checks (positive, in [0, 1], divides
the batch) follow. ``annealed_learning_rate`` is what every config with an ``anneal_lr`` says
in its ``budget_dependence`` (``purehr.algorithms.base.AlgorithmConfig``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Training is float32: a config number beyond this is refused, as NaN and infinities are."""


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


def check_network_spec(owner: str, spec: Any) -> None:
    """Refuses a ``network`` config value that is neither None nor of the form ``NETWORK_SPEC``
    (the form alone: the module is imported when an algorithm is built)."""
    if spec is None:
        return
    module, _, factory = spec.rpartition(":") if isinstance(spec, str) else ("", "", "")
    dotted = all(part.isidentifier() for part in module.split("."))
    if not (module and factory.isidentifier() and (dotted or module.endswith(".py"))):
        raise ValueError(f"{owner}.network={spec!r}: expected None (the shipped network) or {NETWORK_SPEC}")


def normalise_fields(
    config: Any,
    ints: Iterable[str] = (),
    non_negative_ints: Iterable[str] = (),
    floats: Iterable[str] = (),
    bools: Iterable[str] = (),
    sizes: Iterable[str] = (),
    optional_sizes: Iterable[str] = (),
) -> None:
    """Checks and normalises ``config``'s fields of each kind in place (a frozen dataclass):
    ``ints`` and ``non_negative_ints`` are integers (their range checked by the config, the kind
    naming it in the message), ``floats`` finite float32
    numbers, ``bools`` True or False, ``sizes`` non-empty tuples of positive ints,
    ``optional_sizes`` the same or empty (a layer kind that may be absent)."""
    owner = type(config).__name__
    for name in ints:
        object.__setattr__(config, name, _integer(owner, name, getattr(config, name), "a positive integer"))
    for name in non_negative_ints:
        object.__setattr__(config, name, _integer(owner, name, getattr(config, name), "an integer >= 0"))
    for name in floats:
        object.__setattr__(config, name, _finite_float(owner, name, getattr(config, name)))
    for name in bools:
        object.__setattr__(config, name, _boolean(owner, name, getattr(config, name)))
    for name in sizes:
        object.__setattr__(config, name, _sizes(owner, name, getattr(config, name)))
    for name in optional_sizes:
        object.__setattr__(config, name, _sizes(owner, name, getattr(config, name), empty_ok=True))


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
