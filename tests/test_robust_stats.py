"""Interval estimates (issue 67): the IQM and bootstrap intervals against hand-computed cases
and SciPy's independent computations on the same arrays, the two-level bootstrap's spread
against its closed form, the cost of a run's statistics at 20 seeds x 100 episodes, and
``purehr compare``: a run against itself shows no difference, runs with other held-out episodes
are refused by name. (rliable 1.2.0 does not import beside our pins: its arch<8 breaks on
pandas 3, so SciPy is the reference.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from purehr.cli.compare import main as compare_main
from purehr.reports import bootstrap
from purehr.reports.comparison import NO_DIFFERENCE, ComparisonRefused, compare_runs, comparison_text
from purehr.reports.scores import read_scores

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = REPO / "results" / "protocol"
PQN_HRV = REPO / "results" / "algorithms" / "raw" / "pqn_hrv_600k_defaults_dense.json"


def test_the_iqm_is_the_mean_of_the_middle_half():
    assert bootstrap.iqm(np.array([7.0, 1, 100, 3, 4, 2, 5, 6])) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    assert bootstrap.iqm(np.array([1.0, 2, 3, 4, 50])) == pytest.approx(3.0)  # 5 seeds: the middle 3
    assert bootstrap.point_estimate(np.array([1.0, 2, 3, 4, np.nan, 50])).value == pytest.approx(3.0)  # NaN seed out


def test_two_seeds_give_the_hand_computed_interval():
    """Resamples of [1, 3]: mean 1, 2, 3 with chances 1/4, 1/2, 1/4; the 2.5% and 97.5% points
    are 1 and 3, whichever resampler draws them (SciPy's one level, ours with episodes)."""
    one_level = bootstrap.point_estimate(np.array([1.0, 3.0]), "mean")
    two_level = bootstrap.point_estimate(np.array([[1.0, 1.0], [3.0, 3.0]]), "mean")
    for estimate in (one_level, two_level):
        assert (estimate.value, estimate.low, estimate.high) == (2.0, 1.0, 3.0)
    single = bootstrap.point_estimate(np.array([4.0]))
    assert single.value == 4.0 and np.isnan(single.low)


def test_the_numpy_resampler_matches_scipy_bootstrap_on_one_level():
    values = np.random.default_rng(3).normal(10.0, 2.0, 12)
    reference = stats.bootstrap(
        (values,), np.mean, n_resamples=20000, method="percentile", rng=np.random.default_rng(1)
    ).confidence_interval
    ours = bootstrap.point_estimate(values[:, None], "mean", reps=20000)  # [seeds, 1]: our resampler
    through_scipy = bootstrap.point_estimate(values, "mean", reps=20000)
    tolerance = 0.05 * values.std()
    for estimate in (ours, through_scipy):
        assert estimate.low == pytest.approx(reference.low, abs=tolerance)
        assert estimate.high == pytest.approx(reference.high, abs=tolerance)
    iqm_reference = stats.bootstrap(
        (values,),
        lambda x, axis: stats.trim_mean(x, 0.25, axis=axis),
        n_resamples=20000,
        method="percentile",
        rng=np.random.default_rng(2),
    ).confidence_interval
    ours = bootstrap.point_estimate(values[:, None], reps=20000)
    assert ours.value == pytest.approx(stats.trim_mean(values, 0.25))
    assert (ours.low, ours.high) == pytest.approx((iqm_reference.low, iqm_reference.high), abs=tolerance)


def test_the_two_level_spread_has_its_closed_form():
    """Seed then episode resampled: Var(mean) = (var of seed means + mean within-seed var / E) / S."""
    rng = np.random.default_rng(0)
    values = rng.normal(0.0, 1.0, (6, 8)) + rng.normal(0.0, 2.0, (6, 1))
    (replicates,) = bootstrap.resample([values], reps=40000)
    expected = (values.mean(axis=1).var() + values.var(axis=1).mean() / values.shape[1]) / values.shape[0]
    assert replicates.mean(axis=(1, 2)).var() == pytest.approx(expected, rel=0.03)


def test_the_probability_of_improvement_is_mann_whitney_u_over_pairs():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 0.0])
    estimate = bootstrap.improvement_probability(a, b)
    assert estimate.value == pytest.approx(6 / 9)  # 1 + (0.5 + 0.5 + 1) + 3 of 9 pairs
    assert estimate.value == pytest.approx(stats.mannwhitneyu(a, b).statistic / 9)
    assert bootstrap.improvement_probability(a, a).value == pytest.approx(0.5)


