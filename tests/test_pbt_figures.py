"""The figures of a PBT run (purehr/viz/pbt_figures.py): the ancestry of each member's weights and
the best-member rule, computed by hand, and the three figures drawn from a synthetic 4-member run
directory (no training) with what they must show: 1 - gamma on a log scale with its bounds, the
lineage bands in the colour of the ancestor, the best member bold."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_hex

from purehr.run.store.columns import checkpoint_columns, update_columns
from purehr.run.store.files import write_csv
from purehr.viz.learning_curves import SEED_COLOURS
from purehr.viz.pbt_figures import (
    ancestors,
    best_member,
    hyperparameters_figure,
    lineage_figure,
    population_learning_figure,
    render_pbt_figures,
)
from purehr.viz.render import render_run
from purehr.viz.run_data import load_run

# ---------------------------------------------------------------- ancestry

# 4 members, 3 checkpoints. Checkpoint 1: member 3 copies member 1. Checkpoint 2: member 0 copies
# member 3 (which carries member 1's weights since checkpoint 1) and, at the same step, member 2
# copies member 0 (whose weights before this step are still its own).
PARENTS = [[0, 1, 2, 3], [0, 1, 2, 1], [3, 1, 0, 3]]
ANCESTORS = [[0, 1, 2, 3], [0, 1, 2, 1], [1, 1, 0, 1]]


def test_ancestry_propagates_through_a_copy_of_a_copy():
    np.testing.assert_array_equal(ancestors(PARENTS), ANCESTORS)


def test_ancestry_is_in_seeds_not_positions():
    seeds = [10, 20, 30, 40]
    parents = [[seeds[p] for p in row] for row in PARENTS]
    np.testing.assert_array_equal(ancestors(parents, seeds), [[seeds[a] for a in row] for row in ANCESTORS])


def test_ancestry_of_a_long_chain():
    # 0 copies 1, then 2 copies 0, then 3 copies 2: all carry member 1's weights at the end
    parents = [[1, 1, 2, 3], [0, 1, 0, 3], [0, 1, 2, 2]]
    np.testing.assert_array_equal(ancestors(parents)[-1], [1, 1, 1, 1])


def test_ancestry_refuses_a_parent_outside_the_population():
    with pytest.raises(ValueError, match=r"parent seed\(s\) \[7\]"):
        ancestors([[0, 7]], [0, 1])


# ---------------------------------------------------------------- best member


def test_best_member_has_the_highest_fitness():
    assert best_member({0: 0.5, 1: 0.9, 2: 0.7}, {0: 9.0, 1: 1.0, 2: 5.0}) == 1


def test_best_member_ties_go_to_the_higher_return_then_the_lower_seed():
    assert best_member({0: 0.5, 1: 0.8, 2: 0.8, 3: 0.1}, {0: 9.0, 1: 4.0, 2: 6.0, 3: 9.0}) == 2
    assert best_member({0: 0.5, 1: 0.8, 2: 0.8, 3: 0.8}, {0: 9.0, 1: 6.0, 2: 6.0, 3: 5.0}) == 1


def test_best_member_ranks_nan_fitness_last():
    assert best_member({0: math.nan, 1: 0.0}, {0: 100.0, 1: -5.0}) == 1


# ---------------------------------------------------------------- a synthetic run

SEEDS = [0, 1, 2, 3]
TARGETS = [0, 1000, 2000]
GAMMA_BOUNDS = [0.9, 0.9999]
LR_BOUNDS = [1e-5, 1e-2]
# per member, per checkpoint
FITNESS = {0: [0.0, 0.3, 0.5], 1: [0.1, 0.6, 0.8], 2: [0.0, 0.2, 0.2], 3: [0.0, 0.1, 0.8]}
RETURNS = {0: [-9.0, -5.0, 2.0], 1: [-8.0, -2.0, 4.0], 2: [-9.0, -6.0, -4.0], 3: [-9.0, -7.0, 6.0]}
GAMMA = {0: [0.99, 0.99, 0.995], 1: [0.99, 0.99, 0.99], 2: [0.99, 0.99, 0.98], 3: [0.99, 0.95, 0.95]}
LEARNING_RATE = {0: [1e-3, 1e-3, 8e-4], 1: [1e-3, 1e-3, 1e-3], 2: [1e-3, 1e-3, 1.25e-3], 3: [1e-3, 8e-4, 8e-4]}
BEST = 3  # fitness 0.8 tied with member 1; the higher return (6 > 4) wins


def write_run(root: Path, *, pbt: bool) -> Path:
    manifest = {
        "tasks": ["hrv"],
        "seeds": SEEDS,
        "configs": {"hrv": {}},
        "status": "finished",
        "pbt": {
            "explore": ["learning_rate", "gamma"],
            "bounds": {"learning_rate": LR_BOUNDS, "gamma": GAMMA_BOUNDS},
            "fraction": 0.25,
            "fitness": {},
        }
        if pbt
        else None,
    }
    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps(manifest))
    population = ["pbt_fitness", "pbt_gamma", "pbt_learning_rate", "pbt_parent"] if pbt else []
    columns = checkpoint_columns(["success_rate", "return_mean"], population)
    for index, seed in enumerate(SEEDS):
        rows = []
        for k, target in enumerate(TARGETS):
            row = {"target_steps": target, "actual_steps": target, "update": 2 * k, "elapsed_s": float(k)}
            row |= {"eval_success_rate": FITNESS[seed][k], "eval_return_mean": RETURNS[seed][k]}
            row |= {"checkpoint_path": "", "showcase_path": "", "state_digest": ""}
            if pbt:
                row |= {"pbt_fitness": FITNESS[seed][k], "pbt_parent": PARENTS[k][index]}
                row |= {"pbt_gamma": GAMMA[seed][k], "pbt_learning_rate": LEARNING_RATE[seed][k]}
            rows.append(row)
        seed_dir = root / "hrv" / f"seed_{seed}"
        write_csv(seed_dir / "checkpoints.csv", columns, rows)
        updates = update_columns([])
        write_csv(
            seed_dir / "updates.csv",
            updates,
            [{**dict.fromkeys(updates, 0.0), "update": u, "env_steps": 500 * u} for u in range(1, 5)],
        )
    return root


@pytest.fixture()
def pbt_run(tmp_path) -> Path:
    return write_run(tmp_path / "pbt", pbt=True)


def test_render_writes_the_three_figures_of_a_pbt_run(pbt_run):
    written = render_run(pbt_run, replay=False)
    for stem in ("hyperparameters", "lineage", "learning"):
        png = pbt_run / "figures" / f"pbt_{stem}_hrv.png"
        assert png in written
        assert png.stat().st_size > 10_000  # a drawn figure, not an empty canvas


def test_a_run_without_pbt_draws_no_pbt_figure(tmp_path):
    run_dir = write_run(tmp_path / "plain", pbt=False)
    assert render_pbt_figures(run_dir) == []
    render_run(run_dir, replay=False)
    assert not list((run_dir / "figures").glob("pbt_*"))


def test_gamma_is_drawn_as_one_minus_gamma_on_a_log_scale_within_its_bounds(pbt_run):
    fig = hyperparameters_figure(load_run(pbt_run), "hrv")
    gamma_panel = next(ax for ax in fig.axes if ax.get_ylabel() == "1 - gamma (log scale)")
    assert gamma_panel.get_yscale() == "log"
    lines = gamma_panel.get_lines()
    member_lines = [line for line in lines if line.get_linestyle() == "-"]
    np.testing.assert_allclose(member_lines[SEEDS.index(3)].get_ydata(), 1 - np.array(GAMMA[3]))
    assert member_lines[0].get_drawstyle() == "steps-post"  # a value holds until the next checkpoint
    bounds = sorted(line.get_ydata()[0] for line in lines if line.get_linestyle() == "--")
    np.testing.assert_allclose(bounds, [1 - GAMMA_BOUNDS[1], 1 - GAMMA_BOUNDS[0]])


def test_lineage_bands_take_the_colour_of_the_ancestor(pbt_run):
    ax = lineage_figure(load_run(pbt_run), "hrv").axes[0]
    bars = ax.patches  # one per checkpoint and member, checkpoint-major
    assert len(bars) == len(TARGETS) * len(SEEDS)
    for k, row in enumerate(ANCESTORS):
        for i, ancestor in enumerate(row):
            assert to_hex(bars[k * len(SEEDS) + i].get_facecolor()) == to_hex(SEED_COLOURS[ancestor])
    copies = sum(parent != SEEDS[i] for row in PARENTS for i, parent in enumerate(row))
    assert len(ax.texts) == copies == 3  # one arrow per copy


def test_population_learning_figure_draws_the_best_member_bold(pbt_run):
    ax = population_learning_figure(load_run(pbt_run), "hrv").axes[0]
    by_label = {line.get_label(): line for line in ax.get_lines() if line.get_label().startswith("seed")}
    assert set(by_label) == {"seed 0", "seed 1", "seed 2", f"seed {BEST} (best at the end)"}
    best = by_label[f"seed {BEST} (best at the end)"]
    assert best.get_linewidth() > max(line.get_linewidth() for line in by_label.values() if line is not best)
    np.testing.assert_allclose(best.get_ydata(), FITNESS[BEST])  # success rate, the task defines one
