"""The run's dashboards (``--log``): each task x seed's TensorBoard run and W&B run opened with
its configuration and the manifest fields that identify the run, and on a resume given the rows
the run kept that a backend does not hold yet (``purehr.tracking.backend``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from purehr.envs.rollout import defines_success
from purehr.run.compiled.train_all import TaskSetup
from purehr.run.planning.run_plan import RunPlan, log_dir_owner
from purehr.run.store.run_dir import RunDirectory
from purehr.tracking import Tracking, TrackingSettings, start_tracking
from purehr.tracking.naming import run_label

IDENTITY_FIELDS = ("git_revision", "versions", "platform", "devices", "precision", "command")


def run_identity(manifest: dict[str, Any]) -> dict[str, Any]:
    """What tells this run from another on a dashboard (the manifest's fields of that name)."""
    return {name: manifest.get(name) for name in IDENTITY_FIELDS}


def claim_log_dir(plan: RunPlan) -> None:
    """Claims the run's TensorBoard folders in its ``--log-dir`` (none in its own directory),
    holding the run directory's lock, before anything is written: a run that checked the same
    folders at the same moment gets them or is refused here (``purehr.tracking.claims``)."""
    recorded = TrackingSettings.from_json(plan.manifest.get("tracking")) if plan.resumed else None
    owner, logged_here = log_dir_owner(plan.tracking, plan.run_dir, recorded)
    if owner is not None:
        labels = [run_label(task, seed) for task in plan.tasks for seed in plan.seeds]
        plan.tracking.take_log_dir(owner, labels, plan.resumed, logged_here)


def open_run_tracking(
    run_dir: RunDirectory,
    plan: RunPlan,
    setups: list[TaskSetup],
    resumed_from: dict[str, int],
    kept_rows: tuple[dict, dict],
    say: Callable[[str], None],
) -> Tracking | None:
    """The run's ``Tracking`` (None without ``--log``), its runs opening on the worker thread
    while the program compiles. ``kept_rows``: (update rows, checkpoint rows), task -> seed -> rows."""
    settings = plan.tracking
    if not settings.enabled:
        return None
    identity = run_identity(run_dir.read_manifest())
    runs = {
        (setup.name, seed): {
            "config": setup.config.to_dict(),
            "identity": identity,
            "wandb_id": settings.run_id(setup.name, seed),
            "resumed_from_steps": resumed_from.get(setup.name, 0),
            "defines_success": defines_success(setup.env),
        }
        for setup in setups
        for seed in plan.seeds
    }
    update_rows, checkpoint_rows = kept_rows
    kept = {(name, seed): (update_rows[name][seed], checkpoint_rows[name][seed]) for name, seed in runs}
    return start_tracking(settings, run_dir.root, run_dir.root.name, runs, kept, say)
