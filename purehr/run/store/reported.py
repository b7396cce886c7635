"""Reading a run's reported checkpoints back (``purehr.run.reported`` writes them): what the
results table and the goals judge a seed by. No JAX here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from purehr.run.store.files import parse_row, read_csv
from purehr.run.store.run_dir import RunDirectory, read_checkpoint_rows


def reported_rows(run_dir: str | Path, task: str, seeds: Sequence[int]) -> list[dict[str, Any]] | None:
    """Each seed's reported row (seed order), or None where the run reports its last checkpoints:
    a seed without reported.csv, or with one that an extended run's newer checkpoints made stale."""
    run = RunDirectory(Path(run_dir))
    rows = []
    for seed in seeds:
        text = read_csv(run.reported_csv(task, seed))
        logged = read_checkpoint_rows(run.checkpoints_csv(task, seed))
        if not text or not logged:
            return None
        row = parse_row(text[0], text_columns=("state_digest",))
        if row["last_actual_steps"] != logged[-1]["actual_steps"]:
            return None
        rows.append(row)
    return rows
