"""How the CSV columns are named on a dashboard (docs/protocol.md, "Watching a run"): a group,
a slash, the column's own name, so a reader finds ``updates.csv``'s ``approx_kl`` as
``train/approx_kl`` and ``checkpoints.csv``'s ``eval_success_rate`` as ``heldout/success_rate``.
The step of every value is the environment step (per task and seed) of its row."""

from __future__ import annotations

from typing import Any

from purehr.algorithms.registry import ALGORITHMS

TRAIN = frozenset(
    {name for entry in ALGORITHMS.values() for name in entry.metric_names().learning} | {"diverged_at_update"}
)
ROLLOUT = frozenset(name for entry in ALGORITHMS.values() for name in entry.metric_names().rollout)
NOT_LOGGED = frozenset({"update", "env_steps"})  # the step axis itself
SUCCESS_TAGS = frozenset({"heldout/success_rate", "rollout/train_success_rate"})
"""The tags of a success rate: not logged for a task whose environment defines no success (NaN
held out, 0 in training: a curve that says nothing, and a wrong one)."""


def update_tag(column: str) -> str:
    """``updates.csv`` column -> tag: train/, rollout/, time/ (elapsed_s) or env/ (the task's
    own diagnostics and its counters of bad actions and states)."""
    if column in TRAIN:
        return f"train/{column}"
    if column in ROLLOUT:
        return f"rollout/{column}"
    if column == "elapsed_s":
        return "time/elapsed_s"
    return f"env/{column}"


def update_scalars(row: dict[str, Any]) -> dict[str, float]:
    """An ``updates.csv`` row as tagged scalars (NaN kept: a rollout in which no episode ended)."""
    return {update_tag(name): float(value) for name, value in row.items() if name not in NOT_LOGGED and _number(value)}


def heldout_scalars(row: dict[str, Any]) -> dict[str, float]:
    """A ``checkpoints.csv`` row's held-out metrics (``eval_<name>``) as ``heldout/<name>``, and
    a PBT run's record (``pbt_<name>``: fitness, parent seed, explored values) as ``pbt/<name>``."""
    scalars = {}
    for name, value in row.items():
        for prefix, group in (("eval_", "heldout"), ("pbt_", "pbt")):
            if name.startswith(prefix):
                scalars[f"{group}/{name[len(prefix) :]}"] = float(value)
    return scalars


def history(update_rows: list[dict], checkpoint_rows: list[dict]) -> list[tuple[int, dict[str, float]]]:
    """One task x seed's rows as (env step, scalars) in step order, a checkpoint's held-out
    metrics at its step beside that update's (how a live run logs them)."""
    by_step: dict[int, dict[str, float]] = {}
    for row in update_rows:
        by_step.setdefault(int(row["env_steps"]), {}).update(update_scalars(row))
    for row in checkpoint_rows:
        by_step.setdefault(int(row["actual_steps"]), {}).update(heldout_scalars(row))
    return sorted(by_step.items())


def run_label(task: str, seed: int) -> str:
    """One dashboard run per task x seed: ``<task>/seed_<k>`` (TensorBoard's run directory)."""
    return f"{task}/seed_{seed}"


def flat_hparams(config: dict[str, Any]) -> dict[str, float | int | str | bool]:
    """A config as the scalar values TensorBoard's hparams plugin takes (tuples as text)."""
    flat = {}
    for name, value in config.items():
        if isinstance(value, bool | int | float | str):
            flat[name] = value
        elif value is None:
            flat[name] = "none"
        else:
            flat[name] = str(list(value) if isinstance(value, tuple) else value)
    return flat


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
