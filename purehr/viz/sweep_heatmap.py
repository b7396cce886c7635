"""The sweep's heat map: mean held-out success and return over seeds on one or two swept axes,
drawn from plain rows (the ranking computes the means over seeds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from purehr.viz.learning_curves import save_figure


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


HEATMAP_METRICS = (
    ("success_rate", "held-out success", "%.0f%%", 100.0),
    ("return_mean", "held-out return", "%.3g", 1.0),
)
"""Per row of panels: the metric (its ``{metric}_mean`` column), its label, format and scale."""


def plot_heatmap(
    rows: Sequence[Mapping[str, Any]],
    axes: Mapping[str, Sequence[float]],
    shown: Sequence[str],
    out_dir: Path,
    reduce: str = "max",
    stem: str = "heatmap",
) -> list[Path]:
    """``heatmap.{png,pdf}``: per group (one column, in the order of ``rows``), mean held-out
    success (top; left out where no setting has a finite one: an environment without success) and
    return (bottom) over seeds on the two ``shown`` axes; other swept axes are
    reduced with ``max`` (the best setting at that cell) or ``mean``. ``rows``: one per (group,
    setting) with ``group``, every swept axis, ``seeds`` and each metric's ``{metric}_mean``
    (``purehr.experiments.ranking.setting_rows``). A setting with ``diverged_seeds`` is left
    out of its cell (its frozen policy's score is no result); a cell of diverged settings only
    reads "diverged"."""
    if reduce not in ("max", "mean"):
        raise ValueError(f"reduce={reduce!r}: expected 'max' or 'mean'")
    x_name = shown[0] if shown else None
    y_name = shown[1] if len(shown) > 1 else None
    x_values = list(axes[x_name]) if x_name else [None]
    y_values = list(axes[y_name]) if y_name else [None]
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_group.setdefault(row["group"], []).append(row)
    others = [a for a in axes if a not in shown]
    note = f"; {reduce} over {', '.join(others)}" if others else ""
    # an environment that defines no success (gymnax's, Brax's) has NaN success everywhere: return only
    success_defined = any(np.isfinite(row.get("success_rate_mean", np.nan)) for row in rows)
    metrics = [entry for entry in HEATMAP_METRICS if success_defined or entry[0] != "success_rate"]
    fig = Figure(
        figsize=(
            max(4.0, 1.1 * len(x_values) + 2.2) * len(by_group),
            len(metrics) * max(2.6, 0.75 * len(y_values) + 1.4),
        )
    )
    grid = fig.subplots(len(metrics), len(by_group), squeeze=False)
    for column, (group, group_rows) in enumerate(by_group.items()):
        for row_index, (metric, label, fmt, scale) in enumerate(metrics):
            ax = grid[row_index][column]
            healthy = [row for row in group_rows if not row.get("diverged_seeds")]
            cells = _cells(healthy, f"{metric}_mean", (x_name, x_values), (y_name, y_values), reduce)
            diverged = np.isnan(cells) & ~np.isnan(
                _cells(group_rows, f"{metric}_mean", (x_name, x_values), (y_name, y_values), reduce)
            )
            finite = cells[np.isfinite(cells)]
            limits = (0.0, 1.0) if metric == "success_rate" else _value_limits(finite)
            image = _draw_cells(ax, cells, limits, fmt, scale, diverged)
            ax.set_xticks(range(len(x_values)), [f"{v:g}" for v in x_values] if x_name else [""])
            ax.set_yticks(range(len(y_values)), [f"{v:g}" for v in y_values] if y_name else [""])
            ax.set_xlabel(x_name or "")
            ax.set_ylabel(y_name or "")
            ax.set_title(f"{group}: {label}\n(mean over {group_rows[0]['seeds']} seeds{note})", fontsize=9)
            fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


def _cells(
    rows: Sequence[Mapping[str, Any]],
    column: str,
    x_axis: tuple[str | None, list],
    y_axis: tuple[str | None, list],
    reduce: str,
) -> np.ndarray:
    """(y values, x values): ``column`` of the rows at each cell, reduced over the axes not
    shown (NaN where no row falls)."""
    (x_name, x_values), (y_name, y_values) = x_axis, y_axis
    cells = np.full((len(y_values), len(x_values)), np.nan)
    for yi, y in enumerate(y_values):
        for xi, x in enumerate(x_values):
            values = [
                row.get(column, np.nan)
                for row in rows
                if not ((x_name and row[x_name] != x) or (y_name and row[y_name] != y))
            ]
            if values:
                cells[yi, xi] = np.max(values) if reduce == "max" else np.mean(values)
    return cells


def _value_limits(values: np.ndarray) -> tuple[float, float]:
    return (float(values.min()), float(values.max()) + 1e-12) if values.size else (0.0, 1.0)


def _draw_cells(
    ax: Axes, cells: np.ndarray, limits: tuple[float, float], fmt: str, scale: float, diverged: np.ndarray
) -> AxesImage:
    """The cells as an image with each value written on it, dark text on light cells; a cell of
    diverged settings only says so."""
    vmin, vmax = limits
    image = ax.imshow(cells, cmap="viridis", vmin=vmin, vmax=vmax, origin="lower", aspect="auto")
    for (yi, xi), value in np.ndenumerate(cells):
        shade = (value - vmin) / (vmax - vmin) if np.isfinite(value) and vmax > vmin else 0.0
        ax.text(
            xi,
            yi,
            "diverged" if diverged[yi, xi] else fmt % (scale * value),
            ha="center",
            va="center",
            fontsize=8,
            color="black" if shade > 0.6 or not np.isfinite(value) else "white",  # NaN cells are blank
        )
    return image
