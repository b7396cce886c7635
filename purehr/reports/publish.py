"""Copy a finished run into a small, shareable record: everything a reader or ``restore``
needs, without the hundreds of intermediate checkpoints.

Kept: the manifest (marked ``published``), every CSV, the figures and the final metrics, each
seed's *last* checkpoint and the one it reports where the run chose another
(``purehr.run.choose_reported``; so ``restore(record, task, seed, step="latest")``, ``step="reported"`` and
``scripts/evaluate.py --checkpoint`` work on a fresh clone), and the showcase traces the replay
plays (so ``scripts/render.py`` can redraw it); beside them a model card (README.md,
``purehr.reports.model_card``). Intermediate checkpoints stay listed in
``checkpoints.csv`` with their held-out metrics; restoring one from the record says it is not
shipped.

Nothing is written before everything is checked: every path read from the run's CSVs must stay
inside the run directory (a ``checkpoint_path`` of ``../../elsewhere`` is refused, naming the
cell), and each kept checkpoint must restore and match its recorded ``state_digest``, so a
record never ships a damaged or missing final checkpoint.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from purehr.reports.model_card import CARD_FILE, run_card
from purehr.run.compiled.task_setup import recorded_setup
from purehr.run.store.checkpoints import CorruptCheckpointError, SeedCheckpoints
from purehr.run.store.files import RunDirectoryError, atomic_write_json, atomic_write_text
from purehr.run.store.reported import reported_rows
from purehr.run.store.run_dir import (
    CHECKPOINTS_CSV,
    FIGURES,
    FINAL_METRICS_CSV,
    MANIFEST,
    REPORTED_CSV,
    UPDATES_CSV,
    RunDirectory,
    read_checkpoint_rows,
    seed_dir_name,
)
from purehr.viz.replay import replayed_rows


class UnpublishableRun(RunDirectoryError):
    """The run cannot be published as it is: a path leads outside it, a file is missing, or a
    checkpoint to keep is damaged. Nothing was written."""


def publish_run(run_dir: str | Path, record_dir: str | Path, max_replayed: int = 24) -> list[Path]:
    """Copy ``run_dir`` (a finished run) to ``record_dir`` (which must not exist yet, nor lie
    inside the run), with
    the showcase traces of the lowest seed that a replay of ``max_replayed`` checkpoints
    plays. Everything is checked first (paths, checkpoint digests); returns the files written."""
    source, target = Path(run_dir), Path(record_dir)
    if target.resolve().is_relative_to(source.resolve()):  # the copy would hold itself: refused before any read
        raise UnpublishableRun(
            f"{target} lies inside the run {source} it would copy; publish into a directory outside it "
            "(nothing was copied)"
        )
    manifest = RunDirectory(source).read_manifest()
    if manifest.get("status") != "finished":
        raise ValueError(f"{source} holds a {manifest.get('status')!r} run; publish a finished one")
    if target.exists():
        raise FileExistsError(f"{target} exists; publish into a new directory (nothing was copied)")
    top = [source / FINAL_METRICS_CSV] if (source / FINAL_METRICS_CSV).exists() else []
    if (source / FIGURES).is_dir():
        top += [path for path in sorted((source / FIGURES).iterdir()) if path.is_file()]
    copies = [(path, _mirror(source, target, path)) for path in top]
    kept: dict[str, list[tuple[Path, dict[str, Any]]]] = {}  # task -> (checkpoint, its row) per seed
    for task in manifest["tasks"]:
        kept[task] = []
        for index, seed in enumerate(manifest["seeds"]):
            seed_copies, seed_kept = _seed_copies(source, target, task, seed, replay=index == 0, limit=max_replayed)
            copies += seed_copies
            kept[task] += seed_kept
    for task, checkpoints in kept.items():  # every path checked: now the slow part, reading the checkpoints
        abstract = _abstract_state(manifest, task)
        for checkpoint, row in checkpoints:
            _verify(checkpoint, row, abstract)
    for origin, destination in copies:
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, destination)
    record = dict(manifest, published=True)  # restore then says "not shipped" of the checkpoints left out
    atomic_write_json(target / MANIFEST, record)
    atomic_write_text(target / CARD_FILE, run_card(target))  # the model card, from the record's own files
    return [target / MANIFEST, target / CARD_FILE] + [destination for _, destination in copies]


def _abstract_state(manifest: dict[str, Any], task: str) -> Any:
    """The shapes and dtypes of ``task``'s checkpointed state, as the run's manifest builds it
    (traced, not compiled): what a checkpoint is restored into to be verified."""
    return recorded_setup(manifest, task).abstract_state()


def _seed_copies(
    source: Path, target: Path, task: str, seed: int, *, replay: bool, limit: int
) -> tuple[list[tuple[Path, Path]], list[tuple[Path, dict[str, Any]]]]:
    """What one seed contributes to the record, every path checked: its logs, its last
    checkpoint and the one it reports where that is another (``purehr.run.choose_reported``), and
    (``replay``) the showcases the replay plays; then those checkpoints' folders and rows (for
    ``_verify``)."""
    seed_dir = source / task / seed_dir_name(seed)
    logs = [seed_dir / UPDATES_CSV, seed_dir / CHECKPOINTS_CSV]
    reported = reported_rows(source, task, [seed])
    logs += [seed_dir / REPORTED_CSV] if reported else []
    for path in logs:
        if not path.is_file():
            raise UnpublishableRun(f"{path} is missing; publish a finished run (nothing was copied)")
    index = seed_dir / CHECKPOINTS_CSV
    rows = read_checkpoint_rows(index)
    if not rows:
        raise UnpublishableRun(f"{index}: without rows; publish a finished run (nothing was copied)")
    shipped = [max(rows, key=lambda row: row["actual_steps"])]
    if reported and reported[0]["actual_steps"] != shipped[0]["actual_steps"]:
        shipped += [row for row in rows if row["actual_steps"] == reported[0]["actual_steps"]]
    kept = [(_shipped_checkpoint(source, index, seed_dir / "checkpoints", row), row) for row in shipped]
    copies = [(path, _mirror(source, target, path)) for path in logs]
    for checkpoint, _ in kept:
        copies += [(path, _mirror(source, target, path)) for path in sorted(checkpoint.rglob("*")) if path.is_file()]
    if replay:  # the replay plays the lowest seed's recorded showcases
        recorded = [row for row in rows if row["showcase_path"]]
        for row in (recorded[i] for i in replayed_rows(len(recorded), limit)):
            where = f"{index}: showcase_path of the row at actual_steps {row['actual_steps']}"
            trace = source / row["showcase_path"]
            destination = _mirror(source, target, trace, where)
            if not trace.is_file():
                raise UnpublishableRun(f"{where} names {row['showcase_path']!r}, which is missing (nothing was copied)")
            copies.append((trace, destination))
    return copies, kept


def _shipped_checkpoint(source: Path, index: Path, folder: Path, row: dict[str, Any]) -> Path:
    """The folder of a shipped row's checkpoint (the last, or the reported): its
    ``checkpoint_path`` cell must name this seed's own ``checkpoints/<actual_steps>`` (inside
    the run), and the folder must exist."""
    where = f"{index}: checkpoint_path of the row at actual_steps {row['actual_steps']}"
    named = _inside(source, source / row["checkpoint_path"], where) if row["checkpoint_path"] else None
    expected = folder / str(row["actual_steps"])
    if named is None or named != expected.resolve():
        raise UnpublishableRun(
            f"{where} is {row['checkpoint_path']!r}; expected this seed's checkpoint folder "
            f"{expected.relative_to(source)} (nothing was copied)"
        )
    if not expected.is_dir():
        raise UnpublishableRun(
            f"the last checkpoint {expected} is missing; a record without its final checkpoint cannot be "
            "restored (nothing was copied)"
        )
    return expected


def _verify(checkpoint: Path, row: dict[str, Any], abstract: Any) -> None:
    """Restore the checkpoint and compare it with the ``state_digest`` recorded when it was saved."""
    checkpoints = None
    try:
        checkpoints = SeedCheckpoints(checkpoint.parent, read_only=True)
        checkpoints.restore(row["actual_steps"], abstract, row["state_digest"])
    except CorruptCheckpointError as error:
        raise UnpublishableRun(f"refusing to publish a damaged checkpoint: {error} (nothing was copied)") from None
    finally:
        if checkpoints is not None:
            checkpoints.finish()


def _inside(root: Path, path: Path, where: str) -> Path:
    """``path`` resolved (``..`` and symlinks followed), refused unless it lies inside ``root``."""
    resolved, base = path.resolve(), root.resolve()
    if not resolved.is_relative_to(base):
        raise UnpublishableRun(
            f"{where} leads outside the run directory {root} (to {resolved}); only files inside a run are "
            "published (nothing was copied)"
        )
    return resolved


def _mirror(source: Path, target: Path, path: Path, where: str | None = None) -> Path:
    """Where ``path`` goes in the record: the same place under ``target``. A path that leaves
    ``source`` (a symlink out of it, ``..``) is refused: nothing is copied from outside a run."""
    resolved = _inside(source, path, where or f"{path} (a file to publish)")
    return target / resolved.relative_to(source.resolve())
