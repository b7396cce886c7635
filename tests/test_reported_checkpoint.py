"""The reported checkpoint chosen on validation episodes (``ProtocolSettings.report_candidates``,
issue 51): the rule, the choice against an independent evaluation of every candidate, the
held-out report (the logged full evaluation, or a new one for a quick checkpoint), what reads
it (results table, goals, restore, publish), a kill during the choice, and the validation
starts kept apart from the held-out ones."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil

import jax
import numpy as np
import pytest
from conftest import PROTOCOL_SMALL

from purehr.envs.swing.evaluation import HELDOUT_SEED, heldout_starts
from purehr.protocol_settings import ProtocolSettings
from purehr.reports.publish import publish_run
from purehr.reports.results_table import GOAL_METRIC, final_checkpoint_metrics, results_table
from purehr.run import choose_reported as reported
from purehr.run.compiled.task_setup import recorded_setup
from purehr.run.protocol import train_all_seeds
from purehr.run.restoring import restore
from purehr.run.store.files import read_csv, write_csv
from purehr.run.store.reported import reported_rows
from purehr.run.store.run_dir import RunDirectory, read_checkpoint_rows
from purehr.viz.learning_curves import write_final_metrics
from purehr.viz.run_data import load_run

SEEDS = [0, 1]
# 32 updates of 512 steps, targets every 1,500: the last three checkpoints are 13,824 (quick: full
# every 2nd target), 15,360 (full) and 16,384 (the last, full)
SMALL = dict(PROTOCOL_SMALL, checkpoint_interval=1500, report_candidates=3, validation_episodes=3)
TASK = "hrv"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("reported") / "run"
    with contextlib.redirect_stderr(io.StringIO()):
        train_all_seeds(root, tasks=[TASK], seeds=SEEDS, overrides=SMALL, progress=False)
    return root


def _validation_of(root, seed: int, steps: int) -> dict:
    """One candidate evaluated on its own (not vmapped with the others): the independent reference."""
    restored = restore(root, TASK, seed, steps)
    setup = recorded_setup(RunDirectory(root).read_manifest(), TASK)
    policy = setup.algorithm.policy
    seed = reported.VALIDATION_SEED
    evaluate = jax.jit(
        lambda params: setup.task.env_evaluation(
            setup.env, setup.eval_env_params, policy(params), num_episodes=3, seed=seed
        )
    )
    return {name: float(value) for name, value in evaluate(restored.params).items()}


def test_the_rule_prefers_success_then_speed_then_the_later():
    rows = [
        {"success_rate": 0.9, "episode_length": 4.0},
        {"success_rate": 1.0, "episode_length": 6.0},
        {"success_rate": 1.0, "episode_length": 5.0},
        {"success_rate": 1.0, "episode_length": 5.0},
        {"success_rate": 1.0, "episode_length": math.nan},
    ]
    assert reported.choose(rows, [1, 2, 3, 4, 5], "episode_length", lower_is_better=True) == 3  # the later tie
    assert reported.choose(rows[:3], [1, 2, 3], "episode_length", lower_is_better=True) == 2
    returns = [{"success_rate": math.nan, "return_mean": r} for r in (3.0, 7.0, 5.0)]  # no success defined
    assert reported.choose(returns, [1, 2, 3], "return_mean", lower_is_better=False) == 1


def test_the_ranking_metric_is_the_goal_metric():
    for task, (metric, _, _) in GOAL_METRIC.items():
        assert reported.ranking_metric(task) == (metric, True)
        assert reported.ranking_metric(f"{task}@sac") == (metric, True)
    assert reported.ranking_metric("gymnax:CartPole-v1") == ("return_mean", False)


def test_the_choice_matches_each_candidate_evaluated_alone(run):
    manifest = RunDirectory(run).read_manifest()
    assert manifest["status"] == "finished"
    for seed in SEEDS:
        row = read_csv(RunDirectory(run).reported_csv(TASK, seed))[0]
        logged = read_checkpoint_rows(RunDirectory(run).checkpoints_csv(TASK, seed))
        candidates = [r["actual_steps"] for r in logged[-3:]]
        assert [r["eval_episodes"] for r in logged[-3:]] == [2, 4, 4]  # a quick candidate, then two full
        alone = [_validation_of(run, seed, steps) for steps in candidates]
        chosen = candidates[reported.choose(alone, candidates, "episode_length", lower_is_better=True)]
        assert int(row["actual_steps"]) == chosen == manifest["reported_checkpoints"][TASK]["chosen_steps"][str(seed)]
        for name, value in alone[candidates.index(chosen)].items():
            assert float(row[f"validation_{name}"]) == pytest.approx(value, rel=1e-5, abs=1e-6), name
        assert int(row["last_actual_steps"]) == candidates[-1]


def test_a_full_checkpoint_is_reported_by_its_logged_evaluation(run):
    for seed in SEEDS:
        row = reported_rows(run, TASK, [seed])[0]
        logged = {r["actual_steps"]: r for r in read_checkpoint_rows(RunDirectory(run).checkpoints_csv(TASK, seed))}
        chosen = logged[row["actual_steps"]]
        if chosen["eval_episodes"] == SMALL["eval_episodes"]:
            assert {k: v for k, v in row.items() if k.startswith("eval_")} == {
                k: v for k, v in chosen.items() if k.startswith("eval_")
            }


@pytest.fixture(scope="module")
def quick_choice(run, tmp_path_factory):
    """A copy of the run whose choice is forced onto the quick candidate (the first of the three)."""
    root = tmp_path_factory.mktemp("quick") / "run"
    shutil.copytree(run, root)
    manifest = RunDirectory(root).read_manifest()
    setup = recorded_setup(manifest, TASK)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reported, "choose", lambda *args, **kwargs: 0)
        rows = reported.report_task(RunDirectory(root), setup, SEEDS)
    return root, rows


def test_a_quick_checkpoint_is_evaluated_again_on_the_full_heldout_episodes(quick_choice):
    root, rows = quick_choice
    setup = recorded_setup(RunDirectory(root).read_manifest(), TASK)
    for seed, row in zip(SEEDS, rows):
        restored = restore(root, TASK, seed, row["actual_steps"])
        assert restored.checkpoint_row["eval_episodes"] == SMALL["quick_eval_episodes"]
        alone = jax.jit(setup.evaluate)(restored.params)
        assert row["eval_episodes"] == SMALL["eval_episodes"]
        for name, value in alone.items():
            assert row[f"eval_{name}"] == pytest.approx(float(value), rel=1e-5, abs=1e-6), name


def test_the_table_restore_and_publish_read_the_reported_checkpoint(quick_choice, tmp_path):
    root, rows = quick_choice
    metrics = final_checkpoint_metrics(root, TASK, SEEDS)
    assert metrics["steps"].tolist() == [row["actual_steps"] for row in rows]
    assert metrics["success_rate"].tolist() == [row["eval_success_rate"] for row in rows]
    assert f"PPO, 2 seeds, {rows[0]['actual_steps']:,} steps |" in results_table(root)  # both chose 13,824
    for seed, row in zip(SEEDS, rows):
        assert restore(root, TASK, seed, "reported").steps == row["actual_steps"] < restore(root, TASK, seed).steps
    final = read_csv(write_final_metrics(load_run(root), tmp_path / "final_metrics.csv"))
    assert [(int(r["actual_steps"]), float(r["eval_success_rate"])) for r in final] == [
        (row["actual_steps"], row["eval_success_rate"]) for row in rows
    ]
    record = tmp_path / "record"
    publish_run(root, record)
    for seed, row in zip(SEEDS, rows):
        assert restore(record, TASK, seed, "reported").steps == row["actual_steps"]
    # a reported.csv left behind by newer checkpoints (an extended run) is not read
    path = RunDirectory(root).reported_csv(TASK, SEEDS[0])
    stale = dict(rows[0], last_actual_steps=rows[0]["last_actual_steps"] - 1)
    write_csv(path, list(stale), [stale])
    assert reported_rows(root, TASK, SEEDS) is None
    assert final_checkpoint_metrics(root, TASK, SEEDS)["steps"].tolist() == [16384, 16384]


def test_a_kill_during_the_choice_is_finished_by_a_resume(run, tmp_path):
    """Killed after training, before "finished": the run says "running" and has no reported.csv;
    the resume trains nothing and chooses the same checkpoints."""
    root = tmp_path / "run"
    shutil.copytree(run, root)
    directory = RunDirectory(root)
    manifest = directory.read_manifest()
    expected = {seed: read_csv(directory.reported_csv(TASK, seed)) for seed in SEEDS}
    for seed in SEEDS:
        directory.reported_csv(TASK, seed).unlink()
    directory.write_manifest({**manifest, "status": "running", "reported_checkpoints": None})
    with contextlib.redirect_stderr(io.StringIO()) as err:
        train_all_seeds(root, resume=True, progress=False)
    assert "nothing to compile or train" in err.getvalue()
    assert {seed: read_csv(directory.reported_csv(TASK, seed)) for seed in SEEDS} == expected
    assert json.loads(directory.manifest_path.read_text())["status"] == "finished"


def test_validation_starts_are_not_heldout_starts():
    validation = np.stack(heldout_starts(100, reported.VALIDATION_SEED), axis=1)
    for count in (100, 20):
        heldout = np.stack(heldout_starts(count, HELDOUT_SEED), axis=1)
        assert np.abs(validation[:, None, :] - heldout[None, :, :]).max(axis=2).min() > 1e-5


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"report_candidates": 0}, "report_candidates=0: expected a positive integer"),
        ({"validation_episodes": 10**6}, "validation_episodes=1000000: expected at most 100,000"),
    ],
)
def test_bad_report_settings_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        ProtocolSettings(**changes)
