"""A sweep on the dashboards (``scripts/sweep.py --log``): each trained group's runs, one per
setting x seed, logged once the group's compiled call returns (a sweep neither checkpoints nor
resumes, so its per-update metrics come back with the result: no callback slows the grid).
TensorBoard's run of a setting is ``<task>/<group>/<setting>/seed_<k>``; W&B groups them by
the sweep's directory name."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from purehr.experiments.group_result import GroupResult
from purehr.run.dashboards import run_identity
from purehr.run.store.machine import environment_description
from purehr.tracking import TrackingSettings, start_tracking
from purehr.tracking.settings import RUN_FOLDERS


def setting_label(setting: dict[str, float]) -> str:
    """``learning_rate=0.001,clip_range=0.2`` (the grid's own values; "default" for none)."""
    return ",".join(f"{name}={value:g}" for name, value in setting.items()) or "default"


def clear_dashboards(out_dir: Path, settings: TrackingSettings) -> None:
    """An overwritten sweep's dashboards go with it (their steps would count as logged)."""
    for name in settings.backends:
        folder = Path(out_dir) / RUN_FOLDERS[name]
        if folder.is_dir() and not (name == "tensorboard" and settings.log_dir is not None):
            shutil.rmtree(folder)


def log_group(settings: TrackingSettings, out_dir: Path, task: str, group: GroupResult) -> None:
    """Every run of ``group``: its updates at their env steps, its held-out metrics at the last."""
    settings = settings.with_run_ids([_label(task, group, setting) for setting in group.settings], group.seeds)
    runs, kept, identity = {}, {}, run_identity(environment_description())
    batch = group.config.batch_size
    for run in range(group.num_runs):
        setting, seed = group.run_setting(run), group.run_seed(run)
        label = _label(task, group, setting)
        config = group.config.replace(**setting).to_dict()
        runs[(label, seed)] = {"config": config, "identity": identity, "wandb_id": settings.run_id(label, seed)}
        success = group.evaluation.get("success_rate")  # NaN: the task defines no success
        runs[(label, seed)]["defines_success"] = success is None or bool(np.isfinite(success[run]))
        updates = [
            {
                "env_steps": (update + 1) * batch,
                **{name: float(values[run, update]) for name, values in group.training_metrics.items()},
            }
            for update in range(group.config.num_updates)
            if np.asarray(group.training_metrics["update"])[run, update] > 0  # not after a stop
        ]
        heldout = {"actual_steps": group.config.num_updates * batch}
        heldout.update({f"eval_{name}": float(values[run]) for name, values in group.evaluation.items()})
        kept[(label, seed)] = (updates, [heldout])
    start_tracking(settings, Path(out_dir), Path(out_dir).name, runs, kept).close()


def _label(task: str, group: GroupResult, setting: dict[str, float]) -> str:
    return f"{task}/{group.name}/{setting_label(setting)}"
