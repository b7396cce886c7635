"""Copy a finished run into a small, shareable record: everything a reader or ``restore``
needs, without the hundreds of intermediate checkpoints.

Kept: the manifest, every CSV, the figures and the final metrics, each seed's *last*
checkpoint (so ``restore(record, task, seed, step="latest")`` and ``scripts/evaluate.py
--checkpoint`` work on a fresh clone), and the showcase traces the replay plays (so
``scripts/render.py`` can redraw it). Intermediate checkpoints stay listed in
``checkpoints.csv`` with their held-out metrics; restoring one from the record says it is
missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from purehr.run.files import RunDirectoryError, read_csv
from purehr.run.run_dir import (
    CHECKPOINTS_CSV,
    FIGURES,
    FINAL_METRICS_CSV,
    MANIFEST,
    UPDATES_CSV,
    read_manifest,
    seed_dir_name,
)
from purehr.viz.replay import replayed_rows


def publish_run(run_dir: str | Path, record_dir: str | Path, max_replayed: int = 24) -> list[Path]:
    """Copy ``run_dir`` (a finished run) to ``record_dir`` (which must not exist yet), with
    the showcase traces of the lowest seed that a replay of ``max_replayed`` checkpoints
    plays. Returns the files written."""
    source, target = Path(run_dir), Path(record_dir)
    manifest = read_manifest(source)
    if manifest.get("status") != "finished":
        raise ValueError(f"{source} holds a {manifest.get('status')!r} run; publish a finished one")
    if target.exists():
        raise FileExistsError(f"{target} exists; publish into a new directory (nothing was copied)")
    copies: list[tuple[Path, Path]] = [(source / MANIFEST, target / MANIFEST)]
    if (source / FINAL_METRICS_CSV).exists():
        copies.append((source / FINAL_METRICS_CSV, target / FINAL_METRICS_CSV))
    if (source / FIGURES).is_dir():
        copies += [
            (path, target / FIGURES / path.name) for path in sorted((source / FIGURES).iterdir()) if path.is_file()
        ]
    for task in manifest["tasks"]:
        for index, seed in enumerate(manifest["seeds"]):
            seed_dir = Path(task) / seed_dir_name(seed)
            for name in (UPDATES_CSV, CHECKPOINTS_CSV):
                copies.append((source / seed_dir / name, target / seed_dir / name))
            rows = read_csv(source / seed_dir / CHECKPOINTS_CSV)
            if not rows:
                raise RunDirectoryError(
                    f"{source / seed_dir / CHECKPOINTS_CSV}: missing or without rows; publish a finished run"
                )
            last = max(rows, key=lambda row: int(row["actual_steps"]))
            checkpoint = Path(last["checkpoint_path"])
            copies += [
                (path, target / checkpoint / path.relative_to(source / checkpoint))
                for path in sorted((source / checkpoint).rglob("*"))
                if path.is_file()
            ]
            if index == 0:  # the replay plays the lowest seed's recorded showcases
                recorded = [row for row in rows if row["showcase_path"]]
                keep = [recorded[i] for i in replayed_rows(len(recorded), max_replayed)]
                copies += [(source / row["showcase_path"], target / row["showcase_path"]) for row in keep]
    for origin, destination in copies:
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, destination)
    return [destination for _, destination in copies]
