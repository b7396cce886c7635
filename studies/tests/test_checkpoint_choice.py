"""studies/scripts/checkpoint_choice.py: its selection rule on hand-made rows, and the check that the
validation starts are not the held-out ones (no run, no JAX for swing)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "studies" / "scripts" / "checkpoint_choice.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("checkpoint_choice", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(success100, speed100, full=None, success20=None, speed20=None):
    """One seed's checkpoints at steps 0, 10, 20, ...; held-out = validation-100 unless given."""
    count = len(success100)
    full = full or [False] * count
    success20 = success20 or success100
    speed20 = speed20 or speed100
    return [
        {
            "steps": 10 * k,
            "full": full[k],
            "val100_success": success100[k],
            "val100_speed": speed100[k],
            "val20_success": success20[k],
            "val20_speed": speed20[k],
            "heldout_success": success100[k],
            "heldout_speed": speed100[k],
        }
        for k in range(count)
    ]


SEED = rows(
    [0.0, 0.90, 1.00, 1.00, 0.96],
    [None, 14.0, 15.0, 13.5, 12.0],
    full=[True, False, True, False, True],
    success20=[0.0, 1.00, 0.95, 0.95, 0.95],
    speed20=[None, 16.0, 14.0, 13.0, 12.5],
)


def test_best_takes_the_highest_success_then_the_faster(script):
    assert script.choose(SEED, 100)["steps"] == 30  # 1.00 at 13.5 s beats 1.00 at 15.0 s and 0.96 at 12.0 s
    assert script.choose(SEED, 20)["steps"] == 10  # the 20-episode columns: 1.00 at 16 s beats every 0.95


def test_ties_go_to_the_later_checkpoint_and_a_missing_speed_is_slowest(script):
    tied = rows([1.0, 1.0, 1.0, 0.5], [12.0, 12.0, float("nan"), 10.0])
    assert script.choose(tied, 100)["steps"] == 10  # equal success and speed: the later one
    no_speed = rows([1.0, 1.0], [None, 20.0])
    assert script.choose(no_speed, 100)["steps"] == 10  # None (no success timed) loses to 20 s
    nothing = rows([0.0, 0.0, 0.0], [None, None, None])
    assert script.choose(nothing, 100)["steps"] == 20  # nothing learned: the last checkpoint


def test_the_variants_restrict_the_candidates(script):
    assert script.choose(SEED, 100, among="last2")["steps"] == 30
    assert script.choose(SEED, 100, among="last1")["steps"] == 40
    assert script.choose(SEED, 100, among="full")["steps"] == 20  # full: steps 0, 20, 40
    assert script.choose(SEED, 100, among="last99")["steps"] == 30  # more than there are: all
    for bad in ("last0", "lastx", "first3", ""):
        with pytest.raises(ValueError, match="expected 'all', 'full' or 'last<N>'"):
            script.choose(SEED, 100, among=bad)


def test_fastest_at_bar_trades_success_above_the_bar_for_speed(script):
    assert script.choose(SEED, 100, rule="fastest-at-bar")["steps"] == 40  # 0.96 at 12.0 s
    assert script.choose(SEED, 100, rule="fastest-at-bar", bar=0.99)["steps"] == 30  # 13.5 < 15.0
    assert script.choose(SEED, 100, rule="fastest-at-bar", bar=1.01)["steps"] == 30  # none at bar: best
    with pytest.raises(ValueError, match="rule='fast'"):
        script.choose(SEED, 100, rule="fast")


def test_outcome_counts_and_speeds_over_the_seeds_that_succeed(script):
    chosen = [
        {"steps": 1, "heldout_success": 1.00, "heldout_speed": 13.0},
        {"steps": 2, "heldout_success": 0.95, "heldout_speed": 14.0},
        {"steps": 3, "heldout_success": 0.94, "heldout_speed": 15.5},
        {"steps": 4, "heldout_success": 0.00, "heldout_speed": None},
    ]
    result = script.outcome(chosen, reference=13.95)
    assert result["seeds_at_bar"] == 2 and result["seeds_faster"] == 1
    assert result["median_speed"] == 14.0 and math.isclose(result["mean_speed"], 42.5 / 3)
    assert result["worst_speed"] == 15.5 and result["chosen_steps"] == [1, 2, 3, 4]
    assert script.outcome(chosen, reference=None)["seeds_faster"] is None


def test_choices_lists_the_last_checkpoint_and_the_oracle_first(script):
    other = rows([0.2, 1.0, 0.9], [16.0, 14.0, 13.0], full=[True, False, True])
    entries = script.choices([SEED, other], reference=13.95, sizes=[100], last_n=[2])
    by_rule = {(e["rule"], e.get("episodes")): e for e in entries}
    assert by_rule[("last checkpoint", None)]["chosen_steps"] == [40, 20]
    assert by_rule[("best among all", 100)]["chosen_steps"] == [30, 10]
    assert by_rule[("best among last2", 100)]["chosen_steps"] == [30, 10]
    assert by_rule[("best among full", 100)]["chosen_steps"] == [20, 20]
    oracle = by_rule[("held-out oracle (selection bias, not a method)", None)]
    assert oracle["chosen_steps"] == [30, 10] and oracle["seeds_at_bar"] == 2


def test_validation_starts_never_coincide_with_the_held_out_ones(script):
    from purehr.envs.swing.evaluation import HELDOUT_SEED

    clean = script.starts_check("swing", None, [100, 20], script.VALIDATION_SEED)
    assert clean["coinciding"] == 0 and clean["smallest_difference"] > 0
    same = script.starts_check("swing", None, [100, 20], HELDOUT_SEED)
    assert same["coinciding"] == 120  # each held-out start found again


def test_hrv_validation_episodes_differ_from_the_held_out_ones(script):
    from purehr.envs.hrv.evaluation import HRV_EVAL_SEED
    from purehr.tasks import get_task

    env = get_task("hrv").make_env()
    setup = SimpleNamespace(env=env, eval_env_params=env.default_params)
    assert script.starts_check("hrv", setup, [100, 20], script.VALIDATION_SEED)["coinciding"] == 0
    assert script.starts_check("hrv", setup, [20], HRV_EVAL_SEED)["coinciding"] >= 20


def test_optimism_measures_the_chosen_checkpoints_validation_advantage_over_the_last(script):
    seed = rows([1.0, 1.0], [12.0, 14.0])  # validation: the first is faster, chosen
    seed[0]["heldout_speed"] = 13.0  # but held out it is 1.0 s slower than on validation
    seed[1]["heldout_speed"] = 13.5  # the last: validation 0.5 s slower than held out
    text = script.optimism({"label": "x", "per_seed": [seed]}, 100)
    assert "last: validation - held-out success +0.000, speed +0.50 (1 seeds)" in text
    assert "chosen: validation - held-out success +0.000, speed -1.00 (1 seeds)" in text


def test_latest_best_ignores_speed_and_keeps_the_later_of_equal_success(script):
    slower_later = rows([1.0, 1.0, 0.5], [12.0, 14.0, 10.0])
    assert script.choose(slower_later, 100, rule="latest-best")["steps"] == 10  # the later 1.00, though slower
    assert script.choose(slower_later, 100)["steps"] == 0  # best: the faster 1.00
    assert script.choose(SEED, 20, rule="latest-best")["steps"] == 10  # the one 1.00 of the 20-episode columns
