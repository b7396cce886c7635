"""The reward comparison's figure: held-out success, final distance and alignment over training
per reward form x similarity (seeds thin, mean thick, 95% t band), the reference policies as
lines, and the final distance per combination as bars."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from purehr.reports.stats import clip_to_range, metric_range, t_interval
from purehr.viz.learning_curves import OKABE_ITO, save_figure

REFERENCE_POLICIES = ("oracle", "random", "no-op")
REFERENCE_STYLES = {"oracle": ("black", "--"), "random": ("grey", ":"), "no-op": ("grey", "-.")}


PANELS = (
    ("eval_success_rate", "held-out success rate", (-0.03, 1.03)),
    ("eval_final_distance", "held-out final L2 distance to target", None),
    ("eval_alignment", "held-out HRV alignment (Pearson r)", (-1.05, 1.05)),
)
"""The curve panels: (curves column, axis label, y limits)."""
SHORT_SIMILARITY = {"hrv_similarity": "L2 sim.", "cosine": "cosine"}


def plot_reward_comparison(
    out: Path, curves: list[dict], summary: list[dict], names: list[str], references: dict | None = None
) -> None:
    """``<out>/reward_comparison.{png,pdf}``: ``curves`` (one row per combination, seed and
    evaluated step), ``summary`` (one row per combination: mean and 95% t interval over seeds)
    and ``references`` ({combination: {policy: held-out metrics}}) drawn for ``names``."""
    colours = [OKABE_ITO[c] for c in ("blue", "orange", "green", "purple", "vermillion", "sky_blue")]
    fig = Figure(figsize=(15.0, 4.4))
    axes = fig.subplots(1, len(PANELS) + 1, gridspec_kw={"width_ratios": [1, 1, 1, 0.9]})
    for colour, name in zip(colours, names):
        _draw_curves(axes, [r for r in curves if r["combination"] == name], colour, name)
    if references:
        _draw_references(axes, next(iter(references.values())))
    _draw_final_distances(axes[-1], colours, curves, summary, names)
    axes[0].legend(fontsize=7, loc="center right")
    steps_per_seed = summary[0].get("env_steps_per_seed", float("nan"))
    fig.suptitle(
        f"HRV reward form x similarity, PPO protocol defaults, {steps_per_seed:,.0f} steps x "
        f"{summary[0]['seeds']:.0f} seeds each\nheld-out: 100 fixed episodes, difficulty 0.9, precision "
        "0.05; thin lines = seeds, band = 95% t interval",
        fontsize=9,
    )
    fig.tight_layout()
    save_figure(fig, out, "reward_comparison")


def _draw_curves(axes: Sequence[Axes], rows: list[dict], colour: str, name: str) -> None:
    """One combination's curves on each panel: every seed thin, the mean thick, its 95% t band."""
    seeds = sorted({r["seed"] for r in rows})
    steps = np.array(sorted({r["env_steps"] for r in rows}))
    for ax, (metric, label, limits) in zip(axes, PANELS):
        values = np.array(
            [[next(r[metric] for r in rows if r["seed"] == s and r["env_steps"] == x) for x in steps] for s in seeds]
        )  # [seed, step]
        for seed_values in values:
            ax.plot(steps, seed_values, color=colour, alpha=0.25, linewidth=0.7)
        mean, low, high = t_interval(values)
        low, high = clip_to_range(low, high, metric_range(metric))  # few seeds: the t band runs past the range
        ax.plot(steps, mean, color=colour, linewidth=2.0, label=name)
        if len(seeds) > 1:
            ax.fill_between(steps, low, high, color=colour, alpha=0.15, linewidth=0)
        ax.set_xlabel("environment steps per seed")
        ax.set_ylabel(label)
        if limits:
            ax.set_ylim(*limits)


def _draw_references(axes: Sequence[Axes], reference: dict[str, dict[str, float]]) -> None:
    """The reference policies as horizontal lines (their metrics do not depend on the reward:
    those of the first combination), on the curve panels and the bars; legend on the third."""
    handles = {}
    for ax, (metric, _, _) in zip(list(axes[:3]) + [axes[3]], PANELS + (("eval_final_distance", "", None),)):
        for policy in REFERENCE_POLICIES:
            colour, style = REFERENCE_STYLES[policy]
            handles[policy] = ax.axhline(
                reference[policy][metric.removeprefix("eval_")], color=colour, linestyle=style, linewidth=1.0
            )
    axes[2].legend(
        list(handles.values()),
        list(handles),
        fontsize=7,
        loc="lower right",
        title="reference policies",
        title_fontsize=7,
    )


def _draw_final_distances(
    bars: Axes, colours: list[str], curves: list[dict], summary: list[dict], names: list[str]
) -> None:
    """Per combination: the mean final distance as a bar with its 95% t interval, every seed's
    final distance as a dot, the mean held-out success written on the bar."""
    last = {name: max(r["env_steps"] for r in curves if r["combination"] == name) for name in names}
    for index, (colour, entry) in enumerate(zip(colours, summary)):
        mean = entry["eval_final_distance_mean"]
        low, high = entry["eval_final_distance_ci_low"], entry["eval_final_distance_ci_high"]
        error = None if not np.isfinite(low) else [[mean - low], [high - mean]]
        bars.bar(index, mean, color=colour, yerr=error, capsize=4)
        finals = [
            r["eval_final_distance"]
            for r in curves
            if r["combination"] == entry["combination"] and r["env_steps"] == last[entry["combination"]]
        ]
        bars.scatter(
            np.full(len(finals), index) + np.linspace(-0.2, 0.2, len(finals)), finals, color="black", s=8, zorder=3
        )
        bars.text(
            index,
            0.12,
            f"success\n{100 * entry['eval_success_rate_mean']:.0f}%",
            ha="center",
            va="bottom",
            fontsize=7,
            color="white",
        )
    bars.set_xticks(
        range(len(summary)),
        [f"{e['combination'].split('/')[0]}\n{SHORT_SIMILARITY[e['combination'].split('/')[1]]}" for e in summary],
        fontsize=7,
    )
    bars.set_ylabel("final held-out L2 distance\n(mean, 95% t CI; dots = seeds)")
