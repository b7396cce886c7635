"""studies/scripts/algorithm_study.py's training windows and flag parsing, on hand-written metrics (no
training: its learning runs are recorded in results/algorithms/, not here)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "studies" / "scripts" / "algorithm_study.py"


@pytest.fixture(scope="module")
def study():
    spec = importlib.util.spec_from_file_location("algorithm_study_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _update(steps, returns, success):
    return {
        "env_steps": np.array([steps, steps]),
        "mean_episode_return": np.array(returns, np.float32),
        "train_success_rate": np.array(success, np.float32),
        "q_mean": np.zeros(2),  # not a training statistic: left out
    }


def test_windows_average_each_seed_and_skip_empty_updates(study):
    windows = study.TrainingWindows(every=2, start=0.0)
    windows(_update(100, [1.0, np.nan], [0.0, np.nan]))
    assert windows.rows == []  # the window is not full yet
    windows(_update(200, [3.0, np.nan], [1.0, np.nan]))
    windows(_update(300, [-2.0, 5.0], [0.5, 1.0]))
    windows(_update(400, [np.nan, 7.0], [np.nan, 0.0]))
    first, second = windows.rows
    assert first["env_steps"] == 200 and second["env_steps"] == 400
    # seed 0: mean of 1 and 3; seed 1 finished no episode in the window: None (strict JSON)
    assert first["mean_episode_return"] == [2.0, None]
    assert first["train_success_rate"] == [0.5, None]
    # the NaN of an update without a finished episode is skipped, not averaged in
    assert second["mean_episode_return"] == [-2.0, 6.0]
    assert second["train_success_rate"] == [0.5, 0.5]
    assert set(first) == {"env_steps", "seconds", "mean_episode_return", "train_success_rate"}
    assert math.isfinite(first["seconds"]) and first["seconds"] >= 0


def test_set_values_are_literals_and_a_bad_pair_is_named(study):
    assert study.parse_changes(["learning_rate=1e-3", "hidden=(64, 64)", "activation=relu"]) == {
        "learning_rate": 1e-3,
        "hidden": (64, 64),
        "activation": "relu",
    }
    with pytest.raises(SystemExit, match="'learning_rate': expected FIELD=VALUE"):
        study.parse_changes(["learning_rate"])


def test_env_args_are_json_values_and_a_bad_pair_is_named(study):
    args = study.build_parser().parse_args(
        ["--env-arg", "small_start_fraction=1.0", "--env-arg", "observe_rates=false", "--env-arg", "name=wide"]
    )
    assert study.parse_env_args(args.env_arg) == {"small_start_fraction": 1.0, "observe_rates": False, "name": "wide"}
    assert study.build_parser().parse_args([]).env_arg is None  # no flag: the task's own environment
    with pytest.raises(SystemExit, match="'small_start_fraction': expected KEY=VALUE"):
        study.parse_env_args(["small_start_fraction"])
    with pytest.raises(SystemExit, match="'1x=2': expected KEY=VALUE"):
        study.parse_env_args(["1x=2"])


def test_env_args_reach_the_training_environment(study, monkeypatch):
    """``main`` builds the training environment from ``--env-arg``: swing's training starts
    change to the ones asked for, stopped before any training."""
    built = {}

    class Stop(Exception):
        pass

    def make_train(config, env, callback=None):
        built["params"] = env.default_params
        raise Stop

    monkeypatch.setattr(study, "make_train", make_train)
    with pytest.raises(Stop):
        study.main(["--algorithm", "sac", "--task", "swing", "--env-arg", "small_start_fraction=0.75"])
    assert float(built["params"].small_start_fraction) == 0.75
    assert float(built["params"].small_reset_noise) == 0.05  # the task's other training start field kept


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("smal_start_fraction=1", "unexpected keyword argument 'smal_start_fraction'"),
        ("small_start_fraction=2", "fraction in"),
    ],
)
def test_a_bad_env_arg_is_one_line_before_training(study, monkeypatch, assignment, message):
    monkeypatch.setattr(study, "make_train", lambda *a, **k: pytest.fail("trained with a bad --env-arg"))
    with pytest.raises(SystemExit, match=f"--env-arg .*{message}"):
        study.main(["--algorithm", "sac", "--task", "swing", "--env-arg", assignment])


def test_extra_statistics_are_averaged_and_an_unknown_one_is_named(study):
    windows = study.TrainingWindows(every=2, start=0.0, names=(*study.TRAINING_STATISTICS, "q_mean"))
    windows({**_update(100, [1.0, 2.0], [0.0, 1.0]), "q_mean": np.array([1.0, -4.0])})
    windows({**_update(200, [1.0, 2.0], [0.0, 1.0]), "q_mean": np.array([3.0, 0.0])})
    assert windows.rows[0]["q_mean"] == [2.0, -2.0]
    with pytest.raises(SystemExit, match="--statistic alhpa: not a metric of sac; expected one of .*alpha"):
        # a tiny budget, so that a missing check would train briefly and fail here, not hang
        study.main(
            ["--algorithm", "sac", "--task", "swing", "--progress", "1", "--statistic", "alhpa"]
            + ["--set", "total_timesteps=512", "learning_starts=256", "--episodes", "1"]
        )
