"""The end of a run on its dashboards: the results table and each task's figures, added to
every task x seed's TensorBoard and W&B run at the task's last step (after rendering, so the
figures are the ones in ``figures/``). Publishing again adds them again; no series changes."""

from __future__ import annotations

import sys
from pathlib import Path

from purehr.reports.results_table import results_table
from purehr.reports.run_statistics import robust_table
from purehr.run.dashboards import run_identity
from purehr.run.store.record import recorded_config
from purehr.run.store.run_dir import FIGURES, RunDirectory
from purehr.tracking import Tracking, TrackingSettings, start_tracking

FIGURES_PUBLISHED = ("learning", "training_log")


def publish_to_dashboards(run_dir: str | Path, tracking: Tracking | None = None) -> bool:
    """Adds the table and figures of a finished run to the dashboards its manifest records,
    into ``tracking`` (the run's, still open: ``train_all_seeds(..., keep_dashboards_open=True)``)
    or into its runs opened again; closes them. False (nothing done) for a run logged to none."""
    directory = RunDirectory(Path(run_dir))
    manifest = directory.read_manifest()
    settings = TrackingSettings.from_json(manifest.get("tracking"))
    if not settings.enabled:
        return False
    print(f"adding the results table and figures to {', '.join(settings.backends)} ...", file=sys.stderr, flush=True)
    table = results_table(directory.root)
    if manifest.get("pbt") is None:  # PBT members copy each other's weights: no bootstrap over them
        table += "\n" + robust_table(directory.root)
    reopen = tracking is None
    if reopen:
        tracking = start_tracking(settings.validated(), directory.root, directory.root.name, {})
    for task in manifest["tasks"]:
        figures = {name: directory.root / FIGURES / f"{task}_{name}.png" for name in FIGURES_PUBLISHED}
        figures = {name: path for name, path in figures.items() if path.exists()}
        config = recorded_config(manifest, task)
        step = config.num_updates * config.batch_size  # the last update's (a budget runs whole updates)
        for seed in manifest["seeds"]:
            if reopen:
                run = {
                    "config": manifest["configs"][task],
                    "identity": run_identity(manifest),
                    "wandb_id": settings.run_id(task, seed),
                    "publishing": True,
                }
                tracking.open({(task, seed): run}, {})
            tracking.publish(task, seed, step, table, figures)
    tracking.close()
    return True
