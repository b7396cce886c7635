"""A sweep's robust ranking and its hyperparameter sensitivity (issue 67; after Adkins, Bowling
and White, NeurIPS 2024), from its files (``runs.csv``, ``sweep.json``): each setting's IQM over
seeds with a 95% bootstrap interval; per hyperparameter, how much the tuned result depends on it
(the spread of the best IQM reachable at each of its values); and the gap between the best setting
and the default. Intervals resample the seeds within every setting at once
(``purehr.reports.bootstrap.resample``), so each replicate re-ranks the whole sweep."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from purehr.reports import bootstrap
from purehr.run.store.files import atomic_write_text, read_csv, read_json_object
from purehr.viz.learning_curves import OKABE_ITO, save_figure

SENSITIVITY_STEM = "sensitivity"
"""``sensitivity.md`` and ``sensitivity.{png,pdf}`` beside a sweep's ranking."""
LOWER_IS_BETTER = ("eval_episode_length", "eval_time_to_rotation", "eval_final_distance")


def _settings(out_dir: Path, metric: str) -> tuple[list[str], dict[tuple, np.ndarray], dict[str, Any]]:
    """(the hyperparameters: the groups' shape fields, then the swept axes; per setting (their
    values) its seeds' ``metric``; sweep.json)."""
    description = read_json_object(
        out_dir / "sweep.json",
        missing=lambda: FileNotFoundError(f"{out_dir}: no sweep.json (expected a purehr sweep's output directory)"),
        not_json=lambda error: ValueError(f"{out_dir / 'sweep.json'} is not JSON: {error}"),
        not_object=lambda value: ValueError(f"{out_dir / 'sweep.json'} holds {type(value).__name__}, not an object"),
    )
    rows = read_csv(out_dir / "runs.csv")
    if not rows or metric not in rows[0]:
        have = ", ".join(name for name in (rows[0] if rows else {}) if name.startswith("eval_"))
        raise ValueError(f"{out_dir / 'runs.csv'} has no column {metric!r} (held-out columns: {have})")
    columns = list(rows[0])  # runs.csv: group, the swept axes, seed, ...
    shape = list(dict(part.split("=", 1) for part in rows[0]["group"].split() if "=" in part))
    names = shape + columns[columns.index("group") + 1 : columns.index("seed")]
    settings: dict[tuple, list[float]] = {}
    for row in rows:
        choice = dict(part.split("=", 1) for part in row["group"].split() if "=" in part)
        key = tuple(_number(choice[name]) if name in choice else _number(row[name]) for name in names)
        settings.setdefault(key, []).append(_number(row[metric]))
    return names, {key: np.asarray(values) for key, values in settings.items()}, description


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def default_setting(description: Mapping[str, Any], names: list[str]) -> tuple | None:
    """The setting of the sweep's base config (every group's config agrees on it), or None when
    the groups' configs differ on a hyperparameter (a shape choice: no default recorded)."""
    values = []
    for name in names:
        seen = {float(group["config"][name]) for group in description.get("groups", ()) if name in group["config"]}
        if len(seen) != 1:
            return None
        values.append(seen.pop())
    return tuple(values)


def sensitivity_report(out_dir: str | Path, metric: str = "eval_return_mean", reps: int = bootstrap.REPS) -> dict:
    """``{metric, lower_is_better, names, ranking: [{setting, iqm}], sensitivity: {name: {best_at:
    {value: iqm}, spread}}, default, gap}``; estimates as ``Estimate.to_dict``; ``gap`` is the best
    setting's IQM minus the default's, in the better direction (None without a default in the grid);
    the best is chosen anew in each replicate, but on the same seeds it is scored on (optimistic)."""
    out_dir = Path(out_dir)
    names, settings, description = _settings(out_dir, metric)
    sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
    keys = list(settings)
    samples = [settings[key] for key in keys]
    point = np.array([bootstrap.iqm(sample[np.isfinite(sample)]) for sample in samples])
    replicates = np.stack([bootstrap.iqm(r[..., 0], axis=-1) for r in bootstrap.resample(samples, reps)], -1)
    order = np.argsort(-sign * point, kind="stable")

    def estimate(values: np.ndarray, replicated: np.ndarray) -> dict[str, float]:
        low, high = np.nanpercentile(replicated, [2.5, 97.5])
        return {"value": float(values), "low": float(low), "high": float(high), "seeds": int(min(map(len, samples)))}

    ranking = [
        {"rank": rank, "setting": dict(zip(names, keys[index])), "iqm": estimate(point[index], replicates[:, index])}
        for rank, index in enumerate(order, start=1)
    ]
    sensitivity = {}
    for position, name in enumerate(names):
        values = sorted({key[position] for key in keys})
        if len(values) < 2:
            continue
        masks = [np.array([key[position] == value for key in keys]) for value in values]
        best = np.stack([(sign * point[mask]).max() * sign for mask in masks])
        best_replicated = np.stack([(sign * replicates[:, mask]).max(axis=1) * sign for mask in masks], -1)
        spread = best.max() - best.min()
        spread_replicated = best_replicated.max(axis=1) - best_replicated.min(axis=1)
        sensitivity[name] = {
            "best_at": {f"{value:g}": float(b) for value, b in zip(values, best)},
            "spread": estimate(spread, spread_replicated),
        }
    default, gap = default_setting(description, names), None
    if default is not None and default in settings:
        index = keys.index(default)  # the best is chosen again in every replicate
        gap = estimate(
            (sign * point).max() - sign * point[index], (sign * replicates).max(1) - sign * replicates[:, index]
        )
    return {
        "metric": metric,
        "lower_is_better": sign < 0,
        "names": names,
        "ranking": ranking,
        "sensitivity": sensitivity,
        "default": None if default is None else dict(zip(names, default)),
        "gap": gap,
    }


