"""What a logged run's dashboards must hold, read back with each backend's own reader:
every step once, in order, equal to the run's CSV files and to an uninterrupted run's
(tests/test_run.py kills a logged run, resumes it, and checks it with these)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

from purehr.run.store.files import read_csv
from purehr.tracking.naming import update_tag
from purehr.tracking.weights_and_biases import history_records, transaction_logs

UPDATE_TAGS = {
    "train/loss": "loss",
    "train/explained_variance": "explained_variance",
    "rollout/mean_step_reward": "mean_step_reward",
}


def csv_series(run_dir: Path, task: str, seed: int, column: str) -> list[tuple[int, float]]:
    rows = read_csv(run_dir / task / f"seed_{seed}" / "updates.csv")
    return [(int(row["env_steps"]), float(row[column])) for row in rows]


def scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


def assert_tensorboard_exact(
    run_dir: Path, reference: Path, task: str, seed: int, pieces: int, columns: tuple[str, ...] | None = None
) -> None:
    """``pieces`` event files (one per process that logged); no (tag, step) written twice in
    the raw files; each series equal (float32, as TensorBoard stores it) to both CSVs.
    ``columns``: the updates.csv columns compared (default: PPO's ``UPDATE_TAGS``)."""
    folder = run_dir / "tensorboard" / task / f"seed_{seed}"
    files = sorted(folder.glob("events.out.tfevents.*"))
    assert len(files) == pieces, files
    written = [
        (value.tag, event.step)
        for path in files
        for event in EventFileLoader(str(path)).Load()
        for value in event.summary.value
    ]
    assert len(written) == len(set(written))
    tags = UPDATE_TAGS if columns is None else {update_tag(column): column for column in columns}
    for tag, column in tags.items():
        logged = scalars(folder, tag)
        expected, uninterrupted = csv_series(run_dir, task, seed, column), csv_series(reference, task, seed, column)
        assert [step for step, _ in logged] == [step for step, _ in expected] == [step for step, _ in uninterrupted]
        for series in (expected, uninterrupted):
            assert np.array_equal([v for _, v in logged], np.float32([v for _, v in series]), equal_nan=True), tag
    checkpoints = read_csv(run_dir / task / f"seed_{seed}" / "checkpoints.csv")
    expected = [(int(row["actual_steps"]), float(np.float32(row["eval_return_mean"]))) for row in checkpoints]
    assert scalars(folder, "heldout/return_mean") == expected


def assert_wandb_exact(run_dir: Path, reference: Path, task: str, seed: int, run_id: str, pieces: int) -> None:
    """One W&B run in ``pieces`` offline pieces; its history steps once each, in order, over
    all of them; the values W&B keeps (float64) equal to both CSVs."""
    logs = transaction_logs(run_dir, run_id)
    assert len(logs) == pieces and all(log.parent.name.startswith("offline-run-") for log in logs), logs
    rows = [row for log in logs for row in history_records(log) if "train/loss" in row or "heldout/return_mean" in row]
    expected = csv_series(run_dir, task, seed, "loss")
    assert [row["_step"] for row in rows] == [0] + [step for step, _ in expected]  # step 0: the first checkpoint
    logged = [row["train/loss"] for row in rows[1:]]
    assert logged == [v for _, v in expected] == [v for _, v in csv_series(reference, task, seed, "loss")]
    checkpoints = read_csv(run_dir / task / f"seed_{seed}" / "checkpoints.csv")
    heldout = [row["heldout/return_mean"] for row in rows if "heldout/return_mean" in row]
    assert heldout == [float(row["eval_return_mean"]) for row in checkpoints]