def test_the_performance_profile_counts_scores_above_each_threshold():
    profile = bootstrap.performance_profile(np.array([[0.0, 1.0], [2.0, 3.0]]), np.array([-1.0, 0.5, 2.5, 3.0]))
    assert profile["fraction"].tolist() == [1.0, 0.75, 0.25, 0.0]
    assert (profile["low"] <= profile["fraction"]).all() and (profile["fraction"] <= profile["high"]).all()
    assert bootstrap.normalised(np.array([-20.0, 0.5]), -20.0, 0.5).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="floor 1.0 and reference 1.0"):
        bootstrap.normalised(np.array([1.0]), 1.0, 1.0)


def test_a_run_compared_with_itself_shows_no_difference():
    runs = [read_scores(PROTOCOL, "one"), read_scores(PROTOCOL, "two")]
    comparison = compare_runs(runs, reps=500)
    text = comparison_text(comparison)
    verdicts = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(verdicts) == 3 + 3 + 1  # swing and hrv x success, speed, return; the aggregate
    assert all(NO_DIFFERENCE in line for line in verdicts), text
    assert comparison["pairs"][0]["aggregate"]["tasks"] == ["swing", "hrv"]


def test_ppo_against_pqn_on_hrv_is_a_detectable_difference():
    comparison = compare_runs([read_scores(PROTOCOL, "PPO"), read_scores(PQN_HRV, "PQN")], reps=500)
    assert comparison["tasks"] == ["hrv"]
    length = comparison["pairs"][0]["tasks"]["hrv"]["episode_length"]
    assert length["better"] == "a" and length["difference"]["high"] < 0  # PPO's episodes are shorter


def _copy_run(tmp_path: Path) -> Path:
    """results/protocol's logs and manifest, without its checkpoints and figures."""
    copy = tmp_path / "run"
    shutil.copytree(PROTOCOL, copy, ignore=shutil.ignore_patterns("checkpoints", "showcase", "figures"))
    return copy


def test_runs_with_other_held_out_episodes_are_refused_naming_the_difference(tmp_path, capsys):
    copy = _copy_run(tmp_path)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["environments"]["hrv"]["gap_features"] = False
    manifest["baselines"]["swing"]["floors"]["zero action"]["return_mean"] = -2.5
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ComparisonRefused, match="gap_features") as refused:
        compare_runs([read_scores(PROTOCOL), read_scores(copy)], reps=500)
    assert "zero action held-out return -1.661 on protocol's episodes, -2.5 on run's" in str(refused.value)
    study = json.loads(PQN_HRV.read_text())
    study["heldout_episodes"] = 50
    (tmp_path / "pqn.json").write_text(json.dumps(study))
    assert compare_main([str(PROTOCOL), str(tmp_path / "pqn.json")]) == 2
    assert "held-out episodes: protocol 100, pqn 50" in capsys.readouterr().err


def test_unrecorded_episodes_are_refused_unless_vouched_for(tmp_path, capsys):
    study = json.loads(PQN_HRV.read_text())
    del study["env_kwargs"]
    (tmp_path / "old.json").write_text(json.dumps(study))
    assert compare_main([str(PQN_HRV), str(tmp_path / "old.json")]) == 2
    assert "cannot check" in capsys.readouterr().err
    assert compare_main([str(PQN_HRV), str(tmp_path / "old.json"), "--unchecked-episodes", "--reps", "200"]) == 0
    assert "not checked (--unchecked-episodes): hrv: task arguments" in capsys.readouterr().out


def test_a_run_s_robust_statistics_are_those_of_its_per_seed_values():
    from purehr.reports.run_statistics import robust_table, run_statistics

    statistics = run_statistics(PROTOCOL, reps=500)
    lengths = [3.84, 3.90, 3.92, 3.90, 3.86]  # results/protocol/final_metrics.csv, hrv eval_episode_length (rounded)
    hrv = statistics["tasks"]["hrv"]
    assert hrv["metrics"]["episode_length"]["iqm"]["value"] == pytest.approx((3.86 + 3.90 + 3.90) / 3, abs=0.006)
    assert hrv["metrics"]["episode_length"]["mean"]["value"] == pytest.approx(np.mean(lengths), abs=0.006)
    curve = hrv["curves"]["eval_return_mean"]
    last = [float(line.split(",")[9]) for line in _last_lines("hrv")]
    assert curve["steps"][-1] == 300000 and curve["value"][-1] == pytest.approx(stats.trim_mean(last, 0.25))
    assert curve["low"][-1] <= curve["value"][-1] <= curve["high"][-1]
    assert statistics["aggregate"]["tasks"] == ["swing", "hrv"]
    assert "| hrv | episode_length | 3.89 [" in robust_table(PROTOCOL, statistics)


