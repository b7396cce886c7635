"""Hyperparameter sweeps: a 2 x 2 x 2 grid trained as one compiled call equals the eight
runs made one at a time; ranking, outputs and refusals of scripts/sweep.py."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from pathlib import Path

import jax
import numpy as np
import pytest

from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.hrv import HRWritingEnv
from purehr.experiments import sweep
from purehr.experiments.group_result import GroupResult
from purehr.experiments.ranking import format_table, rank_settings
from purehr.tasks import HRV_DEFAULTS
from purehr.viz import sweep_heatmap

ROOT = Path(__file__).resolve().parents[1]
TINY = HRV_DEFAULTS.replace(
    num_envs=8,
    num_steps=16,
    minibatch_size=64,
    num_epochs=2,
    actor_hidden=(16,),
    critic_hidden=(16,),
    total_timesteps=8 * 16 * 3,
    eval_episodes=8,
)
AXES = {"learning_rate": (1e-3, 3e-3), "clip_range": (0.02, 0.3), "ent_coef": (0.0, 0.5)}
SEED = 4


@pytest.fixture(scope="module")
def hrv_sweep():
    """The 2 x 2 x 2 grid (one seed) trained and evaluated by the task-level sweep."""
    (group,) = sweep.run_task_sweep("hrv", TINY, AXES, [SEED], log=lambda text: None)
    return group


def load_cli():
    """scripts/sweep.py as a module (its name would clash with purehr.experiments.sweep on sys.path)."""
    spec = importlib.util.spec_from_file_location("sweep_cli", ROOT / "scripts" / "sweep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_grid_is_setting_major_over_seeds():
    settings = sweep.grid_settings(AXES)
    assert len(settings) == 8
    assert settings[0] == {"learning_rate": 1e-3, "clip_range": 0.02, "ent_coef": 0.0}
    assert settings[1] == {"learning_rate": 1e-3, "clip_range": 0.02, "ent_coef": 0.5}
    keys, hparams = sweep.flatten_grid(TINY, settings[:2], [0, 7])
    assert np.array_equal(np.asarray(keys), np.asarray(keys_for_seeds([0, 7, 0, 7])))
    assert np.asarray(hparams.ent_coef).tolist() == pytest.approx([0.0, 0.0, 0.5, 0.5])
    assert np.asarray(hparams.gamma).tolist() == pytest.approx([TINY.gamma] * 4)  # unswept: the config's


def test_sweep_equals_the_eight_runs_made_one_at_a_time(hrv_sweep):
    env = HRWritingEnv(8)
    single = make_train(TINY, env, env.default_params)
    keys = keys_for_seeds([SEED])
    alone = []
    for index, setting in enumerate(hrv_sweep.settings):
        _, hparams = sweep.flatten_grid(TINY, [setting], [SEED])
        result = single.jitted(keys, hparams)
        alone.append(leaves(result.runner.params))
        for together, by_itself in zip(leaves(hrv_sweep.runner.params), alone[-1]):
            # float32 sums batched over 8 runs associate differently from one run's
            np.testing.assert_allclose(together[index], by_itself[0], rtol=1e-4, atol=1e-5)
    # every setting trained differently (the hparams reached each run), by far more than
    # the tolerance above
    for i in range(8):
        for j in range(i + 1, 8):
            difference = max(np.max(np.abs(a[0] - b[0])) for a, b in zip(alone[i], alone[j]))
            assert difference > 1e-4, (i, j, difference)
    # and the hparams pytree means what the config fields mean
    by_config = make_train(TINY.replace(**hrv_sweep.settings[-1]), env, env.default_params)(keys)
    for a, b in zip(leaves(by_config.runner.params), alone[-1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_every_run_is_evaluated_on_the_heldout_protocol(hrv_sweep):
    assert {"success_rate", "return_mean", "noisy_success_rate", "alignment"} <= set(hrv_sweep.evaluation)
    for values in hrv_sweep.evaluation.values():
        assert values.shape == (8,) and np.isfinite(values).all()
    assert hrv_sweep.training_metrics["loss"].shape == (8, TINY.num_updates)
    assert hrv_sweep.timing["train_run_s"] > 0 and hrv_sweep.timing["eval_compile_s"] > 0


def _synthetic_group(name, success, returns, seeds=(0, 1, 2)):
    axes = {"learning_rate": (1e-4, 1e-3), "clip_range": (0.2,)}
    settings = sweep.grid_settings(axes)
    return GroupResult(
        name,
        TINY,
        settings,
        list(seeds),
        runner=None,
        training_metrics={"mean_episode_return": np.zeros((len(success), 4))},
        evaluation={"success_rate": np.asarray(success, float), "return_mean": np.asarray(returns, float)},
    ), axes


def test_ranking_orders_by_success_then_return_with_t_intervals():
    group, axes = _synthetic_group("g", [0.5, 0.6, 0.7, 0.9, 0.9, 0.9], [1.0, 1.0, 1.0, 2.0, 3.0, 4.0])
    other, _ = _synthetic_group("h", [0.5, 0.6, 0.7, 0.5, 0.6, 0.7], [5.0, 5.0, 5.0, 1.0, 1.0, 1.0])
    ranking = rank_settings([group, other], list(axes))
    assert [(row["group"], row["learning_rate"]) for row in ranking] == [
        ("g", 1e-3),
        ("h", 1e-4),
        ("g", 1e-4),
        ("h", 1e-3),
    ]
    assert [row["rank"] for row in ranking] == [1, 2, 3, 4]
    row = ranking[2]  # success 0.5, 0.6, 0.7: sd 0.1, t(0.975, 2) = 4.3027
    assert row["success_rate_mean"] == pytest.approx(0.6)
    assert row["success_rate_ci_high"] - 0.6 == pytest.approx(4.302653 * 0.1 / math.sqrt(3), rel=1e-5)
    assert ranking[0]["return_mean_ci_low"] == pytest.approx(3.0 - 4.302653 * 1.0 / math.sqrt(3), rel=1e-5)
    text = format_table(ranking, list(axes))
    assert text.splitlines()[1].startswith("1 ") and "90.0% [90.0%, 90.0%]" in text


def test_heatmap_axes_default_to_the_longest():
    assert sweep_heatmap.heatmap_axes({"a": (1, 2), "b": (1, 2, 3), "c": (1, 2, 3)}) == ["b", "c"]
    assert sweep_heatmap.heatmap_axes({"a": (1, 2)}) == ["a"]
    assert sweep_heatmap.heatmap_axes({"a": (1,), "b": (1, 2)}) == ["b"]
    with pytest.raises(ValueError, match="not swept"):
        sweep_heatmap.heatmap_axes({"a": (1, 2)}, ["gamma"])


def test_outputs_are_written_and_a_second_sweep_is_refused(hrv_sweep, tmp_path, capsys):
    out = tmp_path / "sweep"
    sweep.prepare_out_dir(out, overwrite=False)
    assert not out.exists()  # a check only: write_outputs creates it
    ranking = rank_settings([hrv_sweep], list(AXES))
    paths = sweep.write_outputs(out, [hrv_sweep], AXES, ranking, {"command": ["test"]}, ["learning_rate", "ent_coef"])
    assert {p.name for p in paths} == {"ranking.csv", "runs.csv", "heatmap.png", "heatmap.pdf", "sweep.json"} | {
        "sensitivity.md",
        "sensitivity.png",
        "sensitivity.pdf",
    }
    with open(out / "ranking.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8 and [int(r["rank"]) for r in rows] == list(range(1, 9))
    assert {"success_rate_ci_low", "return_mean_ci_high", "noisy_success_rate_mean"} <= set(rows[0])
    with open(out / "runs.csv") as handle:
        assert len(list(csv.DictReader(handle))) == 8
    assert json.loads((out / "sweep.json").read_text())["groups"][0]["config"]["num_envs"] == 8
    with pytest.raises(sweep.SweepDirectoryInUse, match="already holds a sweep"):
        sweep.prepare_out_dir(out, overwrite=False)
    # the CLI refuses it before compiling anything
    sweep_cli = load_cli()
    with pytest.raises(SystemExit) as exit_info:
        sweep_cli.main(["--task", "hrv", "--learning-rate", "1e-4", "--out", str(out)])
    assert exit_info.value.code == 2
    assert "already holds a sweep" in capsys.readouterr().err
    # --overwrite accepts it, but nothing is removed before the new results exist
    sweep.prepare_out_dir(out, overwrite=True)
    assert (out / "sweep.json").exists() and (out / "heatmap.png").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--learning-rate", "0"], "learning_rate=0.0"),
        (["--clip-range", "0.1", "0.1"], "repeats a value"),
        (["--minibatch-size", "64", "100"], "does not divide"),
        (["--learning-rate", "1e-4", "--heatmap", "gamma"], "not swept"),
        # issue 63 W7: an algorithm's own axes and choices; another's are refused naming the algorithm
        (["--algorithm", "pqn", "--clip-range", "0.1", "0.2"], "--clip-range does not apply to a pqn sweep"),
        (["--algorithm", "pqn", "--q-lambda", "0.5", "2"], "PQNConfig.q_lambda=2.0"),
        (["--q-lambda", "0.5", "0.9"], "--q-lambda does not apply to a ppo sweep"),
        (["--task", "hrv@pqn", "--algorithm", "sac"], "--task hrv@pqn trains pqn, --algorithm sac; give one"),
    ],
)
def test_cli_refuses_bad_grids_before_any_work(tmp_path, capsys, argv, message):
    sweep_cli = load_cli()
    with pytest.raises(SystemExit):
        sweep_cli.main(["--task", "hrv", "--out", str(tmp_path / "out"), *argv])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_ranking_shows_the_reference_policies_under_its_rows():
    """Issue 63 F12: what a setting must beat, as the protocol's results table shows it."""
    group, axes = _synthetic_group("g", [0.5, 0.6, 0.7, 0.9, 0.9, 0.9], [1.0, 1.0, 1.0, 2.0, 3.0, 4.0])
    references = {"reference: oracle": {"success_rate": 1.0, "return_mean": 9.5}}
    references["floor: random"] = {"return_mean": 0.25}
    lines = format_table(rank_settings([group], list(axes)), list(axes), references=references).splitlines()
    assert lines[-2].split() == ["-", "reference:", "oracle", "-", "-", "-", "100.0%", "9.500", "-"]
    assert lines[-1].split() == ["-", "floor:", "random", "-", "-", "-", "nan", "0.250", "-"]


