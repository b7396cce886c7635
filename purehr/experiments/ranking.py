"""A sweep's ranking: its groups' runs as plain rows, every setting's mean and 95% t interval
over seeds, the settings ranked, and the ranking as text. ``purehr.experiments.sweep`` trains,
this computes, ``purehr.viz.sweep_heatmap`` draws the rows it computes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from purehr.experiments.group_result import GroupResult
from purehr.reports.stats import mean_confidence_interval, tail_mean

RANKED_METRICS = ("success_rate", "return_mean")


def run_rows(groups: list[GroupResult], axes: Sequence[str]) -> list[dict[str, Any]]:
    """One row per trained run: group, setting, seed, every held-out metric, final training return."""
    rows = []
    for group in groups:
        for run in range(group.num_runs):
            row = {"group": group.name, **{a: group.run_setting(run)[a] for a in axes}, "seed": group.run_seed(run)}
            row.update({f"eval_{k}": float(v[run]) for k, v in group.evaluation.items()})
            row["train_final_return"] = tail_mean(group.training_metrics["mean_episode_return"][run])
            rows.append(row)
    return rows


def setting_rows(groups: list[GroupResult], axes: Sequence[str]) -> list[dict[str, Any]]:
    """One row per (group, setting), in the groups' and settings' order: group, the setting's
    axis values, ``seeds``, and the mean over seeds of held-out success and return (with their
    two-sided 95% t interval) plus the mean noisy success when the task reports it."""
    table = []
    for group in groups:
        for index, setting in enumerate(group.settings):
            row = {"group": group.name, **{a: setting[a] for a in axes}, "seeds": len(group.seeds)}
            for metric in RANKED_METRICS + ("noisy_success_rate",):
                if metric not in group.evaluation:
                    continue
                summary = mean_confidence_interval(group.evaluation[metric][group.setting_runs(index)])
                row[f"{metric}_mean"] = summary["mean"]
                if metric in RANKED_METRICS:
                    row[f"{metric}_ci_low"] = summary["ci_low"]
                    row[f"{metric}_ci_high"] = summary["ci_high"]
            table.append(row)
    return table


def rank_settings(groups: list[GroupResult], axes: Sequence[str]) -> list[dict[str, Any]]:
    """``setting_rows`` ranked by mean success, then mean return (both descending; NaN last),
    each led by its ``rank`` (1 = best)."""
    table = setting_rows(groups, axes)

    def key(row):
        success, ret = row.get("success_rate_mean", math.nan), row.get("return_mean_mean", math.nan)
        return (-(success if math.isfinite(success) else -math.inf), -(ret if math.isfinite(ret) else -math.inf))

    table.sort(key=key)
    return [{"rank": rank, **row} for rank, row in enumerate(table, start=1)]


def format_table(rows: list[dict[str, Any]], axes: Sequence[str], limit: int | None = None) -> str:
    """The ranking as aligned text: mean [95% t interval] of success and return."""

    def interval(row, metric, fmt):
        mean = row.get(f"{metric}_mean", math.nan)
        low, high = row.get(f"{metric}_ci_low", math.nan), row.get(f"{metric}_ci_high", math.nan)
        return f"{fmt(mean)} [{fmt(low)}, {fmt(high)}]"

    pct = lambda v: "nan" if not math.isfinite(v) else f"{100 * v:.1f}%"  # noqa: E731
    num = lambda v: "nan" if not math.isfinite(v) else f"{v:.3f}"  # noqa: E731
    header = ["rank", "group", *axes, "seeds", "held-out success [95% CI]", "held-out return [95% CI]"]
    lines = [header]
    for row in rows[:limit]:
        lines.append(
            [
                str(row["rank"]),
                row["group"],
                *(f"{row[a]:g}" for a in axes),
                str(row["seeds"]),
                interval(row, "success_rate", pct),
                interval(row, "return_mean", num),
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)
