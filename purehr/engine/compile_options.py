"""XLA options for purehr's programs: on the CPU, backend optimisation level 2 for training
programs (the states of XLA's default level 3, compiled faster) and level 1 for the one-shot
programs (initial states, the baselines' evaluations), which run once. The training programs'
level can be named (``PUREHR_XLA_TRAINING_LEVEL``: 0 compiles in about half the time and trains
about half as fast, and rounds otherwise); else a level in ``XLA_FLAGS`` wins. Other backends
keep their defaults. Measurements: ``benchmarks/README.md``, "Compilation".
"""

from __future__ import annotations

import os

import jax

CPU_TRAINING_LEVEL = 2
# The initial states run once, so their program is compiled for compile time: on the CPU, level 1
# compiles each task's in 1.5-3 s instead of 4-5 s (2-core CPU) and gives bit-identical states
# (digests compared for swing, hrv, both GRU policies, gymnax CartPole and Brax inverted_pendulum;
# level 0 does not).
# The baselines' held-out evaluations run once per definition too: at level 1 the main job's six
# took 13.8 s instead of 21.9 s (compile and run, 2-core CPU, 2026-12-04), their metrics equal
# up to float32 rounding of the last digits (e.g. a return_std 1.58695459 -> 1.58695471).
CPU_ONE_SHOT_LEVEL = 1
LEVEL_FLAG = "xla_backend_optimization_level"
TRAINING_LEVEL_VARIABLE = "PUREHR_XLA_TRAINING_LEVEL"


def training_compiler_options() -> dict[str, int]:
    """The ``compiler_options`` for ``jax.jit`` of a training program (empty: XLA's defaults)."""
    if jax.default_backend() != "cpu":
        return {}
    named = os.environ.get(TRAINING_LEVEL_VARIABLE)
    if named is not None:
        if named not in ("0", "1", "2", "3"):
            raise ValueError(f"{TRAINING_LEVEL_VARIABLE}={named!r}: expected an XLA optimisation level, 0, 1, 2 or 3")
        return {LEVEL_FLAG: int(named)}
    if LEVEL_FLAG in os.environ.get("XLA_FLAGS", ""):
        return {}
    return {LEVEL_FLAG: CPU_TRAINING_LEVEL}


def one_shot_compiler_options() -> dict[str, int]:
    """The ``compiler_options`` for a program run once (the initial states, the baselines'
    evaluations); other backends: theirs."""
    return {LEVEL_FLAG: CPU_ONE_SHOT_LEVEL} if jax.default_backend() == "cpu" else {}
