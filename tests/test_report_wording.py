"""How reports read (issue 27, user paths 6-8): intervals clipped to the metric's range and marked
when few seeds make them uninformative, in the tables and the figures' bands; the next commands
name the interpreter that ran; analyze_run prints sizes in GB/MB and leaves out what a task does
not measure; the replay names its tension and lists each reference once; the player fits a
laptop screen with nothing over the video's legend. All from hand-written run directories."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from test_results_table import _write_run
from test_viz import build_run_directory, stick_pendulum

from purehr.experiments.group_result import GroupResult
from purehr.experiments.ranking import format_table, rank_settings
from purehr.reports import analysis
from purehr.reports.results_table import results_table
from purehr.reports.stats import mean_confidence_interval, metric_range
from purehr.tasks import HRV_DEFAULTS
from purehr.viz.learning_curves import learning_figure
from purehr.viz.replay import _ReplayCanvas
from purehr.viz.run_data import load_run

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"wording_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- intervals ---------------------------------------------------------------------------------


def test_an_interval_is_clipped_to_the_range_and_marked_below_three_seeds():
    two = mean_confidence_interval(np.array([0.98, 1.0]), bounds=metric_range("eval_success_rate"))
    assert two["mean"] == pytest.approx(0.99) and two["ci_low"] == pytest.approx(0.99 - 12.7062047 * 0.01)
    assert two["ci_high"] == 1.0 and two["uninformative"]  # unclipped: 1.117
    wide = mean_confidence_interval(np.array([0.0, 1.0, 0.0]), bounds=(0.0, 1.0))  # 3 seeds, wider than [0, 1]
    assert (wide["ci_low"], wide["ci_high"]) == (0.0, 1.0) and wide["uninformative"]
    narrow = mean_confidence_interval(np.array([0.5, 0.6, 0.7]), bounds=(0.0, 1.0))
    assert not narrow["uninformative"] and narrow["ci_high"] < 1.0
    returns = mean_confidence_interval(np.array([-5.0, 5.0, 0.0]), bounds=metric_range("return_mean"))
    assert returns["ci_low"] < -5.0  # a return has no range: nothing clipped


def test_the_results_table_clips_two_seeds_intervals_and_marks_them(tmp_path):
    """Two seeds: success 0.99 [0.86, 1.12] and episode length [-148.2, 182.2] unclipped."""
    run = _write_run(tmp_path, swing_success=[0.98, 1.0], swing_times=[15.2, 16.0], hrv_lengths=[4.0, 30.0])
    table = results_table(run)
    assert "| swing | PPO, 2 seeds, 4,096 steps | 0.99 [0.86, 1.00]* |" in table
    assert "episode length (steps): 17.0 [0.0, 182.2]*" in table
    assert "fewer than 3 seeds" in table.splitlines()[-1]
    assert "1.12" not in table and "-148" not in table
    five = results_table(_write_run(tmp_path / "five"))
    assert "*" not in five and "fewer than 3 seeds" not in five


def test_the_sweep_ranking_clips_and_marks_two_seeds():
    axes = {"learning_rate": (1e-3,)}
    group = GroupResult(
        "g",
        HRV_DEFAULTS,
        [{"learning_rate": 1e-3}],
        [0, 1],
        runner=None,
        training_metrics={"mean_episode_return": np.zeros((2, 3))},
        evaluation={"success_rate": np.array([0.98, 1.0]), "return_mean": np.array([1.0, 2.0])},
    )
    (row,) = rank_settings([group], list(axes))
    assert row["success_rate_ci_high"] == 1.0 and row["success_rate_ci_uninformative"]
    text = format_table([row], list(axes))
    assert "99.0% [86.3%, 100.0%]*" in text and "fewer than 3 seeds" in text.splitlines()[-1]


def test_the_learning_figure_band_stays_in_the_range_and_says_two_seeds_are_few(tmp_path):
    figure = learning_figure(load_run(build_run_directory(tmp_path)), "swing")
    success = figure.axes[0]
    (band,) = success.collections
    heights = np.concatenate([path.vertices[:, 1] for path in band.get_paths()])
    assert heights.min() >= 0.0 and heights.max() <= 1.0  # unclipped: 0.75 + 12.7 * 0.15 / ... > 1
    assert band.get_label() == "95% t interval of 2 seeds\n(too few: it says little)"


# --- the next commands and analyze_run ---------------------------------------------------------


def test_the_interpreter_shown_is_the_one_that_ran(tmp_path):
    from purehr.reports.summary import interpreter

    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    assert interpreter(tmp_path, str(venv / "python")) == ".venv/bin/python"  # the link, not its target
    assert interpreter(tmp_path / "elsewhere", "/usr/bin/python3") == "/usr/bin/python3"
    assert interpreter(tmp_path, str(tmp_path / "my python")) == "'./my python'"


def test_analyze_run_prints_sizes_and_leaves_out_what_the_task_does_not_measure(tmp_path, capsys):
    run = build_run_directory(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(dict(manifest, peak_memory_bytes=1.818e9)))
    result = analysis.analyze_run(run)
    assert result["tasks"]["swing"]["not_measured"] == ["heldout_final_distance", "hrv_alignment", "robustness"]
    assert result["tasks"]["hrv"]["not_measured"] == ["robustness"]  # no noisy success logged
    assert load_script("analyze_run").main(["--run-dir", str(run)]) == 0
    printed = capsys.readouterr().out
    assert "peak memory 1.82 GB" in printed and "bytes" not in printed.splitlines()[0]
    swing = printed[printed.index("[swing]") : printed.index("[hrv]")].splitlines()
    rows = {line.split()[0] for line in swing[1:] if line.strip()}
    assert "heldout_success_rate" in rows and not {"hrv_alignment", "heldout_final_distance", "robustness"} & rows
    assert "not measured for swing: heldout_final_distance, hrv_alignment, robustness" in swing
    assert "\nhrv_alignment " in printed[printed.index("[hrv]") :]
    assert not re.search(r"\bnan\b", printed)
    script = load_script("analyze_run")
    assert [script.format_bytes(n) for n in (1.818e9, 2.5e6, 512, math.nan)] == [
        "1.82 GB",
        "2.5 MB",
        "512 bytes",
        "not recorded",
    ]


# --- the replay and its player -----------------------------------------------------------------


def test_the_replay_names_the_minimum_tension_and_lists_the_baseline_once(tmp_path):
    run = load_run(build_run_directory(tmp_path))
    canvas = _ReplayCanvas((1280, 720), stick_pendulum, None)
    canvas.start_checkpoint(run, "swing", run.logs["swing"][0], 2, 100_352.0)
    assert "minimum chain tension" in canvas.summary.get_text() and "worst tension" not in canvas.summary.get_text()
    texts = [text.get_text() for text in canvas.legend.get_texts()]
    baseline = [text for text in texts if "structured pumping controller" in text]
    assert baseline == ["baseline: structured pumping controller\n= 500 in held-out mean return: off scale (above)"]


def test_the_player_has_no_native_controls_over_the_legend_and_fits_the_window(tmp_path):
    from purehr.viz.html_player import write_html_player

    (tmp_path / "v.mp4").write_bytes(b"video")
    (tmp_path / "p.png").write_bytes(b"poster")
    entry = {"index": 0, "start_s": 0.0, "end_s": 1.0, "actual_steps": 10, "target_steps": 10}
    page = write_html_player(
        tmp_path / "replay.html", tmp_path / "v.mp4", tmp_path / "p.png", {"checkpoints": [entry]}, title="t"
    ).read_text()
    video = re.search(r"<video[^>]*>", page).group(0)
    assert " controls" not in video  # their bar would lie over the frame's legend
    assert '<button type="button" id="play">' in page and 'video.addEventListener("click", togglePlay)' in page
    assert re.search(r"video \{[^}]*max-height: calc\(100vh - [\d.]+rem\)", page)  # the slider stays in view
    assert page.index("<video") < page.index('id="checkpoint"') < page.index('class="description"')
