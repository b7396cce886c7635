"""Everything rendered from a run directory (docs/protocol.md, "Rendering"), in one call.

Rendering only reads the run directory, so it can be rerun at any time (after a resumed run,
on another machine) without touching checkpoints or logs.
"""

from __future__ import annotations

from pathlib import Path

from purehr.run.run_dir import FIGURES, FINAL_METRICS_CSV
from purehr.viz.learning_curves import plot_learning_figure, plot_training_log, write_final_metrics
from purehr.viz.run_data import load_run

REPLAY_TASK = "swing"


def render_run(run_dir: str | Path, *, tasks: list[str] | None = None,
               replay: bool = True) -> list[Path]:
    """Learning and training-log figures per task and final_metrics.csv; with ``replay``
    (and the swing task among ``tasks``) also the swing replay video, poster, timeline and
    HTML player. Returns the paths written."""
    run = load_run(run_dir, tasks)
    figures_dir = run.run_dir / FIGURES
    written: list[Path] = []
    for task in run.tasks:
        written += plot_learning_figure(run, task, figures_dir)
        written += plot_training_log(run, task, figures_dir)
    written.append(write_final_metrics(run, run.run_dir / FINAL_METRICS_CSV))
    if replay and REPLAY_TASK in run.logs:
        from purehr.viz.replay import render_replay  # imageio/ffmpeg only when needed

        outputs = render_replay(run, figures_dir, task=REPLAY_TASK)
        written += [outputs.video, outputs.poster, outputs.timeline, outputs.html]
    return written


def render_figures_only(run_dir: str | Path) -> list[Path]:
    """Redraw the figures and final metrics (e.g. after refresh-baseline changed the
    manifest's baselines) and leave the replay exactly as it is."""
    return render_run(run_dir, replay=False)
