"""The training-performance analysis on synthetic logs whose answers are known by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import write_synthetic_run

from purehr.reports import analysis
from purehr.run.store.columns import UPDATE_COLUMNS

RAMP_THEN_PLATEAU = np.concatenate([np.linspace(0.0, 1.0, 40), np.ones(60)])


def test_final_and_initial_reward_are_tail_and_head_means():
    returns = np.arange(100.0)
    assert analysis.final_reward(returns) == pytest.approx(94.5)  # mean of 90..99
    assert analysis.initial_reward(returns) == pytest.approx(4.5)  # mean of 0..9
    # the NaN (an update that completed no episode) is skipped: tail of (2, 4) is (4,)
    assert analysis.final_reward(np.array([np.nan, 2.0, 4.0]), fraction=0.5) == 4.0


def test_convergence_rate_of_ramp_then_plateau():
    # window 10; the first window with zero spread starts at index 39, where the ramp ends
    assert analysis.convergence_rate(RAMP_THEN_PLATEAU, threshold=1e-6) == pytest.approx(0.39)
    # a looser threshold accepts windows that still hold the ramp's last steps: earlier
    assert analysis.convergence_rate(RAMP_THEN_PLATEAU, threshold=0.05) < 0.39


def test_convergence_rate_never_and_constant():
    alternating = np.tile([0.0, 1.0], 50)
    assert analysis.convergence_rate(alternating) == 1.0
    assert analysis.convergence_rate(np.full(50, 3.0)) == 0.0


def test_stability_score():
    assert analysis.stability_score(np.full(100, -4.0)) == 1.0
    tail = np.tile([9.0, 11.0], 5)  # mean 10, std 1
    assert analysis.stability_score(np.concatenate([np.zeros(90), tail])) == pytest.approx(0.9)
    assert analysis.stability_score(np.tile([-1.0, 1.0], 50)) == 0.0  # mean 0, spread
    assert analysis.stability_score(np.tile([-1.0, 3.0], 50)) == 0.0  # 1 - 2/1 clipped


def test_improvement_ratio():
    assert analysis.improvement_ratio(np.arange(100.0)) == pytest.approx((94.5 - 4.5) / 4.5)
    assert analysis.improvement_ratio(np.linspace(-2.0, -1.0, 10), fraction=0.1) == pytest.approx((-1.0 + 2.0) / 2.0)
    assert math.isfinite(analysis.improvement_ratio(np.concatenate([np.zeros(10), np.ones(90)])))


def test_ratios_generalisation_robustness_consistency():
    assert analysis.generalisation(0.8, 1.0) == pytest.approx(0.8)
    assert math.isnan(analysis.generalisation(0.5, 0.0))
    assert analysis.robustness(0.45, 0.9) == pytest.approx(0.5)
    assert analysis.consistency(np.array([1.0, 2.0, 3.0])) == pytest.approx(1.0)
    assert math.isnan(analysis.consistency(np.array([1.0])))
    assert analysis.samples_per_second(np.array([0, 500, 1000]), np.array([0, 1, 4])) == 250


def test_mean_confidence_interval_uses_student_t():
    summary = analysis.mean_confidence_interval(np.array([1.0, 2.0, 3.0]))
    half_width = 4.302652729911275 * 1.0 / math.sqrt(3)  # t(0.975, 2) * s / sqrt(n)
    assert summary["mean"] == 2.0 and summary["n"] == 3
    assert summary["ci_low"] == pytest.approx(2.0 - half_width)
    assert summary["ci_high"] == pytest.approx(2.0 + half_width)
    assert math.isnan(analysis.mean_confidence_interval(np.array([5.0]))["ci_low"])


UPDATE_HEADER = [*UPDATE_COLUMNS, "mean_distance"]
CHECKPOINT_HEADER = [
    "target_steps",
    "actual_steps",
    "update",
    "elapsed_s",
    "eval_success_rate",
    "eval_return_mean",
    "eval_return_std",
    "eval_final_distance",
    "eval_alignment",
    "eval_episode_length",
    "eval_noisy_success_rate",
    "checkpoint_path",
    "showcase_path",
]


def seed_logs(seed, returns, final_heldout_success) -> tuple[list[dict], list[dict]]:
    """One hrv seed's updates.csv and checkpoints.csv rows."""
    updates = [
        dict(
            zip(
                UPDATE_HEADER,
                [
                    update,
                    (update + 1) * 2048,
                    (update + 1) * 0.5,
                    0.0,
                    float(episode_return),
                    8,
                    0.8,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0.1,
                ],
            )
        )
        for update, episode_return in enumerate(returns)
    ]
    checkpoints = [
        dict(zip(CHECKPOINT_HEADER, row))
        for row in (
            [
                0,
                0,
                0,
                0.0,
                0.0,
                -1.0,
                0.1,
                1.0,
                0.0,
                100,
                0.0,
                f"hrv/seed_{seed}/checkpoints/0",
                f"hrv/seed_{seed}/showcase/0.npz",
            ],
            [
                100_000,
                204_800,
                99,
                50.0,
                final_heldout_success,
                1.1,
                0.1,
                0.05,
                0.99,
                6.5,
                final_heldout_success / 2,
                f"hrv/seed_{seed}/checkpoints/1",
                f"hrv/seed_{seed}/showcase/1.npz",
            ],
        )
    ]
    return updates, checkpoints


@pytest.fixture
def run_dir(tmp_path):
    logs = {0: seed_logs(0, RAMP_THEN_PLATEAU, 0.8), 1: seed_logs(1, RAMP_THEN_PLATEAU + 2.0, 0.6)}
    return write_synthetic_run(
        tmp_path,
        {"tasks": ["hrv"], "seeds": [0, 1], "wall_time_s": 60.0, "peak_memory_bytes": 2**30},
        {("hrv", seed): updates for seed, (updates, _) in logs.items()},
        {("hrv", seed): checkpoints for seed, (_, checkpoints) in logs.items()},
    )


