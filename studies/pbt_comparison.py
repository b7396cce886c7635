"""Does population-based training pay? One task at the same total environment steps, three
ways (docs/pbt.md, results/pbt/):

    pbt        a population of N trained by PBT (``--pbt``), several independent runs
    seeds      the default configuration's N seeds, trained independently
    grid       a grid of N hyperparameter settings, one seed each (scripts/sweep.py's
               ``train_group``), and its best cell trained again through the protocol, whose
               checkpoints give the steps at which it first reached the success bar

Each is judged as a user would take it away: the member (seed, cell) that is best at the end
by the PBT fitness rule (held-out success, then return, then the lower seed), with the steps at
which it first reached held-out success >= ``SUCCESS_BAR`` and the task's speed metric at the
end; the seeds also as their mean, since those are N independent samples of one setting.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from purehr.experiments.sweep import task_evaluator, train_group
from purehr.population import PBTSettings
from purehr.reports.stats import mean_confidence_interval
from purehr.run.protocol import train_all_seeds
from purehr.run.store.files import read_csv
from purehr.run.store.machine import load_average
from purehr.tasks import get_task
from purehr.viz.pbt_figures import best_member
from studies.ablation import SPEED_METRIC

SUCCESS_BAR = 0.95
DEFAULT_GRID = {"learning_rate": (1e-4, 3e-4, 1e-3, 3e-3), "ent_coef": (1e-4, 1e-3)}
"""The swing grid: 4 x 2 = 8 cells, the compute of a population of 8 (around the defaults 3e-4
and 1e-3 the task's sweep in results/sweep found)."""


def member_outcome(rows: list[dict[str, str]], speed_metric: str) -> dict[str, float]:
    """One member's checkpoints.csv rows -> the steps at which held-out success first reached
    ``SUCCESS_BAR`` (NaN: never), and its final success, return and speed."""
    reached = [int(r["actual_steps"]) for r in rows if float(r["eval_success_rate"]) >= SUCCESS_BAR]
    last = rows[-1]
    return {
        "steps_to_bar": float(reached[0]) if reached else math.nan,
        "success_rate": float(last["eval_success_rate"]),
        "return_mean": float(last["eval_return_mean"]),
        "speed": float(last[f"eval_{speed_metric}"]),
    }


def best_of(outcomes: dict[int, dict[str, float]]) -> int:
    """The member best at the end: highest success, then return, then the lower seed; NaN last
    (the rule the PBT figures mark their best member by)."""
    return best_member(
        {seed: o["success_rate"] for seed, o in outcomes.items()},
        {seed: o["return_mean"] for seed, o in outcomes.items()},
    )


def run_outcomes(run_dir: Path, task: str, seeds: Sequence[int]) -> dict[int, dict[str, float]]:
    speed = SPEED_METRIC[task]
    return {
        seed: member_outcome(read_csv(run_dir / task / f"seed_{seed}" / "checkpoints.csv"), speed) for seed in seeds
    }


def summary_row(method: str, samples: list[dict[str, float]], what: str, checkpoints: bool = True) -> dict[str, Any]:
    """Mean and 95% t interval over ``samples`` (independent runs, or seeds) of each number;
    without ``checkpoints`` (a sweep's end evaluation) the steps to the bar were not recorded."""
    row: dict[str, Any] = {"method": method, "what": what, "n": len(samples), "checkpoints": checkpoints}
    for name in ("steps_to_bar", "success_rate", "speed", "members_at_bar"):
        values = np.asarray([s.get(name, math.nan) for s in samples], float)
        interval = mean_confidence_interval(values)
        row.update(
            {
                name: interval["mean"],
                f"{name}_ci_low": interval["ci_low"],
                f"{name}_ci_high": interval["ci_high"],
                f"{name}_reached": int(np.isfinite(values).sum()),
            }
        )
    return row


def at_bar(outcomes: dict) -> dict[str, float]:
    """How many members of one run end at held-out success >= ``SUCCESS_BAR`` (as a sample)."""
    return {"members_at_bar": float(sum(o["success_rate"] >= SUCCESS_BAR for o in outcomes.values()))}


def summarise(members: dict[str, Any], population: int) -> list[dict[str, Any]]:
    """The comparison's rows from every arm's per-member outcomes (``compare``'s ``members``,
    also as comparison.json keeps them, with string keys)."""
    pbt = [outcomes for name, outcomes in members.items() if name.startswith("pbt_")]
    seeds, grid = members["seeds"], members["grid_best_cell"]
    cells = grid["cells"]
    best_cell = cells[best_of(dict(enumerate(cells)))]
    cell = {"steps_to_bar": math.nan, "success_rate": best_cell["success_rate"], "speed": best_cell["speed"]}
    return [
        summary_row(
            "pbt",
            [dict(o[best_of(o)], **at_bar(o)) for o in pbt],
            f"best member at the end, over {len(pbt)} independent PBT runs",
        ),
        summary_row("seeds", [dict(seeds[best_of(seeds)], **at_bar(seeds))], f"best of the {population} seeds"),
        summary_row("seeds", list(seeds.values()), f"each of the {population} seeds"),
        summary_row("grid", [cell], f"best of the {len(cells)} cells, at the sweep's end evaluation", False),
        summary_row("grid", [grid["outcome"]], "the best cell trained again through the protocol (same seed)"),
    ]


def compare(
    task: str,
    steps: int,
    population: int,
    pbt_runs: int,
    out_dir: Path,
    pbt: PBTSettings,
    grid: dict[str, Sequence[float]] | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Trains every arm under ``out_dir/runs`` and returns every member's outcome and the timing
    (``summarise`` makes the rows)."""
    grid = dict(DEFAULT_GRID if grid is None else grid)
    cells = int(np.prod([len(v) for v in grid.values()]))
    if cells != population:
        raise ValueError(f"the grid {grid} has {cells} cells; expected {population}, the compute of the population")
    runs_dir, timing, members = out_dir / "runs", {}, {}
    overrides = {"total_timesteps": steps}
    for index in range(pbt_runs):
        seeds = list(range(index * population, (index + 1) * population))
        name = f"pbt_{index}"
        say(f"[pbt] {name}: {task} x seeds {seeds[0]}..{seeds[-1]}, {steps:,} steps each")
        started = time.perf_counter()
        train_all_seeds(runs_dir / name, tasks=[task], seeds=seeds, overrides=overrides, progress=False, pbt=pbt)
        timing[name] = time.perf_counter() - started
        members[name] = run_outcomes(runs_dir / name, task, seeds)
    seeds = list(range(population))
    say(f"[pbt] seeds: the default configuration, {task} x seeds 0..{population - 1}")
    started = time.perf_counter()
    train_all_seeds(runs_dir / "seeds", tasks=[task], seeds=seeds, overrides=overrides, progress=False)
    timing["seeds"] = time.perf_counter() - started
    members["seeds"] = run_outcomes(runs_dir / "seeds", task, seeds)
    best_cell, timing["grid"], timing["grid_best_cell"] = _grid_arm(task, steps, grid, runs_dir, say)
    members["grid_best_cell"] = best_cell
    return {"members": members, "timing_s": timing, "load_average_after": load_average()}


def _grid_arm(
    task: str, steps: int, grid: dict[str, Sequence[float]], runs_dir: Path, say
) -> tuple[dict, float, float]:
    """The grid's cells (one seed each) trained in one call and judged at the end; the best cell
    trained again through the protocol for the steps at which it reached the bar."""
    definition = get_task(task)
    config, protocol = definition.settings_for(definition.default_config.replace(total_timesteps=steps))
    env = definition.make_env()
    say(f"[pbt] grid: {task}, {' x '.join(f'{k} {list(v)}' for k, v in grid.items())}, seed 0")
    started = time.perf_counter()
    group = train_group(config, env, grid, [0], evaluate=task_evaluator(task, env, protocol.eval_episodes), name="grid")
    grid_s = time.perf_counter() - started
    speed = SPEED_METRIC[task]
    cells = {
        index: {
            "success_rate": float(group.evaluation["success_rate"][index]),
            "return_mean": float(group.evaluation["return_mean"][index]),
        }
        for index in range(len(group.settings))
    }
    best = best_of(cells)
    setting = group.settings[best]
    say(f"[pbt] grid: best cell {setting}; trained again with checkpoints")
    started = time.perf_counter()
    train_all_seeds(
        runs_dir / "grid_best_cell",
        tasks=[task],
        seeds=[0],
        overrides={"total_timesteps": steps, **setting},
        progress=False,
    )
    again_s = time.perf_counter() - started
    outcome = run_outcomes(runs_dir / "grid_best_cell", task, [0])[0]
    cells = [
        dict(setting_, **cells[i], speed=float(group.evaluation[speed][i])) for i, setting_ in enumerate(group.settings)
    ]
    return {"setting": setting, "outcome": outcome, "cells": cells}, grid_s, again_s


def format_table(rows: list[dict[str, Any]], task: str) -> str:
    """The comparison as a Markdown table: mean [95% t interval] (n) of each number."""

    def cell(row, name, digits):
        if name == "steps_to_bar" and not row["checkpoints"]:
            return "not recorded (no checkpoints)"
        if not math.isfinite(row[name]):
            return "never"
        low, high = row[f"{name}_ci_low"], row[f"{name}_ci_high"]
        interval = f" [{low:,.{digits}f}, {high:,.{digits}f}]" if row["n"] > 1 and math.isfinite(low) else ""
        reached = f" ({row[f'{name}_reached']}/{row['n']} reached)" if row[f"{name}_reached"] < row["n"] else ""
        return f"{row[name]:,.{digits}f}{interval}{reached}"

    speed = SPEED_METRIC[task]
    lines = [
        f"| arm | what | steps to held-out success >= {SUCCESS_BAR} | final success | final {speed} "
        f"| members at >= {SUCCESS_BAR} at the end |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        members = cell(row, "members_at_bar", 1) if row["members_at_bar_reached"] else "-"
        lines.append(
            f"| {row['method']} | {row['what']} | {cell(row, 'steps_to_bar', 0)} | {cell(row, 'success_rate', 2)} "
            f"| {cell(row, 'speed', 2)} | {members} |"
        )
    return "\n".join(lines)
