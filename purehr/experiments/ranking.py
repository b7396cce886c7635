"""A sweep's ranking: its groups' runs as plain rows, every setting's mean and 95% t interval
over seeds (clipped to the metric's range), the settings ranked, and the ranking as text.
``purehr.experiments.sweep`` trains, this computes, ``purehr.viz.sweep_heatmap`` draws the rows
it computes. A setting with a diverged seed is ranked after every healthy one: a diverged run
keeps its last finite parameters, and that frozen policy can score anything."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from purehr.experiments.group_result import GroupResult
from purehr.reports.stats import UNINFORMATIVE_NOTE, mean_confidence_interval, metric_range, tail_mean

RANKED_METRICS = ("success_rate", "return_mean")


def run_rows(groups: list[GroupResult], axes: Sequence[str]) -> list[dict[str, Any]]:
    """One row per trained run: group, setting, seed, ``diverged_at_update`` (the first update
    whose losses or parameters were not finite; 0 = healthy), every held-out metric, final
    training return."""
    rows = []
    for group in groups:
        for run in range(group.num_runs):
            row = {"group": group.name, **{a: group.run_setting(run)[a] for a in axes}, "seed": group.run_seed(run)}
            row["diverged_at_update"] = group.run_diverged_at(run)
            row.update({f"eval_{k}": float(v[run]) for k, v in group.evaluation.items()})
            row["train_final_return"] = tail_mean(group.training_metrics["mean_episode_return"][run])
            rows.append(row)
    return rows


def setting_rows(groups: list[GroupResult], axes: Sequence[str]) -> list[dict[str, Any]]:
    """One row per (group, setting), in the groups' and settings' order: group, the setting's
    axis values, ``seeds``, ``diverged_seeds`` (the seeds whose training diverged, space
    separated; empty when none), and the mean over seeds of held-out success and return (with
    their two-sided 95% t interval, clipped to the metric's range, and ``_ci_uninformative``
    when few seeds make it say little) plus the mean noisy success when the task reports it."""
    table = []
    for group in groups:
        for index, setting in enumerate(group.settings):
            row = {"group": group.name, **{a: setting[a] for a in axes}, "seeds": len(group.seeds)}
            row["diverged_seeds"] = " ".join(map(str, group.diverged_seeds(index)))
            for metric in RANKED_METRICS + ("noisy_success_rate",):
                if metric not in group.evaluation:
                    continue
                values = group.evaluation[metric][group.setting_runs(index)]
                summary = mean_confidence_interval(values, bounds=metric_range(metric))
                row[f"{metric}_mean"] = summary["mean"]
                if metric in RANKED_METRICS:
                    row[f"{metric}_ci_low"] = summary["ci_low"]
                    row[f"{metric}_ci_high"] = summary["ci_high"]
                    row[f"{metric}_ci_uninformative"] = summary["uninformative"]
            table.append(row)
    return table


def rank_settings(groups: list[GroupResult], axes: Sequence[str]) -> list[dict[str, Any]]:
    """``setting_rows`` ranked by mean success, then mean return (both descending; NaN last),
    each led by its ``rank`` (1 = best). Settings with a diverged seed come after every healthy
    one, whatever they score."""
    table = setting_rows(groups, axes)

    def key(row):
        success, ret = row.get("success_rate_mean", math.nan), row.get("return_mean_mean", math.nan)
        return (
            bool(row["diverged_seeds"]),
            -(success if math.isfinite(success) else -math.inf),
            -(ret if math.isfinite(ret) else -math.inf),
        )

    table.sort(key=key)
    return [{"rank": rank, **row} for rank, row in enumerate(table, start=1)]


def format_table(
    rows: list[dict[str, Any]],
    axes: Sequence[str],
    limit: int | None = None,
    references: Mapping[str, Mapping[str, float]] | None = None,
) -> str:
    """The ranking as aligned text: mean [95% t interval] of success and return (``*``: the
    interval says little, see the note under the table) and the seeds that diverged; under it,
    one row per reference policy (``references``: name -> held-out metrics, the task's reference
    and floors, ``purehr.experiments.sweep.sweep_references``), what a setting must beat."""

    def interval(row, metric, fmt):
        mean = row.get(f"{metric}_mean", math.nan)
        low, high = row.get(f"{metric}_ci_low", math.nan), row.get(f"{metric}_ci_high", math.nan)
        if not math.isfinite(low):  # fewer than two finite values
            return fmt(mean) + (" (one seed: no interval)" if row["seeds"] == 1 else "")
        return f"{fmt(mean)} [{fmt(low)}, {fmt(high)}]" + ("*" if row.get(f"{metric}_ci_uninformative") else "")

    pct = lambda v: "nan" if not math.isfinite(v) else f"{100 * v:.1f}%"  # noqa: E731
    num = lambda v: "nan" if not math.isfinite(v) else f"{v:.3f}"  # noqa: E731
    header = ["rank", "group", *axes, "seeds", "held-out success [95% CI]", "held-out return [95% CI]", "diverged"]
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
                _diverged_text(row.get("diverged_seeds", "")),
            ]
        )
    for name, metrics in (references or {}).items():
        success, ret = metrics.get("success_rate", math.nan), metrics.get("return_mean", math.nan)
        lines.append(["-", name, *("-" for _ in axes), "-", pct(success), num(ret), "-"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)
    if any(line[-3].endswith("*") or line[-2].endswith("*") for line in lines[1:]):
        text += "\n" + UNINFORMATIVE_NOTE
    return text


def _diverged_text(seeds: str) -> str:
    if not seeds:
        return "-"
    return f"seed{'s' if ' ' in seeds else ''} {seeds} (ranked last)"


def divergence_note(ranking: list[dict[str, Any]]) -> str | None:
    """What to say under the table when settings diverged (None when none did)."""
    diverged = [row for row in ranking if row.get("diverged_seeds")]
    if not diverged:
        return None
    return (
        f"{len(diverged)} of {len(ranking)} settings diverged (losses or parameters not finite: their "
        "policies froze at the last finite update) and are ranked last; runs.csv has each run's diverged_at_update"
    )
