"""The HRV difficulty schedule of ``docs/hrv_task.md``, applied inside the training scan.

A ``Curriculum`` is a list of stages ``(fraction of the training budget, difficulty,
target precision)``; ``Curriculum()`` is the default of the spec (0.3 / 0.1 for the first
20% of updates, 0.6 / 0.05 for the next 40%, 0.9 / 0.02 for the last 40%).
``curriculum.schedule(num_updates)`` turns it into the ``env_params_schedule`` that
``purehr.algorithms.ppo.algorithm.make_ppo`` evaluates from the integer update counter inside the jitted
scan: the difficulty and precision are traced leaves of ``HRVParams``, so changing stage
neither recompiles nor calls the host.

Stage boundaries are whole updates. Stage ``k`` (0-based) starts at update
``start_k = ceil(n * (f_0 + ... + f_{k-1}))`` (``n`` updates, the sum rounded to 6 decimals
so 0.2 + 0.4 counts as 0.6), and update ``u`` (0-based; it collects its rollout under the
params of ``env_params_at(u)``) trains on the last stage whose start is ``<= u``. With a tiny
``n`` a stage may get no update at all. Held-out evaluation uses ``final_params``: the last
stage, whatever ``n`` is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Stage = tuple[float, float, float]
DEFAULT_STAGES: tuple[Stage, ...] = ((0.2, 0.3, 0.1), (0.4, 0.6, 0.05), (0.4, 0.9, 0.02))
FRACTION_SUM_TOLERANCE = 1e-6
CURRICULUM_CHOICES = ("none", "default")


@dataclass(frozen=True)
class Curriculum:
    """Stages of ``(fraction of the budget, difficulty, target_precision)``.

    Fractions must be positive and sum to 1 (within 1e-6); difficulties must be finite and
    >= 0 (the environment checks its own target range, see ``check_params``); precisions
    must be finite and > 0.
    """

    stages: tuple[Stage, ...] = DEFAULT_STAGES

    def __post_init__(self) -> None:
        stages = self.stages
        if isinstance(stages, (str, bytes)) or not hasattr(stages, "__len__") or len(stages) == 0:
            raise ValueError(
                f"Curriculum.stages={stages!r}: expected a non-empty sequence of "
                "(fraction, difficulty, precision) triples"
            )
        normalised = []
        for index, stage in enumerate(stages):
            if isinstance(stage, (str, bytes)) or not hasattr(stage, "__len__") or len(stage) != 3:
                raise ValueError(
                    f"Curriculum stage {index} = {stage!r}: expected a (fraction, difficulty, precision) triple"
                )
            try:
                fraction, difficulty, precision = (float(value) for value in stage)
            except (TypeError, ValueError):
                raise ValueError(f"Curriculum stage {index} = {stage!r}: expected three numbers") from None
            if not (math.isfinite(fraction) and fraction > 0):
                raise ValueError(f"Curriculum stage {index}: fraction={stage[0]!r}, expected a finite number > 0")
            if not (math.isfinite(difficulty) and difficulty >= 0):
                raise ValueError(f"Curriculum stage {index}: difficulty={stage[1]!r}, expected a finite number >= 0")
            if not (math.isfinite(precision) and precision > 0):
                raise ValueError(f"Curriculum stage {index}: precision={stage[2]!r}, expected a finite number > 0")
            normalised.append((fraction, difficulty, precision))
        total = math.fsum(stage[0] for stage in normalised)
        if abs(total - 1.0) > FRACTION_SUM_TOLERANCE:
            raise ValueError(
                f"Curriculum fractions {[s[0] for s in normalised]} sum to {total!r}; expected them to sum to 1"
            )
        object.__setattr__(self, "stages", tuple(normalised))

    # --- construction from text / the manifest ------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Curriculum | None:
        """``"none"`` -> None, ``"default"`` -> ``Curriculum()``, or a stage list
        ``"0.2:0.3:0.1,0.4:0.6:0.05,0.4:0.9:0.02"`` (fraction:difficulty:precision, comma
        separated)."""
        text = text.strip()
        if text == "none":
            return None
        if text == "default":
            return cls()
        stages = []
        for part in text.split(","):
            fields = part.strip().split(":")
            if len(fields) != 3:
                raise ValueError(
                    f"curriculum {text!r}: stage {part!r} is not fraction:difficulty:precision; "
                    f"expected one of {CURRICULUM_CHOICES} or e.g. "
                    "'0.2:0.3:0.1,0.4:0.6:0.05,0.4:0.9:0.02'"
                )
            try:
                stages.append(tuple(float(field) for field in fields))
            except ValueError:
                raise ValueError(f"curriculum {text!r}: stage {part!r} holds a non-number") from None
        return cls(tuple(stages))

    def to_dict(self) -> dict[str, Any]:
        return {"stages": [list(stage) for stage in self.stages]}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Curriculum | None:
        """Inverse of ``to_dict``; ``None`` (a manifest without a curriculum) gives None."""
        if data is None:
            return None
        if not isinstance(data, dict) or set(data) != {"stages"}:
            raise ValueError(
                f"curriculum record {data!r}: expected {{'stages': [[fraction, difficulty, precision], ...]}}}}"
            )
        return cls(tuple(tuple(stage) for stage in data["stages"]))

    def describe(self) -> str:
        return ", ".join(f"{100 * f:g}% at difficulty {d:g} / precision {p:g}" for f, d, p in self.stages)

    # --- where the stages fall ----------------------------------------------------------------

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    def stage_starts(self, num_updates: int) -> tuple[int, ...]:
        """The first update index of every stage (stage 0 starts at 0)."""
        if isinstance(num_updates, bool) or not isinstance(num_updates, (int, np.integer)) or num_updates < 1:
            raise ValueError(f"num_updates={num_updates!r}: expected a positive integer")
        starts = []
        for index in range(self.num_stages):
            boundary = math.fsum(stage[0] for stage in self.stages[:index])
            starts.append(min(int(num_updates), math.ceil(round(boundary * num_updates, 6))))
        return tuple(starts)

    def stage_index(self, update_index: int, num_updates: int) -> int:
        """Host-side: the stage that update ``update_index`` (0-based) trains on."""
        starts = self.stage_starts(num_updates)
        return max(k for k, start in enumerate(starts) if start <= update_index)

    # --- the environment params ---------------------------------------------------------------

    def check_params(self, env_params) -> None:
        """Every stage's target range ``target_center +- difficulty / 3`` must lie in [0, 1]
        (as ``HRVParams`` requires of its own difficulty)."""
        for name in ("difficulty", "target_precision"):
            if not hasattr(env_params, name):
                raise TypeError(
                    f"{type(env_params).__name__} has no field {name!r}: a curriculum "
                    "needs the HRV task's params (purehr.envs.hrv.HRVParams)"
                )
        centre = float(getattr(env_params, "target_center", 0.5))
        for index, (_, difficulty, _) in enumerate(self.stages):
            if centre - difficulty / 3 < 0 or centre + difficulty / 3 > 1:
                raise ValueError(
                    f"Curriculum stage {index}: difficulty={difficulty!r} puts targets in "
                    f"[{centre - difficulty / 3:g}, {centre + difficulty / 3:g}] "
                    f"(target_center={centre:g}); expected a range inside [0, 1]"
                )

    def stage_params(self, env_params, index: int):
        """``env_params`` with stage ``index``'s difficulty and precision (host values)."""
        _, difficulty, precision = self.stages[index]
        return env_params.replace(difficulty=difficulty, target_precision=precision)

    def final_params(self, env_params):
        """The last stage's params: the held-out evaluation distribution."""
        self.check_params(env_params)
        return self.stage_params(env_params, self.num_stages - 1)

    def schedule(self, num_updates: int) -> Callable[[Any, jax.Array], Any]:
        """The ``env_params_schedule(env_params, update_index)`` for a run of ``num_updates``
        updates: the update index is compared with the integer stage starts, so host
        (``stage_index``) and device agree at every boundary."""
        starts = np.asarray(self.stage_starts(num_updates)[1:], np.int32)
        difficulties = np.asarray([stage[1] for stage in self.stages], np.float32)
        precisions = np.asarray([stage[2] for stage in self.stages], np.float32)

        def env_params_schedule(env_params, update_index):
            self.check_params(env_params)
            stage = jnp.sum(jnp.asarray(update_index, jnp.int32) >= jnp.asarray(starts)).astype(jnp.int32)
            return env_params.replace(
                difficulty=jnp.asarray(difficulties)[stage], target_precision=jnp.asarray(precisions)[stage]
            )

        return env_params_schedule