def test_a_pqn_sweep_trains_pqn_over_its_own_axes_and_records_algorithm_profile_and_floors(tmp_path, capsys):
    """Issue 63 W7 + F12: ``--algorithm pqn`` sweeps PQN's hyperparameters (q_lambda is none of
    PPO's) with its own shape choice (hidden), the table ends with hrv's reference and floors, and
    sweep.json records the algorithm, the profile and their numbers (a tiny grid: 2 x 1 seed)."""
    out = tmp_path / "pqn"
    argv = ["--task", "hrv", "--algorithm", "pqn", "--q-lambda", "0.5", "0.9", "--hidden", "8", "--num-envs", "4"]
    argv += ["--num-steps", "16", "--minibatch-size", "64", "--steps", "64", "--seeds", "0", "--eval-episodes", "4"]
    assert load_cli().main([*argv, "--out", str(out)]) == 0
    table = capsys.readouterr().out
    record = json.loads((out / "sweep.json").read_text())
    assert (record["algorithm"], record["profile"], record["task"]) == ("pqn", "cpu", "hrv@pqn")
    assert record["axes"] == {"q_lambda": [0.5, 0.9]} and record["groups"][0]["config"]["hidden"] == [8]
    assert set(record["references"]) == {"reference: oracle", "floor: random", "floor: no-op"}
    floor = record["references"]["floor: random"]
    assert 0.0 <= floor["success_rate"] <= 1.0 and "floor: random" in table and "reference: oracle" in table
