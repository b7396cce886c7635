"""Figures of the robust statistics (issue 67): a run's sample-efficiency curves (the IQM of the
held-out return and success over seeds at every checkpoint, with 95% bootstrap bands) and the
performance profile of its normalised return; and a comparison's profiles side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from purehr.viz.learning_curves import OKABE_ITO, STEPS_FORMATTER, save_figure

STATISTICS_STEM = "statistics"
"""``figures/statistics.{pdf,png}`` of a rendered run."""
CURVE_LABELS = {"eval_return_mean": "held-out return (IQM)", "eval_success_rate": "held-out success (IQM)"}
RUN_COLOURS = [OKABE_ITO[name] for name in ("blue", "orange", "green", "purple", "sky_blue", "vermillion")]


def _drawn_curve(entry: dict[str, Any], name: str) -> dict[str, Any] | None:
    curve = entry["curves"].get(name)
    return curve if curve is not None and np.isfinite(np.asarray(curve["value"], float)).any() else None


def run_statistics_figure(statistics: dict[str, Any]) -> Figure:
    """One column per task: its curves (a row per ``CURVE_LABELS`` column some task logged) and the
    performance profile of its normalised return (a row where some task has a floor and a reference)."""
    entries = statistics["tasks"]
    curves = [name for name in CURVE_LABELS if any(_drawn_curve(entry, name) for entry in entries.values())]
    profiles = any(entry.get("normalised_return") is not None for entry in entries.values())
    rows = max(1, len(curves) + profiles)
    fig = Figure(figsize=(4.2 * len(entries), 2.6 * rows), layout="constrained")
    axes = fig.subplots(rows, len(entries), squeeze=False)
    for column, (task, entry) in enumerate(entries.items()):
        for row, name in enumerate(curves):
            ax, curve = axes[row][column], _drawn_curve(entry, name)
            if curve is None:
                ax.set_axis_off()
                continue
            steps = np.asarray(curve["steps"])
            ax.plot(steps, curve["value"], color=OKABE_ITO["blue"])
            ax.fill_between(steps, curve["low"], curve["high"], color=OKABE_ITO["blue"], alpha=0.25, linewidth=0)
            ax.xaxis.set_major_formatter(STEPS_FORMATTER)
            ax.set(title=f"{task}: {CURVE_LABELS[name]}", xlabel="environment steps")
        if not profiles:
            continue
        ax, normalised = axes[-1][column], entry.get("normalised_return")
        if normalised is None:
            ax.set_axis_off()
            continue
        _profile(ax, normalised["profile"], OKABE_ITO["blue"], None)
        ax.set(title=f"{task}: performance profile", xlabel="normalised return (0 floor, 1 reference)")
    return fig


def _profile(ax, profile: dict[str, Any], colour: str, label: str | None) -> None:
    thresholds = np.asarray(profile["thresholds"])
    ax.step(thresholds, profile["fraction"], where="post", color=colour, label=label)
    ax.fill_between(thresholds, profile["low"], profile["high"], step="post", color=colour, alpha=0.2, linewidth=0)
    ax.set(ylabel="fraction of seeds above", ylim=(-0.03, 1.03))


def plot_run_statistics(statistics: dict[str, Any], out_dir: Path) -> list[Path]:
    """``statistics.{pdf,png}`` in ``out_dir``."""
    return save_figure(run_statistics_figure(statistics), out_dir, STATISTICS_STEM)


def comparison_figure(comparison: dict[str, Any]) -> Figure:
    """The performance profiles of the normalised return, one panel per compared pair, the runs
    side by side with their 95% bands."""
    pairs = [pair for pair in comparison["pairs"] if pair["profiles"]]
    if not pairs:
        raise ValueError("no profile to draw: the runs record no floor and reference return for a shared task")
    fig = Figure(figsize=(4.6 * len(pairs), 3.2), layout="constrained")
    axes = fig.subplots(1, len(pairs), squeeze=False)[0]
    for ax, pair in zip(axes, pairs):
        for colour, (label, profile) in zip(RUN_COLOURS, pair["profiles"].items()):
            _profile(ax, profile, colour, label)
        ax.set(title=f"{pair['a']} against {pair['b']}", xlabel="normalised return (0 floor, 1 reference)")
        ax.legend(fontsize=8)
    return fig
