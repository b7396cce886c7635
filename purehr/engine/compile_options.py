"""XLA options for purehr's programs: on the CPU, backend optimisation level 2 for training
programs and level 1 for the one-shot programs (initial states, the baselines' evaluations).

Measured on the 2-core CPU (jax 0.10.2, 2026-12-04; docs/protocol.md, "Compilation"): XLA's
default level 3 and level 2 give bit-identical training states (the main job's state digests,
both tasks, 300k steps), level 2 compiles purehr's program on rejax's CartPole settings in
5.8-7.4 s instead of 10.3-12.6 s and the main job's in 40.1 s instead of 45.5 s, and trains as
fast. Level 1 compiles no faster than 2 on the main job, trains about 12% slower and changes
the numbers. A level the user set in ``XLA_FLAGS`` wins; other backends keep their default.
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


def training_compiler_options() -> dict[str, int]:
    """The ``compiler_options`` for ``jax.jit`` of a training program (empty: XLA's defaults)."""
    if LEVEL_FLAG in os.environ.get("XLA_FLAGS", "") or jax.default_backend() != "cpu":
        return {}
    return {LEVEL_FLAG: CPU_TRAINING_LEVEL}


def one_shot_compiler_options() -> dict[str, int]:
    """The ``compiler_options`` for a program run once (the initial states, the baselines'
    evaluations); other backends: theirs."""
    return {LEVEL_FLAG: CPU_ONE_SHOT_LEVEL} if jax.default_backend() == "cpu" else {}