def _interval(estimate: Mapping[str, float]) -> str:
    if not math.isfinite(estimate["low"]):
        return f"{estimate['value']:.4g}"
    return f"{estimate['value']:.4g} [{estimate['low']:.4g}, {estimate['high']:.4g}]"


def sensitivity_text(report: Mapping[str, Any]) -> str:
    """The report as Markdown: the ranking by IQM, the sensitivity table and the gap."""
    names, metric = report["names"], report["metric"]
    direction = "lower is better" if report["lower_is_better"] else "higher is better"
    lines = [
        f"## Ranking by the IQM over seeds of {metric} ({direction}), 95% bootstrap intervals",
        "",
        "| rank | " + " | ".join(names) + " | IQM [95% CI] |",
        "|---|" + "---|" * len(names) + "---|",
    ]
    for row in report["ranking"]:
        values = " | ".join(f"{row['setting'][name]:g}" for name in names)
        lines.append(f"| {row['rank']} | {values} | {_interval(row['iqm'])} |")
    lines += [
        "",
        "## Sensitivity: the best IQM reachable at each value of a hyperparameter (the others tuned)",
        "",
        "| hyperparameter | best IQM at each value | spread (how much the tuned result depends on it) [95% CI] |",
        "|---|---|---|",
    ]
    for name, entry in report["sensitivity"].items():
        at = ", ".join(f"{value}: {best:.4g}" for value, best in entry["best_at"].items())
        lines.append(f"| {name} | {at} | {_interval(entry['spread'])} |")
    if report["gap"] is not None:
        default = ", ".join(f"{name} {value:g}" for name, value in report["default"].items())
        lines += ["", f"Best setting against the default ({default}): {_interval(report['gap'])} better (in {metric};"]
        lines[-1] += " the best was chosen on these seeds: optimistic)."
    else:
        lines += ["", "No default setting in the grid (the groups' configs differ on it): no gap computed."]
    return "\n".join(lines) + "\n"


def sensitivity_figure(report: Mapping[str, Any]) -> Figure:
    """Per hyperparameter, the best IQM at each of its values (a line per hyperparameter, values
    in order), the spread's interval in the legend."""
    entries = report["sensitivity"]
    fig = Figure(figsize=(4.0 * max(1, len(entries)), 3.0), layout="constrained")
    axes = fig.subplots(1, max(1, len(entries)), squeeze=False)[0]
    for ax, (name, entry) in zip(axes, entries.items()):
        labels, best = list(entry["best_at"]), list(entry["best_at"].values())
        ax.plot(range(len(labels)), best, marker="o", color=OKABE_ITO["blue"])
        ax.set_xticks(range(len(labels)), labels)
        ax.set(
            title=f"{name}: spread {_interval(entry['spread'])}", xlabel=name, ylabel=f"best IQM, {report['metric']}"
        )
        ax.title.set_fontsize(8)
    return fig


def write_sensitivity(out_dir: str | Path, metric: str = "eval_return_mean") -> list[Path]:
    """``sensitivity.md`` and ``sensitivity.{pdf,png}`` in a sweep's output directory; nothing
    for a sweep whose runs hold no ``metric`` (trained without held-out evaluation)."""
    out_dir = Path(out_dir)
    rows = read_csv(out_dir / "runs.csv")
    if not rows or metric not in rows[0]:
        return []
    report = sensitivity_report(out_dir, metric)
    paths = [atomic_write_text(out_dir / f"{SENSITIVITY_STEM}.md", sensitivity_text(report))]
    return paths + save_figure(sensitivity_figure(report), out_dir, SENSITIVITY_STEM)
