"""The optimal-control references' figures (results/limits/): per start or episode, sorted by the
reference, PPO against the hand-made reference, the verified optimum and the lower bound. Plain
rows in (the dicts of swing.csv / hrv.csv), PNG out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from purehr.run.store.files import atomic_output
from purehr.viz.learning_curves import BASELINE_COLOUR, OKABE_ITO, PPO_COLOUR


def _column(rows: list[dict], key: str) -> np.ndarray:
    return np.asarray([float(row[key]) for row in rows], float)


def _save_png(fig: Figure, path: Path) -> Path:
    with atomic_output(path) as partial:
        fig.savefig(partial, format="png", dpi=150, bbox_inches="tight")
    return path


def _finish(fig: Figure, ax, path: Path, count: int, xlabel: str, ylabel: str, task: str) -> Path:
    """The shared frame of both figures: labels, limits from zero, the legend, the title; saved."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, None)
    ax.set_xlim(0.5, count + 0.5)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(f"{task}: how far from optimal? (band: range over PPO seeds)", fontsize=10)
    return _save_png(fig, path)


def plot_swing_limits(rows: list[dict], path: Path, seeds: list[str]) -> Path:
    """Time to rotation per held-out start, starts sorted by the verified upper bound: PPO (the
    median over ``seeds``, the band their range), the structured controller, the upper bound
    (fastest rotation found, replayed in SwingEnv) and the physics lower bound."""
    order = np.argsort(_column(rows, "upper_bound_s"), kind="stable")
    rows = [rows[i] for i in order]
    x = np.arange(1, len(rows) + 1)
    per_seed = np.stack([_column(rows, f"{seed}_s") for seed in seeds])
    fig = Figure(figsize=(9.0, 4.6))
    ax = fig.subplots()
    ax.fill_between(x, per_seed.min(axis=0), per_seed.max(axis=0), color=PPO_COLOUR, alpha=0.2, lw=0)
    ax.plot(x, _column(rows, "ppo_median_s"), color=PPO_COLOUR, lw=1.6, label=f"PPO, median of {len(seeds)} seeds")
    ax.plot(x, _column(rows, "controller_s"), color=BASELINE_COLOUR, lw=1.2, label="structured controller")
    ax.plot(x, _column(rows, "upper_bound_s"), color="black", lw=1.8, label="upper bound (fastest found, verified)")
    ax.plot(x, _column(rows, "lower_bound_s"), color=OKABE_ITO["green"], lw=1.4, ls="--", label="lower bound (physics)")
    labels = ("held-out start, sorted by the upper bound", "time to the first full rotation (s)")
    return _finish(fig, ax, path, len(rows), *labels, "swing")


def plot_hrv_limits(rows: list[dict], path: Path, seeds: list[str]) -> Path:
    """Steps to the target per held-out episode, sorted by the exact optimum (with the
    evaluation's realised noise), then by PPO: PPO (median over ``seeds``, band their range),
    the greedy oracle, the exact optimum and the per-dimension lower bound."""
    keys = [(float(r["optimum_realised_noise"]), float(r["ppo_median"]), float(r["oracle"])) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: keys[i])
    rows = [rows[i] for i in order]
    x = np.arange(1, len(rows) + 1)
    per_seed = np.stack([_column(rows, seed) for seed in seeds])
    fig = Figure(figsize=(9.0, 4.6))
    ax = fig.subplots()
    ax.fill_between(x, per_seed.min(axis=0), per_seed.max(axis=0), color=PPO_COLOUR, alpha=0.2, lw=0, step="mid")
    steps = dict(where="mid")
    ax.step(
        x, _column(rows, "ppo_median"), color=PPO_COLOUR, lw=1.6, label=f"PPO, median of {len(seeds)} seeds", **steps
    )
    ax.step(x, _column(rows, "oracle"), color=BASELINE_COLOUR, lw=1.2, label="greedy oracle", **steps)
    ax.step(
        x,
        _column(rows, "optimum_realised_noise"),
        color="black",
        lw=1.8,
        label="exact optimum (realised noise)",
        **steps,
    )
    ax.step(
        x, _column(rows, "optimum_noise_free"), color="0.5", lw=1.0, ls=":", label="exact optimum (noise-free)", **steps
    )
    ax.step(x, _column(rows, "lower_bound"), color=OKABE_ITO["green"], lw=1.4, ls="--", label="lower bound", **steps)
    labels = ("held-out episode, sorted by the exact optimum, then PPO", "steps to the target")
    return _finish(fig, ax, path, len(rows), *labels, "hrv")
