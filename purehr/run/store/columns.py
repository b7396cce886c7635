"""The columns of a run's CSV logs (docs/protocol.md): updates.csv and checkpoints.csv, and
what the figures and the analysis read from them. No JAX here."""

from __future__ import annotations

from collections.abc import Iterable

from purehr.algorithms.registry import DEFAULT_ALGORITHM, get_algorithm

UPDATE_HEAD = ["update", "env_steps", "elapsed_s"]
UPDATE_COLUMNS = UPDATE_HEAD + list(get_algorithm(DEFAULT_ALGORITHM).metric_names().columns)
"""The fixed columns of every updates.csv of a PPO run (docs/protocol.md): the head, then the
algorithm's metrics (``purehr.algorithms.base.MetricNames``); a task's diagnostics follow."""
CHECKPOINT_HEAD = ["target_steps", "actual_steps", "update", "elapsed_s"]
CHECKPOINT_TAIL = ["checkpoint_path", "showcase_path", "state_digest"]
"""checkpoints.csv: the head, then ``eval_<metric>`` per held-out metric, a population's
``pbt_`` columns (a PBT run only), then the tail (text)."""
PBT_PREFIX = "pbt_"
"""A PBT run's checkpoint columns: ``pbt_fitness`` (what the member was ranked by),
``pbt_diverged_at_update`` (the first diverged update of the weights it had then; 0: healthy),
``pbt_parent`` (the seed whose weights it continues from; its own where it copied nobody) and
``pbt_<hyperparameter>`` (each explored value after the step), docs/pbt.md."""
CHECKPOINT_INTEGERS = ("target_steps", "actual_steps", "update")
UPDATE_INTEGERS = ("update",)
"""The columns that must hold integers (steps and update counts: what a resume lines up)."""

RENDERED_UPDATE_COLUMNS = ("env_steps", "mean_episode_return")
RENDERED_CHECKPOINT_COLUMNS = ("target_steps", "actual_steps", "elapsed_s", "showcase_path")
"""What the figures and the replay read: a run lacking one cannot be rendered."""
ANALYSED_UPDATE_COLUMNS = ("env_steps", "elapsed_s", "mean_episode_return", "train_success_rate")
ANALYSED_CHECKPOINT_COLUMNS = ("actual_steps", "eval_success_rate")
"""What the analysis and the results table compute from: each must hold numbers."""


def update_columns(metric_names: Iterable[str]) -> list[str]:
    """The fixed columns of docs/protocol.md, then the task's own diagnostics."""
    return UPDATE_COLUMNS + sorted(set(metric_names) - set(UPDATE_COLUMNS))


def checkpoint_columns(evaluation_names: Iterable[str], population_names: Iterable[str] = ()) -> list[str]:
    return CHECKPOINT_HEAD + [f"eval_{name}" for name in evaluation_names] + list(population_names) + CHECKPOINT_TAIL