def _last_lines(task: str) -> list[str]:
    return [(PROTOCOL / task / f"seed_{seed}" / "checkpoints.csv").read_text().splitlines()[-1] for seed in range(5)]


def test_a_curve_s_iqm_leaves_out_the_seeds_without_a_value():
    values = np.random.default_rng(0).normal(size=(9, 40))
    values[values > 1.0] = np.nan  # a seed without a success has no speed at that checkpoint
    curve = bootstrap.curve(values, reps=300)
    reference = [stats.trim_mean(column[np.isfinite(column)], 0.25) for column in values.T]
    assert np.allclose(curve["value"], reference)
    assert (curve["low"] <= curve["value"]).all() and (curve["value"] <= curve["high"]).all()


def test_the_statistics_figure_and_the_comparison_figure_are_drawn(tmp_path):
    from purehr.reports.run_statistics import draw_statistics
    from purehr.viz.statistics_figures import comparison_figure

    copy = _copy_run(tmp_path)
    written = draw_statistics(copy)
    assert [path.name for path in written] == ["statistics.pdf", "statistics.png"]
    assert (copy / "figures" / "statistics.png").stat().st_size > 20_000  # drawn panels, not an empty canvas
    comparison = compare_runs([read_scores(PROTOCOL, "a"), read_scores(copy, "b")], reps=200)
    assert len(comparison_figure(comparison).axes) == 1


def test_the_seeds_a_t_test_needs_match_the_textbook_tables():
    from purehr.reports.stats import seeds_needed, t_test_power

    assert seeds_needed(1.0, 1.0) == 17 and seeds_needed(0.5, 1.0) == 64  # Cohen's d 1 and 0.5 at 80% power
    assert t_test_power(17, 1.0, 1.0) >= 0.8 > t_test_power(16, 1.0, 1.0)
    assert seeds_needed(0.0, 1.0) is None


def test_a_sweep_s_sensitivity_is_computed_by_hand(tmp_path):
    from purehr.experiments.sensitivity import sensitivity_report, write_sensitivity

    returns = {(1.0, 0.1): [1, 2, 3, 4], (1.0, 0.2): [5, 5, 5, 5], (2.0, 0.1): [0, 0, 0, 10], (2.0, 0.2): [3, 3, 3, 3]}
    lines = ["group,learning_rate,ent_coef,seed,eval_return_mean"]
    lines += [f"default,{lr},{ent},{seed},{value}" for (lr, ent), v in returns.items() for seed, value in enumerate(v)]
    (tmp_path / "runs.csv").write_text("\n".join(lines) + "\n")
    config = {"learning_rate": 1.0, "ent_coef": 0.1}
    (tmp_path / "sweep.json").write_text(json.dumps({"groups": [{"name": "default", "config": config}]}))
    report = sensitivity_report(tmp_path, reps=500)
    ranked = [
        (row["setting"]["learning_rate"], row["setting"]["ent_coef"], row["iqm"]["value"]) for row in report["ranking"]
    ]
    assert ranked == [(1.0, 0.2, 5.0), (2.0, 0.2, 3.0), (1.0, 0.1, 2.5), (2.0, 0.1, 0.0)]  # IQM: the middle two of 4
    assert report["sensitivity"]["learning_rate"]["best_at"] == {"1": 5.0, "2": 3.0}
    assert report["sensitivity"]["learning_rate"]["spread"]["value"] == 2.0
    assert report["sensitivity"]["ent_coef"]["spread"]["value"] == 2.5
    assert report["gap"]["value"] == 2.5 and report["gap"]["low"] <= 2.5 <= report["gap"]["high"]
    assert [path.name for path in write_sensitivity(tmp_path)] == [
        "sensitivity.md",
        "sensitivity.pdf",
        "sensitivity.png",
    ]
