"""Learning figures, the training-log figure and the final-metrics CSV of a run.

The seed is the experimental unit: the figures show every seed as a thin line and the mean
across seeds with a two-sided 95% Student-t interval (``purehr.reports.stats.t_interval``).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from purehr.reports.stats import MIN_INFORMATIVE_SEEDS, clip_to_range, metric_range, t_interval
from purehr.run.store.files import atomic_output, write_csv
from purehr.run.store.reported import reported_rows
from purehr.viz.run_data import RunData, SeedLog

# Okabe & Ito (2008), a palette that stays distinguishable under the common colour-vision
# deficiencies.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
PPO_COLOUR = OKABE_ITO["blue"]
BASELINE_COLOUR = OKABE_ITO["vermillion"]
FLOOR_COLOUR = "0.3"
FLOOR_STYLES = [":", "-."]  # two floors at different levels stay apart without colour
HIGHLIGHT_COLOUR = OKABE_ITO["orange"]
SEED_COLOURS = [
    OKABE_ITO[name] for name in ("blue", "orange", "green", "purple", "sky_blue", "vermillion", "yellow", "black")
]

METRIC_LABELS = {
    "eval_success_rate": "held-out success rate",
    "eval_return_mean": "held-out mean return",
    "eval_alignment": "held-out HRV alignment (Pearson r)",
}
# metrics bounded by definition get fixed axes (a wide t band with few seeds would otherwise
# stretch them past what the metric can take)
METRIC_LIMITS = {"eval_success_rate": (-0.03, 1.03), "eval_alignment": (-1.05, 1.05)}
STEPS_FORMATTER = EngFormatter(sep="")


# ---------------------------------------------------------------- aggregation over seeds


@dataclass(frozen=True)
class SeedAggregate:
    """A checkpoint metric at the targets every seed has reached (seeds may be mid-run)."""

    target_steps: np.ndarray
    steps: np.ndarray  # mean actual steps over seeds, the x of the mean curve
    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    num_seeds: int


def aggregate_over_seeds(
    logs: list[SeedLog], column: str, confidence: float = 0.95, max_target: float = math.inf
) -> SeedAggregate:
    """Align seeds on ``target_steps`` (identical across seeds by protocol, whereas the actual
    step counts may differ between seeds) and summarise ``column`` across them."""
    shared = set.intersection(*(set(log.checkpoints["target_steps"].tolist()) for log in logs))
    targets = np.array(sorted(target for target in shared if target <= max_target))
    rows = [np.searchsorted(log.checkpoints["target_steps"], targets) for log in logs]
    steps = np.array([log.checkpoints["actual_steps"][row] for log, row in zip(logs, rows)])
    values = np.array([log.checkpoints[column][row] for log, row in zip(logs, rows)])
    mean, lower, upper = t_interval(values, confidence)
    return SeedAggregate(targets, steps.mean(axis=0), mean, lower, upper, len(logs))


# ---------------------------------------------------------------- drawing


def draw_seed_curves(
    ax: Axes, logs: list[SeedLog], column: str, *, max_target: float = math.inf, highlight_seed: int | None = None
) -> None:
    """Thin line per seed, the mean and its 95% t band; the learning figure and the replay
    both use it so they cannot disagree."""
    single_seed_label = "single seed"  # one legend entry for all the thin lines
    for log in logs:
        keep = log.checkpoints["target_steps"] <= max_target
        steps, values = log.checkpoints["actual_steps"][keep], log.checkpoints[column][keep]
        if log.seed == highlight_seed:
            ax.plot(
                steps,
                values,
                color=HIGHLIGHT_COLOUR,
                linewidth=2.2,
                marker="o",
                markersize=3,
                zorder=3,
                label=f"seed {log.seed} (replayed)",
            )
        else:
            ax.plot(steps, values, color=PPO_COLOUR, linewidth=0.8, alpha=0.45, zorder=2, label=single_seed_label)
            single_seed_label = None
    aggregate = aggregate_over_seeds(logs, column, max_target=max_target)
    ax.plot(
        aggregate.steps,
        aggregate.mean,
        color=PPO_COLOUR,
        linewidth=2.4,
        label=f"mean of {aggregate.num_seeds} seeds",
        zorder=4,
    )
    if aggregate.num_seeds > 1:
        lower, upper = clip_to_range(aggregate.lower, aggregate.upper, metric_range(column))
        ax.fill_between(
            aggregate.steps,
            lower,
            upper,
            color=PPO_COLOUR,
            alpha=0.18,
            linewidth=0,
            label=band_label(aggregate.num_seeds),
        )
    ax.xaxis.set_major_formatter(STEPS_FORMATTER)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(METRIC_LABELS.get(column, column))
    ax.grid(alpha=0.3)


def band_label(num_seeds: int) -> str:
    """The band's legend entry: what it is, and when too few seeds make it say little
    (t(0.975, 1) = 12.7 makes two seeds' band cover a whole success panel; the band is clipped
    to the metric's range, see ``draw_seed_curves``). The same words in every panel."""
    if num_seeds < MIN_INFORMATIVE_SEEDS:
        return f"95% t interval of {num_seeds} seeds\n(too few: it says little)"
    return "95% t interval (seed = unit)"


OFF_SCALE = "off scale"


def _draw_level(ax: Axes, value: float, label: str, *, with_value: bool = True, **style) -> None:
    """A horizontal reference line when it fits without squeezing the curves below a third
    of the axis; otherwise an off-scale entry in the legend (keeps the curves readable,
    hides nothing)."""
    low, high = ax.get_ylim()
    span = high - low
    if low - span <= value <= high + span:
        ax.axhline(value, label=f"{label} = {value:.3g}" if with_value else label, zorder=1.5, **style)
        return
    where = "above" if value > high else "below"
    ax.plot([], [], label=f"{label}\n= {value:.4g}, {OFF_SCALE} ({where})", **style)


def draw_baseline(ax: Axes, value: float, name: str, *, with_value: bool = True) -> None:
    """The reference controller's level, dashed; its full name wraps (never cut)."""
    _draw_level(
        ax,
        value,
        textwrap.fill(f"baseline: {name}", width=44),
        with_value=with_value,
        color=BASELINE_COLOUR,
        linestyle="--",
        linewidth=1.6,
    )


def draw_floors(ax: Axes, floors: dict[str, float], *, with_value: bool = True, merge_equal: bool = True) -> None:
    """The levels of doing nothing useful (zero action, no-op, random), dotted or
    dash-dotted (one style per floor, in the manifest's order); with ``merge_equal``,
    floors at the same value share one line and one entry."""
    styles = {name: FLOOR_STYLES[index % len(FLOOR_STYLES)] for index, name in enumerate(floors)}
    groups: dict[float | str, list[str]] = {}
    for name, value in floors.items():
        if math.isfinite(value):
            groups.setdefault(round(float(value), 12) if merge_equal else name, []).append(name)
    for names in groups.values():
        _draw_level(
            ax,
            floors[names[0]],
            f"floor: {' and '.join(names)}",
            with_value=with_value,
            color=FLOOR_COLOUR,
            linestyle=styles[names[0]],
            linewidth=1.6,
        )


def draw_reference_levels(ax: Axes, run: RunData, task: str, column: str, *, with_values: bool = True) -> None:
    """Baseline and floors of ``column`` (``eval_<metric>``) from the manifest, where it has
    them. Without values in the labels, every panel's entries read the same (one shared
    legend) and floors are not merged."""
    metric = column.removeprefix("eval_")
    baseline = run.baseline(task)
    if baseline is not None and metric in baseline[1]:
        draw_baseline(ax, float(baseline[1][metric]), baseline[0], with_value=with_values)
    draw_floors(
        ax,
        {
            name: float(metrics[metric])
            for name, metrics in run.floors(task).items()
            if metric in metrics and metrics[metric] is not None
        },
        with_value=with_values,
        merge_equal=with_values,
    )


def legend_below(fig: Figure, legend_ax: Axes, ax: Axes, *, ncol: int = 2, fontsize: float = 8) -> None:
    """``ax``'s legend in ``legend_ax``, an empty axes below it: a legend inside the data
    area covers curves or bands somewhere, whatever ``loc`` says."""
    legend_ax.set_axis_off()
    handles, labels = ax.get_legend_handles_labels()
    legend_ax.legend(
        handles, labels, loc="upper center", ncol=ncol, fontsize=fontsize, frameon=False, borderaxespad=0.0
    )


def _metric_columns(logs: list[SeedLog]) -> list[str]:
    """Success (where the environment defines it: a column of NaN only is an environment
    without success, e.g. gymnax's), the return, and the alignment when logged."""
    optional = ["eval_alignment"]
    columns = ["eval_return_mean"]
    if defines_success(logs):
        columns.insert(0, "eval_success_rate")
    return columns + [name for name in optional if all(name in log.checkpoints for log in logs)]


def defines_success(logs: list[SeedLog]) -> bool:
    """Whether any checkpoint of any seed logged a held-out success rate (NaN throughout: the
    environment defines no success)."""
    return any(np.isfinite(log.checkpoints.get("eval_success_rate", np.array([np.nan]))).any() for log in logs)


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """PDF for the paper, PNG for the README; both written atomically."""
    paths = []
    for suffix, options in ((".pdf", {}), (".png", {"dpi": 150})):
        path = out_dir / f"{stem}{suffix}"
        with atomic_output(path) as partial:
            fig.savefig(partial, format=suffix[1:], bbox_inches="tight", **options)
        paths.append(path)
    return paths


def plot_learning_figure(run: RunData, task: str, out_dir: Path) -> list[Path]:
    """``<task>_learning.{pdf,png}``: held-out success (where defined) and return (and alignment
    when logged) against environment steps, with the reference policy (where the task has one)
    and the floors as lines."""
    return save_figure(learning_figure(run, task), out_dir, f"{task}_learning")


def learning_figure(run: RunData, task: str) -> Figure:
    """The learning figure: one panel per metric, each with its legend beneath it."""
    logs = list(run.logs[task].values())
    columns = _metric_columns(logs)
    fig = Figure(figsize=(5.2 * len(columns), 4.8), layout="constrained")
    grid = fig.add_gridspec(2, len(columns), height_ratios=[4.0, 0.75])
    for index, column in enumerate(columns):
        ax = fig.add_subplot(grid[0, index])
        draw_seed_curves(ax, logs, column)
        if column in METRIC_LIMITS:
            ax.set_ylim(*METRIC_LIMITS[column])
        draw_reference_levels(ax, run, task, column)
        legend_below(fig, fig.add_subplot(grid[1, index]), ax)
    title = f"{task}: PPO held-out evaluation at each checkpoint ({len(logs)} seeds)"
    if not defines_success(logs):
        title += "\n(no success defined for this environment: held-out return only)"
    fig.suptitle(title)
    return fig


def plot_training_log(run: RunData, task: str, out_dir: Path) -> list[Path]:
    """``<task>_training_log.{pdf,png}``: the mean completed-episode return of each update, per
    seed (training episodes, stochastic policy: not the held-out measure)."""
    return save_figure(training_log_figure(run, task), out_dir, f"{task}_training_log")


SPARSE_POINTS = 60
"""Below this many logged returns a seed's line gets markers: a handful of points joined by
lines would hide which updates completed an episode."""


def training_log_figure(run: RunData, task: str) -> Figure:
    """Updates that complete no episode (swing episodes are longer than a short rollout) log
    NaN, and a line plot draws nothing between NaNs: plot each seed's finite returns only,
    joined in step order, and say how many updates had none."""
    fig = Figure(figsize=(6.5, 4.4), layout="constrained")
    grid = fig.add_gridspec(2, 1, height_ratios=[4.0, 0.4])
    ax = fig.add_subplot(grid[0])
    skipped, totals = [], []  # per seed
    for index, log in enumerate(run.logs[task].values()):
        steps, returns = log.updates["env_steps"], log.updates["mean_episode_return"]
        finite = np.isfinite(returns)
        skipped.append(int(np.sum(~finite)))
        totals.append(len(returns))
        sparse = np.sum(finite) < SPARSE_POINTS
        ax.plot(
            steps[finite],
            returns[finite],
            color=SEED_COLOURS[index % len(SEED_COLOURS)],
            linewidth=1.0,
            marker="o" if sparse else None,
            markersize=3,
            label=f"seed {log.seed}" + ("" if finite.any() else " (no episode completed)"),
        )
    ax.xaxis.set_major_formatter(STEPS_FORMATTER)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("mean return of completed training episodes")
    title = f"{task}: training log"
    if any(skipped):
        title += f"\n({skipped_updates_note(skipped, totals)} completed no episode; not drawn)"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    legend_below(fig, fig.add_subplot(grid[1]), ax, ncol=min(5, max(1, len(run.logs[task]))))
    return fig


def skipped_updates_note(skipped: list[int], totals: list[int]) -> str:
    """How many updates of each seed logged no return, counted per seed (a sum over seeds would
    read as more updates than the run made): '13 of 49 updates' for one seed, '12 to 15 of 49
    updates per seed' for several."""

    def span(values: list[int]) -> str:
        low, high = min(values), max(values)
        return f"{low:,}" if low == high else f"{low:,} to {high:,}"

    per_seed = "" if len(totals) == 1 else " per seed"
    return f"{span(skipped)} of {span(totals)} updates{per_seed}"


# ---------------------------------------------------------------- final metrics


def write_final_metrics(run: RunData, path: Path) -> Path:
    """One row per task and seed: the reported checkpoint's held-out metrics (the numbers a
    results table quotes: the last checkpoint's, or the one the run chose on validation
    episodes, ``purehr.run.choose_reported``). Tasks have different eval_ columns; absent ones stay empty."""
    metric_names: list[str] = []
    for task_logs in run.logs.values():
        for log in task_logs.values():
            metric_names += [name for name in log.checkpoints if name.startswith("eval_") and name not in metric_names]
    header = ["task", "seed", "target_steps", "actual_steps", "elapsed_s", *metric_names]
    rows = []
    for task, task_logs in run.logs.items():
        chosen = reported_rows(run.run_dir, task, list(task_logs)) or [None] * len(task_logs)
        for (seed, log), row in zip(task_logs.items(), chosen):
            steps = list(log.checkpoints["actual_steps"])
            index = -1 if row is None else steps.index(row["actual_steps"])
            values = {name: column[index] for name, column in log.checkpoints.items()}
            if row is not None:  # a quick checkpoint's held-out numbers are the report's full evaluation
                values.update({name: value for name, value in row.items() if name.startswith("eval_")})
            rows.append({"task": task, "seed": seed, **values})
    return write_csv(path, header, rows)
