"""The figures of a population-based training run (docs/pbt.md), per task: how each explored
hyperparameter moved, whose weights each member carries (the lineage), and the population's
held-out learning curves with the best member picked out.

Everything is read from checkpoints.csv's ``pbt_`` columns and the manifest's ``pbt`` entry, so
the figures can be redrawn from a copied run directory like every other figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from purehr.run.store.columns import PBT_PREFIX
from purehr.run.store.files import RunDirectoryError
from purehr.run.store.run_dir import CHECKPOINTS_CSV, FIGURES
from purehr.viz.learning_curves import (
    METRIC_LABELS,
    METRIC_LIMITS,
    SEED_COLOURS,
    STEPS_FORMATTER,
    defines_success,
    draw_reference_levels,
    legend_below,
    save_figure,
)
from purehr.viz.run_data import RunData, SeedLog, load_run

COMPLEMENT_SCALE = ("gamma", "gae_lambda")
"""Drawn as 1 - x, the scale PBT explores them in (purehr.population.settings.in_complement_scale:
these and any name ending in gamma or lambda; the viz layer may not import the population code,
which imports JAX)."""


def _complement(name: str) -> bool:
    return name in COMPLEMENT_SCALE or name.endswith(("gamma", "lambda"))


FITNESS_COLORMAP = "viridis"
REQUIRED = ("pbt_fitness", "pbt_parent")


# ---------------------------------------------------------------- pure helpers


def ancestors(parents_by_step: Sequence[Sequence[int]], members: Sequence[int] | None = None) -> np.ndarray:
    """Which original member's weights each member carries after each checkpoint.

    ``parents_by_step[k][i]``: the seed whose weights member ``members[i]`` continues from after
    checkpoint ``k`` (its own seed where it copied nobody); ``members`` defaults to 0..M-1. A copy
    takes the parent's weights as they were before the step, so the ancestry is carried over
    from the previous checkpoint: ancestor[k][i] = ancestor[k - 1][parent] (row -1: itself)."""
    parents = np.asarray(parents_by_step, dtype=np.int64)
    if parents.ndim != 2:
        raise ValueError(f"parents_by_step: expected [checkpoint][member] seeds, got shape {parents.shape}")
    members = list(range(parents.shape[1])) if members is None else [int(m) for m in members]
    if len(members) != parents.shape[1]:
        raise ValueError(f"{parents.shape[1]} parents per checkpoint for {len(members)} members {members}")
    index_of = {seed: index for index, seed in enumerate(members)}
    unknown = sorted(set(parents.ravel().tolist()) - set(index_of))
    if unknown:
        raise ValueError(f"parent seed(s) {unknown} are not members of the population {members}")
    carried = np.asarray(members, dtype=np.int64)
    rows = []
    for step_parents in parents:
        carried = carried[[index_of[int(parent)] for parent in step_parents]]
        rows.append(carried)
    return np.array(rows, dtype=np.int64).reshape(parents.shape)


def best_member(fitness: dict[int, float], returns: dict[int, float]) -> int:
    """The member with the highest final fitness; ties go to the higher held-out mean return,
    then to the lower seed (the population step's own tie rule). NaN ranks last."""

    def rank(seed: int) -> tuple[float, float, int]:
        fit, ret = float(fitness[seed]), float(returns.get(seed, math.nan))
        return (-fit if math.isfinite(fit) else math.inf, -ret if math.isfinite(ret) else math.inf, seed)

    return min(fitness, key=rank)


def to_plotted_scale(name: str, values: np.ndarray) -> np.ndarray:
    """1 - x for gamma and GAE lambda (a horizon), x for the others."""
    values = np.asarray(values, dtype=np.float64)
    return 1.0 - values if _complement(name) else values


def hyperparameter_label(name: str) -> str:
    return f"1 - {name} (log scale)" if _complement(name) else f"{name} (log scale)"


# ---------------------------------------------------------------- the population's table


def is_pbt_run(run: RunData) -> bool:
    return bool(run.manifest.get("pbt"))


def _population(run: RunData, task: str) -> tuple[list[SeedLog], np.ndarray, list[np.ndarray]]:
    """The members' logs, the checkpoint steps they share and, per member, the row of each."""
    logs = list(run.logs[task].values())
    for log in logs:
        missing = [name for name in REQUIRED if name not in log.checkpoints]
        if missing:
            raise RunDirectoryError(f"{log.directory / CHECKPOINTS_CSV}: a PBT run's column(s) {missing} are missing")
    shared = sorted(set.intersection(*(set(log.checkpoints["target_steps"].tolist()) for log in logs)))
    rows = [np.searchsorted(log.checkpoints["target_steps"], shared) for log in logs]
    steps = np.mean([log.checkpoints["actual_steps"][row] for log, row in zip(logs, rows)], axis=0)
    return logs, steps, rows


def _column(log: SeedLog, row: np.ndarray, name: str) -> np.ndarray:
    values = log.checkpoints[name]
    if values.dtype.kind != "f":
        raise RunDirectoryError(f"{log.directory / CHECKPOINTS_CSV}: column {name!r} holds a non-number")
    return values[row]


def _final(logs: list[SeedLog], name: str) -> dict[int, float]:
    return {log.seed: float(log.checkpoints[name][-1]) if name in log.checkpoints else math.nan for log in logs}


def _fitness_label(run: RunData, task: str, logs: list[SeedLog]) -> str:
    rule = (run.manifest["pbt"].get("fitness") or {}).get(task) or ("success" if defines_success(logs) else "return")
    return f"final fitness ({'held-out success rate' if rule == 'success' else 'held-out mean return'})"


def _member_colours(seeds: list[int]) -> dict[int, str | tuple]:
    if len(seeds) <= len(SEED_COLOURS):
        return {seed: SEED_COLOURS[index] for index, seed in enumerate(seeds)}
    palette = colormaps["tab20"]
    return {seed: palette(index % palette.N) for index, seed in enumerate(seeds)}


# ---------------------------------------------------------------- figures


def hyperparameters_figure(run: RunData, task: str) -> Figure:
    """One panel per explored hyperparameter: each member's value as a step line (it holds until
    the next checkpoint), coloured by the member's final fitness; the bounds dashed."""
    logs, steps, rows = _population(run, task)
    settings = run.manifest["pbt"]
    explored = [
        name for name in settings.get("explore", []) if all(PBT_PREFIX + name in log.checkpoints for log in logs)
    ]
    fitness = _final(logs, "pbt_fitness")
    finite = [value for value in fitness.values() if math.isfinite(value)] or [0.0]
    low, high = min(finite), max(finite)
    norm = Normalize(low - 0.5, high + 0.5) if low == high else Normalize(low, high)
    cmap = colormaps[FITNESS_COLORMAP]
    fig = Figure(figsize=(4.6 * max(1, len(explored)) + 1.0, 4.2), layout="constrained")
    axes = [fig.add_subplot(1, max(1, len(explored)), index + 1) for index in range(max(1, len(explored)))]
    for ax, name in zip(axes, explored):
        for log, row in zip(logs, rows):
            colour = cmap(norm(fitness[log.seed])) if math.isfinite(fitness[log.seed]) else "0.6"
            values = to_plotted_scale(name, _column(log, row, PBT_PREFIX + name))
            ax.step(steps, values, where="post", color=colour, linewidth=1.4, alpha=0.9)
        for bound in to_plotted_scale(name, np.asarray(settings.get("bounds", {}).get(name, []), dtype=np.float64)):
            ax.axhline(bound, color="0.3", linestyle="--", linewidth=1.0)
        ax.set_yscale("log")
        ax.set_ylabel(hyperparameter_label(name))
        ax.set_xlabel("environment steps")
        ax.xaxis.set_major_formatter(STEPS_FORMATTER)
        ax.grid(alpha=0.3, which="both")
    fig.colorbar(ScalarMappable(norm, cmap), ax=axes, label=_fitness_label(run, task, logs))
    fig.suptitle(f"{task}: PBT hyperparameters per member ({len(logs)} members; dashed: bounds)")
    return fig


def lineage_figure(run: RunData, task: str) -> Figure:
    """One row per member: a band coloured by the original member whose weights it carries,
    and an arrow from parent to member at each checkpoint where it copied."""
    logs, steps, rows = _population(run, task)
    seeds = [log.seed for log in logs]
    parents = np.array([np.nan_to_num(_column(log, row, "pbt_parent"), nan=log.seed) for log, row in zip(logs, rows)])
    carried = ancestors(parents.T.astype(np.int64), seeds)  # [checkpoint, member]
    colours = _member_colours(seeds)
    ends = np.append(steps[1:], steps[-1] + (steps[-1] - steps[0]) / max(1, 4 * len(steps)))
    fig = Figure(figsize=(8.0, 1.2 + 0.45 * len(seeds)), layout="constrained")
    ax = fig.add_subplot()
    for k, (start, end) in enumerate(zip(steps, ends)):
        for i, seed in enumerate(seeds):
            ax.barh(i, end - start, left=start, height=0.6, color=colours[int(carried[k, i])], linewidth=0)
            if int(parents[i, k]) != seed:
                ax.annotate(
                    "",
                    xy=(start, i),
                    xytext=(start, seeds.index(int(parents[i, k]))),
                    arrowprops={"arrowstyle": "->", "color": "black", "linewidth": 1.0},
                )
    ax.set_yticks(range(len(seeds)), [f"seed {seed}" for seed in seeds])
    ax.set_ylim(-0.6, len(seeds) - 0.4)
    ax.set_xlabel("environment steps (checkpoints)")
    ax.xaxis.set_major_formatter(STEPS_FORMATTER)
    ax.legend(
        handles=[Patch(color=colours[seed], label=f"weights of seed {seed}") for seed in seeds],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        frameon=False,
    )
    ax.set_title(
        f"{task}: PBT lineage ({len(seeds)} members)\nband colour: the original member whose weights a member "
        "carries; arrow: a copy from parent to member",
        fontsize=10,
    )
    return fig


def population_learning_figure(run: RunData, task: str) -> Figure:
    """Held-out success (else return) per member; the best member at the end drawn bold."""
    logs = list(run.logs[task].values())
    column = "eval_success_rate" if defines_success(logs) else "eval_return_mean"
    best = best_member(_final(logs, "pbt_fitness"), _final(logs, "eval_return_mean"))
    colours = _member_colours([log.seed for log in logs])
    fig = Figure(figsize=(6.5, 4.8), layout="constrained")
    grid = fig.add_gridspec(2, 1, height_ratios=[4.0, 0.6])
    ax = fig.add_subplot(grid[0])
    for log in logs:
        is_best = log.seed == best
        ax.plot(
            log.checkpoints["actual_steps"],
            log.checkpoints[column],
            color=colours[log.seed],
            linewidth=2.6 if is_best else 1.0,
            alpha=1.0 if is_best else 0.6,
            marker="o" if is_best else None,
            markersize=3,
            zorder=3 if is_best else 2,
            label=f"seed {log.seed} (best at the end)" if is_best else f"seed {log.seed}",
        )
    if column in METRIC_LIMITS:
        ax.set_ylim(*METRIC_LIMITS[column])
    draw_reference_levels(ax, run, task, column)
    ax.xaxis.set_major_formatter(STEPS_FORMATTER)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(METRIC_LABELS.get(column, column))
    ax.grid(alpha=0.3)
    ax.set_title(f"{task}: PBT population, held-out evaluation per member ({len(logs)} members)", fontsize=10)
    legend_below(fig, fig.add_subplot(grid[1]), ax, ncol=3)
    return fig


PBT_FIGURES = ("pbt_hyperparameters", "pbt_lineage", "pbt_learning")
"""A PBT run's figures, ``<name>_<task>.{png,pdf}``."""


def render_pbt_figures(run: str | Path | RunData) -> list[Path]:
    """``pbt_{hyperparameters,lineage,learning}_<task>.{pdf,png}`` under ``figures/`` for each
    task of a PBT run; [] for a run without PBT."""
    run = run if isinstance(run, RunData) else load_run(run)
    if not is_pbt_run(run):
        return []
    out_dir = run.run_dir / FIGURES
    written: list[Path] = []
    for task in run.tasks:
        for name, draw in zip(PBT_FIGURES, (hyperparameters_figure, lineage_figure, population_learning_figure)):
            written += save_figure(draw(run, task), out_dir, f"{name}_{task}")
    return written
