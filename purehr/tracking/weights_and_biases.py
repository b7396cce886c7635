"""Weights & Biases through ``wandb``: one W&B run per task x seed, grouped by the run's name
(the dashboard overlays a task's seeds), its id kept in the manifest so that a resume continues
the same W&B run. Offline unless the user asks for online (``--wandb-mode``, ``WANDB_MODE``):
the files go to ``<run directory>/wandb`` and ``wandb sync`` uploads them later, a resumed run's
pieces in order.

Across kills: W&B cannot take a step back, and its service buffers what it writes (a SIGKILL
loses the last records), so on a resume each W&B run's last step is read back from its own
transaction logs with wandb's reader (``wandb leet inspect --json``) and only later steps are
logged (``purehr.tracking.backend``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from purehr.tracking.backend import ALL_TAGS, Backend
from purehr.tracking.settings import RUN_FOLDERS


class WandbBackend(Backend):
    name = "wandb"
    synced = False  # its service buffers anyway: a resume reads back what it holds

    def __init__(self, run_dir: Path, mode: str, project: str, entity: str | None, group: str):
        super().__init__()
        self.run_dir, self.mode, self.project, self.entity, self.group = Path(run_dir), mode, project, entity, group
        self.runs: dict[tuple[str, int], Any] = {}
        self.ids: dict[tuple[str, int], str] = {}

    def open(self, task: str, seed: int, run: dict[str, Any]) -> None:
        self.ids[(task, seed)] = run["wandb_id"]
        super().open(task, seed, run)

    def held_steps(self, task: str, seed: int) -> dict[str, int]:
        steps = [step for log in transaction_logs(self.run_dir, self.ids[(task, seed)]) for step in history_steps(log)]
        return {ALL_TAGS: max(steps)} if steps else {}

    def _open(self, task: str, seed: int, run: dict[str, Any], start: str) -> None:
        import wandb

        self.runs[(task, seed)] = wandb.init(
            project=self.project,
            entity=self.entity,
            group=self.group,
            job_type=task,
            name=f"{task}-seed{seed}",
            id=run["wandb_id"],
            resume="allow",
            mode=self.mode,
            dir=str(self.run_dir),
            reinit="create_new",  # one W&B run per task x seed, all open in this process
            config={"task": task, "seed": seed, **run["config"], "run": run["identity"]},
            tags=[task],
            # no console capture (the progress bar stays the user's) and no system-metrics
            # sampler per run (ten of them for the main job)
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True),
        )

    def _log(self, task: str, seed: int, step: int, scalars: dict[str, float]) -> None:
        self.runs[(task, seed)].log(scalars, step=step)

    def publish(self, task: str, seed: int, step: int, table: str, images: dict[str, Any]) -> None:
        import wandb

        run = self.runs[(task, seed)]
        # one step past the last update: a W&B run (resumed here to publish) takes only later steps
        run.log({f"figures/{name}": wandb.Image(str(path)) for name, path in images.items()}, step=step + 1)
        run.summary["results/table"] = table

    def close(self) -> None:
        for run in self.runs.values():
            run.finish()
        self.runs.clear()


def transaction_logs(run_dir: Path, run_id: str) -> list[Path]:
    """Every piece of one W&B run in ``run_dir/wandb`` (a first process and each resume),
    offline or online, oldest first."""
    folders = sorted(
        (Path(run_dir) / RUN_FOLDERS["wandb"]).glob(f"*run-*-{run_id}"), key=lambda path: path.name.split("run-")[-1]
    )
    return [log for folder in folders for log in sorted(folder.glob("*.wandb"))]


def history_records(log: Path) -> list[dict[str, Any]]:
    """The history rows of one transaction log, read by wandb's own reader; a log cut short by
    a kill gives the rows before the cut."""
    command = [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(log)]
    output = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False).stdout
    records = []
    for line in output.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # wandb's note that the file ended early
        if record.get("type") == "history":
            records.append(record["history"]["item"])
    return records


def history_steps(log: Path) -> list[int]:
    return [int(item["_step"]) for item in history_records(log) if "_step" in item]
