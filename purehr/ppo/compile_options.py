"""XLA options for the training programs: on the CPU, backend optimisation level 2.

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
LEVEL_FLAG = "xla_backend_optimization_level"


def training_compiler_options() -> dict[str, int]:
    """The ``compiler_options`` for ``jax.jit`` of a training program (empty: XLA's defaults)."""
    if LEVEL_FLAG in os.environ.get("XLA_FLAGS", "") or jax.default_backend() != "cpu":
        return {}
    return {LEVEL_FLAG: CPU_TRAINING_LEVEL}