def test_analyze_run_on_a_synthetic_run_directory(run_dir):
    result = analysis.analyze_run(run_dir)
    assert result["wall_time_s"] == 60.0 and result["peak_memory_bytes"] == 2**30
    report = result["tasks"]["hrv"]
    seed0, seed1 = report["seeds"][0], report["seeds"][1]
    assert seed0["final_reward"] == pytest.approx(1.0)
    assert seed1["final_reward"] == pytest.approx(3.0)
    assert seed0["stability_score"] == 1.0
    assert seed1["improvement_ratio"] == pytest.approx((3.0 - initial(2.0)) / initial(2.0))
    assert seed0["generalisation"] == pytest.approx(0.8 / 0.8)
    assert seed1["generalisation"] == pytest.approx(0.6 / 0.8)
    assert seed0["robustness"] == pytest.approx(0.5)
    assert seed0["hrv_alignment"] == pytest.approx(0.99)
    assert seed0["samples_per_second"] == pytest.approx(100 * 2048 / 50.0)
    assert seed0["training_time_s"] == 50.0
    assert report["consistency"] == pytest.approx(math.sqrt(2.0))  # std(1, 3), ddof=1
    aggregate = report["aggregate"]["generalisation"]
    assert aggregate["mean"] == pytest.approx(0.875) and aggregate["n"] == 2
    assert report["samples_per_second_all_seeds"] == pytest.approx(2 * 100 * 2048 / 50.0)
    json.dumps(analysis.to_json_safe(result), allow_nan=False)  # strict JSON


def initial(offset):
    """Mean of the first 10 returns of the ramp (0, 1/39, ..., 9/39) plus an offset."""
    return offset + sum(range(10)) / 39 / 10


def test_analyze_run_reports_missing_pieces(tmp_path, run_dir):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        analysis.analyze_run(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        analysis.analyze_run(empty)
    (run_dir / "hrv" / "seed_1" / "updates.csv").write_text("update,env_steps\n0,1\n")
    with pytest.raises(ValueError, match=r"seed_1.*updates\.csv.*elapsed_s"):
        analysis.analyze_run(run_dir)


def test_cli_prints_json(run_dir, capsys):
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "analyze_run.py"
    spec = importlib.util.spec_from_file_location("analyze_run_cli", script)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    assert cli.main(["--run-dir", str(run_dir), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["tasks"]["hrv"]["seeds"]["0"]["final_reward"] == pytest.approx(1.0)
    assert cli.main(["--run-dir", str(run_dir)]) == 0
    assert "convergence_rate" in capsys.readouterr().out
    assert cli.main(["--run-dir", str(run_dir / "missing")]) == 2


def test_a_return_that_halves_is_stable_but_declines():
    """stability_score is 1 for a return that halves and stays flat (correct by its
    definition, misleading alone); decline_from_best says how far it fell."""
    halves = np.concatenate([np.full(50, 8.0), np.full(50, 4.0)])
    assert analysis.stability_score(halves) == 1.0
    assert analysis.decline_from_best(halves) == pytest.approx(4.0)  # best window 8, final 4
    assert analysis.decline_from_best(np.arange(100.0)) == 0.0  # ends at its best
    assert analysis.decline_from_best(RAMP_THEN_PLATEAU) == 0.0
    assert math.isnan(analysis.decline_from_best(np.array([np.nan])))


def test_every_metric_has_a_direction_and_a_meaning(run_dir, capsys):
    import importlib.util
    from pathlib import Path

    names = analysis.analyze_run(run_dir)["tasks"]["hrv"]["seeds"][0].keys()
    assert set(names) == set(analysis.METRIC_GUIDE)
    assert all(direction and meaning for direction, meaning in analysis.METRIC_GUIDE.values())
    script = Path(__file__).resolve().parents[1] / "scripts" / "analyze_run.py"
    spec = importlib.util.spec_from_file_location("analyze_run_cli", script)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    assert cli.main(["--run-dir", str(run_dir)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert rows["stability_score"].startswith("stability_score         1 = flat end")
    assert "a return that halves and stays flat scores 1" in rows["stability_score"]
    assert rows["decline_from_best"].split()[1:4] == ["lower", "is", "better"]


@pytest.mark.parametrize(
    "damage, message",
    [
        # cut mid-row: the last row has fewer fields
        (
            lambda text: text[: text.rindex("\n", 0, len(text) - 1) + 20],
            r"updates\.csv: line\(s\) \[101\] do not have 15 fields",
        ),
        # cut at a row boundary: only the checkpoint shows that rows were lost
        (
            lambda text: "\n".join(text.splitlines()[:51]) + "\n",
            r"updates\.csv: ends at 102,400 env steps, before the checkpoint at 204,800",
        ),
    ],
)
def test_a_truncated_log_gets_the_renderers_verdict(run_dir, damage, message):
    """analyze_run and the renderer read logs with one reader and refuse the same file with
    the same message."""
    from purehr.run.store.files import RunDirectoryError
    from purehr.viz.run_data import load_run

    updates = run_dir / "hrv" / "seed_0" / "updates.csv"
    updates.write_text(damage(updates.read_text()))
    with pytest.raises(RunDirectoryError, match=message) as analysed:
        analysis.analyze_run(run_dir)
    with pytest.raises(RunDirectoryError, match=message) as rendered:
        load_run(run_dir)
    assert str(analysed.value) == str(rendered.value)
