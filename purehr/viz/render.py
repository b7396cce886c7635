"""Everything rendered from a run directory (docs/protocol.md, "Rendering"), in one call.

Rendering only reads the run directory, so it can be rerun at any time (after a resumed run,
on another machine) without touching checkpoints or logs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from purehr.run.store.run_dir import FIGURES, FINAL_METRICS_CSV, RunDirectory
from purehr.viz.learning_curves import plot_learning_figure, plot_training_log, write_final_metrics
from purehr.viz.pbt_figures import PBT_FIGURES, render_pbt_figures
from purehr.viz.replay import render_replay, replays_images
from purehr.viz.run_data import RunData, load_run

REPLAY_TASK = "swing"


def render_run(run_dir: str | Path, *, tasks: list[str] | None = None, replay: bool = True) -> list[Path]:
    """Learning and training-log figures per task (a PBT run's population figures too) and
    final_metrics.csv; with ``replay`` also the replay video, poster, timeline and HTML player of
    ``replay_task``'s showcases (the swing's, else a task's whose environment renders itself).
    Returns the paths written."""
    run = load_run(run_dir, tasks)
    figures_dir = run.run_dir / FIGURES
    written: list[Path] = []
    for task in run.tasks:
        written += plot_learning_figure(run, task, figures_dir)
        written += plot_training_log(run, task, figures_dir)
    written += render_pbt_figures(run)  # a PBT run's hyperparameters, lineage and members; [] otherwise
    written.append(write_final_metrics(run, run.run_dir / FINAL_METRICS_CSV))
    replayed = replay_task(run) if replay else None
    if replayed is not None:
        outputs = render_replay(run, figures_dir, task=replayed)
        written += [outputs.video, outputs.poster, outputs.timeline, outputs.html]
    return written


def replay_task(run: RunData) -> str | None:
    """The task the replay shows: the swing (drawn by ``purehr.viz.swing_drawing``), else the
    first whose showcase episodes hold its environment's own frames (``render(state, params)``,
    docs/environments.md), else None."""
    if REPLAY_TASK in run.logs:
        return REPLAY_TASK
    for task, logs in run.logs.items():
        log = logs[min(logs)]
        paths = [str(path) for path in log.checkpoints.get("showcase_path", []) if str(path)]
        if paths and replays_images(run.run_dir / paths[0]):
            return task
    return None


def expected_figures(tasks: list[str], pbt: bool = False) -> list[str]:
    """The files ``render_run`` writes under ``figures/`` for ``tasks`` (a task name may hold a
    colon: ``gymnax:CartPole-v1_learning.png``): each task's learning figure and training log
    (with ``pbt``, its population's figures too), and the replay's player where the replayed
    task (swing) is among them."""
    figures = ("learning", "training_log") + (PBT_FIGURES if pbt else ())
    names = [
        f"{figure}_{task}.{suffix}" if figure.startswith("pbt_") else f"{task}_{figure}.{suffix}"
        for task in tasks
        for figure in figures
        for suffix in ("png", "pdf")
    ]
    return names + (["replay.html"] if REPLAY_TASK in tasks else [])


def missing_figures(run_dir: str | Path) -> list[str]:
    """The files of ``expected_figures`` for the run's tasks that ``figures/`` lacks."""
    manifest = RunDirectory(Path(run_dir)).read_manifest()
    figures = Path(run_dir) / FIGURES
    expected = expected_figures(manifest["tasks"], pbt=manifest.get("pbt") is not None)
    return [name for name in expected if not (figures / name).exists()]


def render_figures_only(run_dir: str | Path) -> list[Path]:
    """Redraw the figures and final metrics (e.g. after refresh-baseline changed the
    manifest's baselines) and leave the replay exactly as it is."""
    return render_run(run_dir, replay=False)


def render_trained_run(run_dir: str | Path, *, diverged: bool = False) -> list[Path]:
    """The last step of ``scripts/train_all_seeds.py``: ``render_run`` after training, with its
    time recorded in the manifest (``render_s``, ``wall_time_with_render_s``). A diverged run
    is rendered as far as it goes: its failure is printed, not raised."""
    directory = RunDirectory(Path(run_dir))
    replayed = REPLAY_TASK in directory.read_manifest()["tasks"]
    print(f"rendering the figures{' and the replay' if replayed else ''} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    written: list[Path] = []
    try:
        written = render_run(run_dir)
    except Exception as raised:
        if not diverged:
            raise
        print(f"rendering the diverged run failed: {type(raised).__name__}: {raised}", file=sys.stderr)
    render_s = time.perf_counter() - started
    manifest = directory.read_manifest()
    manifest.update(render_s=render_s, wall_time_with_render_s=(manifest.get("wall_time_s") or 0.0) + render_s)
    directory.write_manifest(manifest)
    return written
