"""Reading a run's reported checkpoints back (``purehr.run.choose_reported`` writes them): what the
results table and the goals judge a seed by. No JAX here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from purehr.run.store.files import parse_row, read_csv
from purehr.run.store.record import recorded_protocol
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


def missing_reported_choice(run_dir: str | Path, task: str, seeds: Sequence[int]) -> str | None:
    """Why ``task`` has no reported checkpoint where it chooses one on validation episodes
    (``report_candidates`` > 1, or a choice recorded by scripts/report_checkpoint.py), naming the
    seed's missing or stale reported.csv and the way out; None where its reported checkpoints are
    there, or where it reports each seed's last (it chose none)."""
    run = RunDirectory(Path(run_dir))
    manifest = run.read_manifest()
    chosen = (manifest.get("reported_checkpoints") or {}).get(task)
    candidates = chosen["candidates"] if chosen else recorded_protocol(manifest, task).report_candidates
    if candidates <= 1 or reported_rows(run.root, task, seeds) is not None:
        return None
    for seed in seeds:
        path = run.reported_csv(task, seed)
        if reported_rows(run.root, task, [seed]) is None:
            state = "is stale (the run has newer checkpoints)" if path.exists() else "is missing"
            return (
                f"{path} {state}: {task} chooses its reported checkpoint among each seed's last {candidates} on "
                f"validation episodes, and this choice was not made (a run stopped during it, or extended "
                f"since). Resume the run (it makes the choice), or make it with python scripts/report_checkpoint.py "
                f"--run-dir {run.root} --task {task} --candidates {candidates}; or ask for the last checkpoint "
                "(step 'latest')"
            )
    return None
