"""The sweep's heat map: mean held-out success and return over seeds on one or two swept axes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from purehr.viz.learning_curves import save_figure

if TYPE_CHECKING:
    from purehr.experiments.sweep import GroupResult


def heatmap_axes(axes: Mapping[str, Sequence[float]], chosen: Sequence[str] | None = None) -> list[str]:
    """The (up to) two axes of the heat map: ``chosen``, else the two with most values
    (an axis with a single value only when nothing else is swept)."""
    if chosen:
        for name in chosen:
            if name not in axes:
                raise ValueError(f"heat-map axis {name!r} is not swept; swept axes: {list(axes)}")
        if len(chosen) > 2 or len(set(chosen)) != len(chosen):
            raise ValueError(f"heat-map axes {list(chosen)}: expected one or two distinct swept axes")
        return list(chosen)
    ordered = sorted(axes, key=lambda name: -len(axes[name]))  # stable: ties keep CLI order
    varied = [name for name in ordered if len(axes[name]) > 1]
    return (varied or ordered)[:2]


def plot_heatmap(
    groups: list[GroupResult],
    axes: Mapping[str, Sequence[float]],
    shown: Sequence[str],
    out_dir: Path,
    reduce: str = "max",
    stem: str = "heatmap",
) -> list[Path]:
    """``heatmap.{png,pdf}``: per group, mean held-out success (top) and return (bottom) over
    seeds on the two ``shown`` axes; other swept axes are reduced with ``max`` (the best
    setting at that cell) or ``mean``."""
    if reduce not in ("max", "mean"):
        raise ValueError(f"reduce={reduce!r}: expected 'max' or 'mean'")
    x_name = shown[0] if shown else None
    y_name = shown[1] if len(shown) > 1 else None
    x_values = list(axes[x_name]) if x_name else [None]
    y_values = list(axes[y_name]) if y_name else [None]
    metrics = [("success_rate", "held-out success", "%.0f%%", 100.0), ("return_mean", "held-out return", "%.3g", 1.0)]
    fig = Figure(figsize=(max(4.0, 1.1 * len(x_values) + 2.2) * len(groups), 2 * max(2.6, 0.75 * len(y_values) + 1.4)))
    grid = fig.subplots(len(metrics), len(groups), squeeze=False)
    for column, group in enumerate(groups):
        num_seeds = len(group.seeds)
        for row_index, (metric, label, fmt, scale) in enumerate(metrics):
            ax = grid[row_index][column]
            cells = np.full((len(y_values), len(x_values)), np.nan)
            for yi, y in enumerate(y_values):
                for xi, x in enumerate(x_values):
                    values = []
                    for index, setting in enumerate(group.settings):
                        if (x_name and setting[x_name] != x) or (y_name and setting[y_name] != y):
                            continue
                        values.append(np.mean(group.evaluation[metric][index * num_seeds : (index + 1) * num_seeds]))
                    if values:
                        cells[yi, xi] = np.max(values) if reduce == "max" else np.mean(values)
            vmin, vmax = (0.0, 1.0) if metric == "success_rate" else (np.nanmin(cells), np.nanmax(cells) + 1e-12)
            image = ax.imshow(cells, cmap="viridis", vmin=vmin, vmax=vmax, origin="lower", aspect="auto")
            for yi in range(len(y_values)):
                for xi in range(len(x_values)):
                    value = cells[yi, xi]
                    shade = (value - vmin) / (vmax - vmin) if np.isfinite(value) and vmax > vmin else 0.0
                    ax.text(
                        xi,
                        yi,
                        fmt % (scale * value),
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="black" if shade > 0.6 else "white",
                    )
            ax.set_xticks(range(len(x_values)), [f"{v:g}" for v in x_values] if x_name else [""])
            ax.set_yticks(range(len(y_values)), [f"{v:g}" for v in y_values] if y_name else [""])
            ax.set_xlabel(x_name or "")
            ax.set_ylabel(y_name or "")
            others = [a for a in axes if a not in shown]
            note = f"; {reduce} over {', '.join(others)}" if others else ""
            ax.set_title(f"{group.name}: {label}\n(mean over {num_seeds} seeds{note})", fontsize=9)
            fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)
