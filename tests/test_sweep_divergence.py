"""A sweep marks diverged runs and ranks their settings last (issue 27, defect 3), and tells of a
rounded budget as the trainer does (user path 8). One tiny grid is trained: a learning rate of
1e30 diverges at the first update and keeps its initial policy, which can outscore a healthy one."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from test_sweep import TINY as SWEEP_TINY

from purehr.envs.hrv import HRWritingEnv
from purehr.experiments import sweep
from purehr.experiments.group_result import GroupResult
from purehr.experiments.ranking import format_table, rank_settings, run_rows
from purehr.viz import sweep_heatmap

ROOT = Path(__file__).resolve().parents[1]
TINY = SWEEP_TINY.replace(num_epochs=1, actor_hidden=(8,), critic_hidden=(8,), total_timesteps=8 * 16 * 2)
AXES = {"learning_rate": (1e-3, 1e30)}


def synthetic_group(success, diverged_at, seeds=(0, 1, 2)) -> GroupResult:
    """Two settings x ``seeds``: held-out success and the first diverged update (0: healthy) per run."""
    return GroupResult(
        "g",
        TINY,
        sweep.grid_settings(AXES),
        list(seeds),
        runner=None,
        training_metrics={"mean_episode_return": np.zeros((len(success), 4))},
        evaluation={"success_rate": np.asarray(success, float), "return_mean": np.zeros(len(success))},
        diverged_at=np.asarray(diverged_at),
    )


def test_a_setting_with_a_diverged_seed_ranks_after_every_healthy_one(tmp_path):
    # lr 1e30 scores higher (its frozen policy), but its seed 2 diverged at update 3
    group = synthetic_group([0.1, 0.1, 0.1, 0.9, 0.9, 0.9], [0, 0, 0, 0, 0, 3])
    ranking = rank_settings([group], list(AXES))
    assert [(row["learning_rate"], row["diverged_seeds"]) for row in ranking] == [(1e-3, ""), (1e30, "2")]
    assert [row["diverged_at_update"] for row in run_rows([group], list(AXES))] == [0, 0, 0, 0, 0, 3]
    text = format_table(ranking, list(AXES))
    assert text.splitlines()[2].endswith("seed 2 (ranked last)") and text.splitlines()[1].endswith("-")
    # the heat map leaves a diverged setting out of its cell: the only one there says "diverged"
    paths = sweep_heatmap.plot_heatmap(ranking, AXES, ["learning_rate"], tmp_path, "max")
    assert {path.suffix for path in paths} == {".png", ".pdf"}
    healthy = [row for row in ranking if not row["diverged_seeds"]]
    cells = sweep_heatmap._cells(healthy, "success_rate_mean", ("learning_rate", [1e-3, 1e30]), (None, [None]), "max")
    assert cells[0, 0] == pytest.approx(0.1) and np.isnan(cells[0, 1])


def test_a_diverged_run_is_marked_in_both_csvs_and_ranked_last(tmp_path):
    env = HRWritingEnv()
    group = sweep.train_group(TINY, env, AXES, [0], env_params=env.default_params)  # no evaluation: faster
    assert group.diverged_at[0] == 0 and group.diverged_at[1] >= 1  # lr 1e30: non-finite from the first update
    ranking = rank_settings([group], list(AXES))
    sweep.write_outputs(tmp_path, [group], AXES, ranking, {"command": ["test"]})
    with open(tmp_path / "ranking.csv") as handle:
        ranked = list(csv.DictReader(handle))
    assert [(row["learning_rate"], row["diverged_seeds"]) for row in ranked] == [("0.001", ""), ("1e+30", "0")]
    with open(tmp_path / "runs.csv") as handle:
        runs = {row["learning_rate"]: row for row in csv.DictReader(handle)}
    assert runs["0.001"]["diverged_at_update"] == "0" and int(runs["1e+30"]["diverged_at_update"]) >= 1


def test_the_cli_says_when_it_rounds_the_budget_before_training(tmp_path, capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("sweep_cli_rounding", ROOT / "scripts" / "sweep.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)

    class Stopped(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stopped

    monkeypatch.setattr(sweep, "run_task_sweep", stop)
    argv = ["--task", "hrv", "--num-envs", "8", "--num-steps", "64", "--learning-rate", "1e-3", "--out"]
    with pytest.raises(Stopped):
        cli.main([*argv, str(tmp_path / "a"), "--steps", "4000"])
    assert (
        "note: hrv: a budget of 4,000 steps per seed is rounded up to 4,096 = 8 whole updates of 512 steps "
        "(8 envs x 64)" in capsys.readouterr().err
    )
    with pytest.raises(Stopped):
        cli.main([*argv, str(tmp_path / "b"), "--steps", "4096"])
    assert "rounded up" not in capsys.readouterr().err
