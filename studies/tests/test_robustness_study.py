"""studies/scripts/robustness_study.py's per-seed summary on a synthetic run directory (no JAX run)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import write_synthetic_run

SCRIPT = Path(__file__).resolve().parents[2] / "studies" / "scripts" / "robustness_study.py"


@pytest.fixture(scope="module")
def study():
    spec = importlib.util.spec_from_file_location("robustness_study", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# held-out success at checkpoints 0, 100, 200, 300 steps; updates every 50 steps
SUCCESS = {0: [0.0, 0.96, 1.0, 0.97], 1: [0.0, 0.97, 0.95, 0.40], 2: [0.0, 0.50, 0.90, 0.94]}


@pytest.fixture
def run_dir(tmp_path):
    updates = {
        ("hrv", seed): [
            {"update": u, "env_steps": 50 * u, "entropy": float(u), "approx_kl": 0.01 * u, "value_loss": 10.0 - u}
            for u in range(1, 7)
        ]
        for seed in SUCCESS
    }
    checkpoints = {
        ("hrv", seed): [
            {"actual_steps": 100 * k, "eval_success_rate": rate, "eval_episode_length": 10.0 - k}
            for k, rate in enumerate(rates)
        ]
        for seed, rates in SUCCESS.items()
    }
    return write_synthetic_run(tmp_path, {"tasks": ["hrv"], "seeds": list(SUCCESS)}, updates, checkpoints)


def test_seed_summary_first_last_bar_and_failure_kind(study, run_dir):
    passing, collapsed, never = (study.seed_summary(run_dir, "hrv", seed) for seed in SUCCESS)
    assert (passing["first_met_steps"], passing["last_met_steps"], passing["checkpoints_met"]) == (100, 300, 3)
    assert passing["success"] == 0.97 and passing["speed"] == 7.0 and "failure" not in passing
    # met at 100 and 200 (0.95 counts), ended at 0.40: a collapse after learning
    assert (collapsed["first_met_steps"], collapsed["last_met_steps"]) == (100, 200)
    assert collapsed["failure"] == "collapsed after learning" and collapsed["best_success"] == 0.97
    assert never["failure"] == "never learned" and never["first_met_steps"] is None
    # a success no faster than the reference is slow, and keeps its learning curve
    slow = study.seed_summary(run_dir, "hrv", 0, reference=7.0)
    assert slow["slow"] and len(slow["learning_curve"]) == 4 and "learning_curve" not in passing
    assert not study.seed_summary(run_dir, "hrv", 0, reference=7.5)["slow"]


def test_learning_curve_means_the_updates_of_each_checkpoint_interval(study, run_dir):
    curve = study.seed_summary(run_dir, "hrv", 1)["learning_curve"]
    assert [point["steps"] for point in curve] == [0, 100, 200, 300]
    assert curve[0]["entropy"] is None  # no update before the first checkpoint
    # (100, 200]: updates 3 and 4 (env_steps 150, 200)
    assert curve[2]["entropy"] == pytest.approx(3.5)
    assert curve[2]["approx_kl"] == pytest.approx(0.035)
    assert curve[2]["value_loss"] == pytest.approx(6.5)
    assert curve[3]["success"] == 0.40 and curve[3]["speed"] == 7.0


def test_an_unknown_setting_is_refused_in_one_line(study):
    with pytest.raises(SystemExit, match="--setting 'o9': expected one of default, xla-o1"):
        study.apply_setting("o9")
