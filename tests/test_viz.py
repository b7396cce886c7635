"""Rendering of a run directory: learning figures, final metrics, replay video, HTML player.

A tiny synthetic run directory (2 tasks x 2 seeds x 3 checkpoints, short showcase traces,
the exact column names of docs/interfaces.md) stands in for a training run, so these tests
need neither training nor the swing drawing (a stick pendulum is passed as draw_frame).
"""

from __future__ import annotations

import base64
import csv
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import imageio_ffmpeg
import numpy as np
import pytest
from conftest import write_synthetic_run
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from purehr.reports.stats import t_interval, t_quantile
from purehr.run.store.columns import UPDATE_COLUMNS
from purehr.run.store.files import RunDirectoryError
from purehr.viz.learning_curves import (
    aggregate_over_seeds,
    draw_baseline,
    learning_figure,
    training_log_figure,
    write_final_metrics,
)
from purehr.viz.render import render_run
from purehr.viz.replay import _ReplayCanvas, checkpoint_label, frame_indices, render_replay
from purehr.viz.run_data import load_run
from purehr.viz.video import first_frame, video_stream

REPO = Path(__file__).resolve().parents[1]
TASK_DIAGNOSTICS = {"swing": ["min_tension", "mean_command_speed"], "hrv": ["mean_distance"]}
EVAL_KEYS = {
    "swing": [
        "success_rate",
        "return_mean",
        "return_std",
        "time_to_rotation",
        "effort",
        "min_tension_mean",
        "min_tension_worst",
        "negative_tension_rate",
    ],
    "hrv": ["success_rate", "return_mean", "return_std", "final_distance", "alignment", "episode_length"],
}
TARGETS = [0, 50_000, 100_000]
BATCH = 2_048
# held-out success per task and seed at the three checkpoints
SUCCESS = {"swing": {0: [0.0, 0.3, 0.6], 1: [0.1, 0.5, 0.9]}, "hrv": {0: [0.2, 0.4, 0.7], 1: [0.2, 0.6, 0.8]}}
TRACE_ROWS = 20  # the horizon: every trace has this many rows
SWING_EPISODE_LENGTHS = [20, 20, 12]  # the last episode succeeds at row 11; later rows repeat it
FPS, SECONDS_PER_CHECKPOINT = 10, 1.5  # 15 frames per checkpoint at most
# the manifest's baselines[task]["floors"]: doing nothing useful
FLOORS = {
    "swing": {
        "zero action": {"success_rate": 0.0, "return_mean": -1.0},
        "random": {"success_rate": 0.0, "return_mean": -3.0},
    },
    "hrv": {
        "no-op": {"success_rate": 0.0, "return_mean": -2.0, "alignment": -0.05},
        "random": {"success_rate": 0.0, "return_mean": -4.0, "alignment": -0.06},
    },
}


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _swing_trace(episode_length: int, amplitude: float) -> dict[str, np.ndarray]:
    """The recording format: TRACE_ROWS rows, rows after the first success repeat it."""
    rows = np.minimum(np.arange(TRACE_ROWS), episode_length - 1)
    time = rows * 0.02
    theta = amplitude * np.sin(2 * np.pi * time) * (0.3 + 0.7 * rows / TRACE_ROWS)
    zeros = np.zeros(TRACE_ROWS)
    return {
        "time": time,
        "theta": theta,
        "theta_dot": np.gradient(theta, 0.02),
        "squat": zeros,
        "lean": zeros,
        "energy_norm": np.abs(theta) / np.pi,
        "tension": 600.0 + 50.0 * np.cos(theta),
        "command_speed": zeros + 0.1,
        "reward": zeros - 0.01,
        "success": (rows == episode_length - 1) & (episode_length < TRACE_ROWS),
    }


def _hrv_trace(length: int = 10) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "current_hrv": rng.normal(size=(length, 4)),
        "target_hrv": np.ones((length, 4)),
        "distance": np.linspace(2.0, 0.5, length),
        "reward": np.zeros(length),
        "success": np.zeros(length, dtype=bool),
    }


def _checkpoint_row(task: str, seed: int, index: int, showcase: str) -> dict[str, object]:
    success = SUCCESS[task][seed][index]
    metrics = {
        "success_rate": success,
        "return_mean": 10.0 * success - seed,
        "return_std": 1.5,
        "time_to_rotation": 20.0 - index,
        "effort": 3.0,
        "min_tension_mean": 300.0,
        "min_tension_worst": -5.0 * index - seed,
        "negative_tension_rate": 0.01,
        "final_distance": 1.0 - success,
        "alignment": success - 0.1,
        "episode_length": 100.0,
    }
    actual = -(-TARGETS[index] // BATCH) * BATCH  # first update at or beyond the target
    return {
        "target_steps": TARGETS[index],
        "actual_steps": actual,
        "update": index * 25,
        "elapsed_s": 12.5 * index + 3.0,
        **{f"eval_{key}": metrics[key] for key in EVAL_KEYS[task]},
        "checkpoint_path": f"{task}/seed_{seed}/checkpoints/{actual}",
        "showcase_path": showcase,
    }


def build_run_directory(root: Path) -> Path:
    """Two tasks, two seeds, three checkpoints each, with showcase traces."""
    run_dir = root / "run"
    baselines = {
        "swing": {
            "definition": "structured pumping controller",
            "metrics": {"success_rate": 0.8, "return_mean": 500.0},
            "floors": FLOORS["swing"],
        },
        "hrv": {"definition": "oracle", "metrics": {"success_rate": 1.0, "return_mean": 7.0}, "floors": FLOORS["hrv"]},
    }
    manifest = {"tasks": ["swing", "hrv"], "seeds": [0, 1], "baselines": baselines, "configs": {}, "status": "complete"}
    updates, checkpoints = {}, {}
    for task in ("swing", "hrv"):
        for seed in (0, 1):
            updates[task, seed] = [
                dict(
                    zip(
                        UPDATE_COLUMNS + TASK_DIAGNOSTICS[task],
                        [
                            u,
                            (u + 1) * BATCH,
                            0.5 * u,
                            0.01 * u,
                            float(5.0 * np.log1p(u) + seed),
                            3,
                            0.1,
                            1.0,
                            0.5,
                            0.4,
                            1.2,
                            0.01,
                            0.1,
                            0.7,
                        ]
                        + [1.0] * len(TASK_DIAGNOSTICS[task]),
                    )
                )
                for u in range(60)
            ]
            checkpoints[task, seed] = []
            for index in range(len(TARGETS)):
                showcase = f"{task}/seed_{seed}/showcase/steps_{index}.npz"
                trace = _swing_trace(SWING_EPISODE_LENGTHS[index], 0.5 + index) if task == "swing" else _hrv_trace()
                (run_dir / showcase).parent.mkdir(parents=True, exist_ok=True)
                np.savez(run_dir / showcase, **trace)
                checkpoints[task, seed].append(_checkpoint_row(task, seed, index, showcase))
    return write_synthetic_run(run_dir, manifest, updates, checkpoints)


def stick_pendulum(ax, trace, index, params) -> None:
    """Stand-in for purehr.viz.swing_drawing.draw_frame."""
    theta = float(trace["theta"][index])
    ax.plot([0.0, math.sin(theta)], [0.0, -math.cos(theta)], color="black", linewidth=3)
    ax.plot([math.sin(theta)], [-math.cos(theta)], "o", color="#E69F00", markersize=14)
    ax.set_xlim(-1.2, 1.2)
    ax.set_ylim(-1.2, 1.2)
    ax.set_aspect("equal")
    ax.set_axis_off()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """One synthetic run, rendered once: figures, final metrics and (small) replay."""
    run_dir = build_run_directory(tmp_path_factory.mktemp("viz"))
    render_run(run_dir, replay=False)
    render_replay(
        load_run(run_dir),
        run_dir / "figures",
        seconds_per_checkpoint=SECONDS_PER_CHECKPOINT,
        fps=FPS,
        size_px=(512, 288),
        draw_frame=stick_pendulum,
    )
    return run_dir


# ---------------------------------------------------------------- statistics


@pytest.mark.parametrize(
    "probability, df, expected",
    [
        (0.975, 1, 12.706204736),
        (0.975, 2, 4.302652730),
        (0.975, 4, 2.776445105),
        (0.975, 10, 2.228138852),
        (0.975, 30, 2.042272456),
        (0.995, 3, 5.840909309),
        (0.95, 5, 2.015048373),
        (0.025, 4, -2.776445105),
        (0.975, 1e6, 1.959966),
    ],
)
def test_t_quantile_matches_tables(probability, df, expected):
    assert t_quantile(probability, df) == pytest.approx(expected, abs=2e-6)


def test_mean_and_interval_match_hand_computation(tmp_path):
    run = load_run(build_run_directory(tmp_path))
    aggregate = aggregate_over_seeds(list(run.logs["swing"].values()), "eval_success_rate")
    seed0, seed1 = np.array(SUCCESS["swing"][0]), np.array(SUCCESS["swing"][1])
    # two seeds: sd = |a - b| / sqrt(2), half width = t(0.975, 1) * sd / sqrt(2)
    half_width = 12.706204736174707 * np.abs(seed0 - seed1) / 2.0
    np.testing.assert_allclose(aggregate.mean, (seed0 + seed1) / 2)
    np.testing.assert_allclose(aggregate.lower, (seed0 + seed1) / 2 - half_width)
    np.testing.assert_allclose(aggregate.upper, (seed0 + seed1) / 2 + half_width)
    np.testing.assert_array_equal(aggregate.target_steps, TARGETS)

    values = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 9.0]])  # three seeds
    mean, lower, upper = t_interval(values)
    np.testing.assert_allclose(mean, [2.0, 5.0])
    np.testing.assert_allclose(
        upper - mean, [4.302652729749464 * 1.0 / math.sqrt(3), 4.302652729749464 * math.sqrt(13) / math.sqrt(3)]
    )


def test_seeds_are_aligned_on_shared_targets(tmp_path):
    """A seed that is one checkpoint ahead does not shift the mean curve."""
    run_dir = build_run_directory(tmp_path)
    path = run_dir / "swing" / "seed_1" / "checkpoints.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")  # seed 1 has only two checkpoints
    aggregate = aggregate_over_seeds(list(load_run(run_dir).logs["swing"].values()), "eval_success_rate")
    np.testing.assert_array_equal(aggregate.target_steps, TARGETS[:2])
    np.testing.assert_allclose(aggregate.mean, [0.05, 0.4])


def test_baseline_is_a_line_in_range_and_a_note_off_scale():
    fig = Figure()
    near, far = fig.subplots(1, 2)
    for ax in (near, far):
        ax.plot([0, 1], [0.0, 10.0])
    draw_baseline(near, 12.0, "controller")
    draw_baseline(far, 500.0, "controller")
    assert [line.get_label() for line in near.lines][-1] == "baseline: controller = 12"
    note = far.lines[-1]
    assert len(note.get_xdata()) == 0 and "= 500, off scale (above)" in note.get_label()
    assert far.get_ylim()[1] < 100


# ---------------------------------------------------------------- figures and metrics


@pytest.mark.parametrize("stem", ["swing_learning", "hrv_learning", "swing_training_log", "hrv_training_log"])
def test_figures_exist_and_are_not_blank(rendered, stem):
    png, pdf = rendered / "figures" / f"{stem}.png", rendered / "figures" / f"{stem}.pdf"
    assert png.stat().st_size > 20_000 and pdf.stat().st_size > 5_000
    assert pdf.read_bytes().startswith(b"%PDF")
    image = iio.imread(png)
    assert image.shape[0] > 300 and image.shape[1] > 500
    assert image[..., :3].astype(float).std() > 10.0


def test_hrv_learning_figure_has_an_alignment_panel(rendered):
    """Three panels (success, return, alignment) make the hrv figure wider than swing's."""
    hrv = iio.imread(rendered / "figures" / "hrv_learning.png")
    swing = iio.imread(rendered / "figures" / "swing_learning.png")
    assert hrv.shape[1] > 1.3 * swing.shape[1]


def test_final_metrics_has_the_last_checkpoint_of_every_task_and_seed(rendered):
    with (rendered / "final_metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((row["task"], row["seed"]) for row in rows) == [
        ("hrv", "0"),
        ("hrv", "1"),
        ("swing", "0"),
        ("swing", "1"),
    ]
    for row in rows:
        task, seed = row["task"], int(row["seed"])
        expected = _checkpoint_row(task, seed, len(TARGETS) - 1, "")
        for key in EVAL_KEYS[task]:
            assert float(row[f"eval_{key}"]) == pytest.approx(expected[f"eval_{key}"])
        assert int(row["actual_steps"]) == expected["actual_steps"]
    swing_only = [row["eval_min_tension_worst"] for row in rows if row["task"] == "hrv"]
    assert swing_only == ["", ""]


def test_final_metrics_round_trip_is_exact(tmp_path):
    run_dir = build_run_directory(tmp_path)
    run = load_run(run_dir)
    write_final_metrics(run, tmp_path / "final.csv")
    with (tmp_path / "final.csv").open() as handle:
        row = next(csv.DictReader(handle))
    assert float(row["eval_success_rate"]) == run.logs["swing"][0].checkpoints["eval_success_rate"][-1]


# ---------------------------------------------------------------- replay


def expected_frames_per_checkpoint() -> list[int]:
    per_checkpoint = round(SECONDS_PER_CHECKPOINT * FPS)
    return [min(length, per_checkpoint) for length in SWING_EPISODE_LENGTHS]


def test_frame_indices_cover_the_episode_without_repeats():
    indices = frame_indices(1600, 90)
    assert indices[0] == 0 and indices[-1] == 1599 and len(indices) == 90
    assert np.all(np.diff(indices) > 0)
    np.testing.assert_array_equal(frame_indices(5, 90), np.arange(5))


def test_replay_video_is_h264_with_the_expected_frame_count(rendered):
    video = rendered / "figures" / "replay.mp4"
    assert video.stat().st_size > 10_000
    num_frames, _ = imageio_ffmpeg.count_frames_and_secs(str(video))
    assert num_frames == sum(expected_frames_per_checkpoint())
    stream, first = video_stream(video), first_frame(video)
    assert stream["codec"] == "h264" and stream["pix_fmt"] == "yuv420p"
    assert first.shape == (288, 512, 3) and first.astype(float).std() > 10.0


def test_poster_is_a_non_blank_frame(rendered):
    poster = iio.imread(rendered / "figures" / "replay_poster.png")
    assert poster.shape == (288, 512, 3) and poster.astype(float).std() > 10.0


def test_timeline_maps_each_checkpoint_to_consecutive_video_seconds(rendered):
    timeline = json.loads((rendered / "figures" / "replay_timeline.json").read_text())
    entries = timeline["checkpoints"]
    assert [entry["target_steps"] for entry in entries] == TARGETS
    assert [entry["num_frames"] for entry in entries] == expected_frames_per_checkpoint()
    starts = [entry["start_s"] for entry in entries]
    assert starts[0] == 0.0 and all(later > earlier for earlier, later in zip(starts, starts[1:]))
    for entry, following in zip(entries, entries[1:]):
        assert entry["end_s"] == pytest.approx(following["start_s"])
    assert entries[-1]["end_s"] == pytest.approx(timeline["num_frames"] / FPS)
    assert timeline["seed"] == 0  # lowest seed by default


def test_html_player_embeds_video_and_has_one_stop_per_checkpoint(rendered):
    page = (rendered / "figures" / "replay.html").read_text()
    video_b64 = re.search(r'src="data:video/mp4;base64,([A-Za-z0-9+/=]+)"', page).group(1)
    assert base64.b64decode(video_b64) == (rendered / "figures" / "replay.mp4").read_bytes()
    assert 'poster="data:image/png;base64,' in page
    datalist = re.search(r'<datalist id="checkpoint-stops">(.*?)</datalist>', page, re.S).group(1)
    assert datalist.count("<option") == len(TARGETS)
    slider = re.search(r'<input type="range"[^>]*>', page).group(0)
    assert f'max="{len(TARGETS) - 1}"' in slider and 'list="checkpoint-stops"' in slider
    assert "video.currentTime = checkpoints[index].start_s" in page
    assert 'addEventListener("timeupdate"' in page


def test_render_run_with_the_swing_drawing(tmp_path):
    """The full default path (real swing drawing); runs once the swing drawing exists."""
    pytest.importorskip("purehr.viz.swing_drawing")
    run_dir = build_run_directory(tmp_path)
    written = render_run(run_dir, tasks=["swing"])
    assert run_dir / "figures" / "replay.html" in written
    num_frames, _ = imageio_ffmpeg.count_frames_and_secs(str(run_dir / "figures" / "replay.mp4"))
    assert num_frames == sum(min(length, round(3.5 * 25)) for length in SWING_EPISODE_LENGTHS)


# ---------------------------------------------------------------- errors


def test_missing_run_directory_is_named(tmp_path):
    missing = tmp_path / "no_such_run"
    with pytest.raises(RunDirectoryError, match=re.escape(str(missing))):
        load_run(missing)


def test_missing_column_and_truncated_rows_are_named(tmp_path):
    run_dir = build_run_directory(tmp_path)
    checkpoints = run_dir / "hrv" / "seed_0" / "checkpoints.csv"
    original = checkpoints.read_text()
    checkpoints.write_text(original.replace("actual_steps", "steps"))
    with pytest.raises(RunDirectoryError, match=r"checkpoints\.csv.*actual_steps"):
        load_run(run_dir)
    checkpoints.write_text(original)
    updates = run_dir / "hrv" / "seed_0" / "updates.csv"
    updates.write_text(updates.read_text() + "61,2048\n")  # a half-written last row
    with pytest.raises(RunDirectoryError, match=r"updates\.csv: line"):
        load_run(run_dir, tasks=["hrv"])


@pytest.mark.slow
def test_render_script_reports_a_missing_run_directory(tmp_path):
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "render.py"), "--run-dir", str(tmp_path / "absent"), "--no-replay"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "run directory not found" in result.stderr


# ---------------------------------------------------------------- what a reader sees


def _rendered_extents(fig):
    """Draw ``fig`` and return its renderer (window extents are known only after a draw)."""
    canvas = FigureCanvasAgg(fig) if not isinstance(fig.canvas, FigureCanvasAgg) else fig.canvas
    canvas.draw()
    return canvas.get_renderer()


def _data_axes(fig):
    return [ax for ax in fig.axes if ax.axison]


def _assert_legends_clear_of_axes(fig, legends, axes):
    renderer = _rendered_extents(fig)
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in axes:
            # the axes with its tick labels and axis labels
            assert not box.overlaps(ax.get_tightbbox(renderer)), (
                [text.get_text() for text in legend.get_texts()],
                ax.get_ylabel(),
            )


def test_swing_training_log_draws_updates_between_nans(tmp_path):
    """Swing episodes outlast short rollouts: most updates log NaN, and a plain line plot of
    them is blank. Every finite return is drawn, joined, and the skipped updates are counted."""
    run_dir = build_run_directory(tmp_path)
    finite_counts = {}
    for seed in (0, 1):
        path = run_dir / "swing" / f"seed_{seed}" / "updates.csv"
        with path.open() as handle:
            rows = list(csv.reader(handle))
        column = rows[0].index("mean_episode_return")
        for number, row in enumerate(rows[1:]):
            if (number + seed) % 7:  # isolated finite values between NaNs
                row[column] = "nan"
        finite_counts[seed] = sum(1 for row in rows[1:] if row[column] != "nan")
        _write_csv(path, rows[0], rows[1:])
    fig = training_log_figure(load_run(run_dir), "swing")
    ax = _data_axes(fig)[0]
    lines = {line.get_label(): line for line in ax.lines}
    for seed, count in finite_counts.items():
        ydata = np.asarray(lines[f"seed {seed}"].get_ydata(), dtype=float)
        assert len(ydata) == count and count >= 8 and np.all(np.isfinite(ydata))
        assert lines[f"seed {seed}"].get_marker() == "o"  # sparse: every point marked
    low, high = sorted(60 - count for count in finite_counts.values())  # counted per seed, not summed
    assert f"({low} to {high} of 60 updates per seed completed no episode; not drawn)" in ax.get_title()
    _assert_legends_clear_of_axes(fig, [a.get_legend() for a in fig.axes if a.get_legend()], [ax])


def test_learning_figure_draws_baseline_and_floors_with_their_labels(tmp_path):
    fig = learning_figure(load_run(build_run_directory(tmp_path)), "swing")
    success, returns = _data_axes(fig)
    assert [line.get_label() for line in success.lines[-2:]] == [
        "baseline: structured pumping controller = 0.8",
        "floor: zero action and random = 0",
    ]
    assert success.lines[-1].get_ydata()[0] == 0.0
    # the return axis: the two floors differ (two lines); the baseline (500) is off scale
    labels = [line.get_label() for line in returns.lines]
    assert "floor: zero action = -1" in labels and "floor: random = -3" in labels
    assert "baseline: structured pumping controller\n= 500, off scale (above)" in labels


@pytest.mark.parametrize("task", ["swing", "hrv"])
def test_learning_figure_legends_sit_below_the_data(tmp_path, task):
    fig = learning_figure(load_run(build_run_directory(tmp_path)), task)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert len(legends) == len(_data_axes(fig)) == (3 if task == "hrv" else 2)
    _assert_legends_clear_of_axes(fig, legends, _data_axes(fig))
    full_name = "baseline: structured pumping controller = 0.8"
    if task == "swing":
        assert full_name in [text.get_text() for text in legends[0].get_texts()]


def test_replay_frame_shows_success_and_return_and_nothing_covers_them(tmp_path):
    run = load_run(build_run_directory(tmp_path))
    canvas = _ReplayCanvas((1280, 720), stick_pendulum, None)
    showcase = run.logs["swing"][0]
    canvas.start_checkpoint(run, "swing", showcase, 2, 100_352.0)
    success, returns = canvas.curve_axes
    assert success.get_ylabel() == "held-out success rate"
    assert returns.get_ylabel() == "held-out mean return"
    replayed = [line for line in returns.lines if line.get_label() == "seed 0 (replayed)"][0]
    np.testing.assert_allclose(replayed.get_ydata(), [0.0, 3.0, 6.0])  # 10 x success - seed
    frame = canvas.frame(_swing_trace(20, 1.0), 5, "episode time")
    assert frame.shape == (720, 1280, 3)
    renderer = canvas.canvas.get_renderer()
    legend = canvas.legend.get_window_extent(renderer)
    summary = canvas.summary.get_window_extent(renderer)
    for box in (legend, summary):
        for ax in (canvas.swing_ax, success, returns):
            assert not box.overlaps(ax.get_tightbbox(renderer))
    texts = [text.get_text() for text in canvas.legend.get_texts()]
    assert texts.count("floor: zero action") == 1
    # drawn in the success panel, off scale in the return panel: one entry that says where
    assert [text for text in texts if text.startswith("baseline:")] == [
        "baseline: structured pumping controller\n= 500 in held-out mean return: off scale (above)"
    ]
    assert checkpoint_label(2, 3) == "checkpoint 3 of 3" and canvas.title.get_text().endswith(
        "showcase episode of checkpoint 3 of 3"
    )


def _player_label(page: str, node: str) -> str:
    """The slider label the page shows before play, from its own script run by node with a
    minimal stand-in for the DOM."""
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)
    dom = """
const elements = {};
const document = { getElementById(id) {
  return elements[id] ??= { id, value: 0, textContent: "", currentTime: 0, addEventListener() {} };
} };
"""
    completed = subprocess.run(
        [
            node,
            "-e",
            dom + script + "\nconsole.log(JSON.stringify("
            "[document.getElementById('checkpoint-label').textContent, "
            "Number(document.getElementById('checkpoint').value)]));",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


@pytest.mark.slow
def test_poster_and_slider_name_the_same_checkpoint(rendered):
    """The poster is the last checkpoint's frame; the slider opens there, in the frames' words."""
    page = (rendered / "figures" / "replay.html").read_text()
    timeline = json.loads((rendered / "figures" / "replay_timeline.json").read_text())
    assert timeline["poster_checkpoint"] == len(TARGETS) - 1 and timeline["num_checkpoints"] == 3
    slider = re.search(r'<input type="range"[^>]*>', page).group(0)
    assert f'value="{len(TARGETS) - 1}"' in slider
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the page's script cannot be run here")
    label, value = _player_label(page, node)
    assert value == len(TARGETS) - 1
    assert label == f"{checkpoint_label(2, 3)}: 100,352 env steps, held-out success 60%"


# ---------------------------------------------------------------- a task's own render (issue 63 F14)


def test_a_showcase_records_the_frames_of_an_environment_that_renders_itself(monkeypatch):
    """``render(state, params) -> uint8 [H, W, 3]`` (docs/environments.md): the generic showcase
    records the frame of the state each action was taken in; an environment without it, none."""
    import jax
    import jax.numpy as jnp

    from purehr.envs.rollout import heldout_key, record_episode

    monkeypatch.syspath_prepend(str(REPO / "examples"))
    import my_env

    class Drawn(my_env.PointReach):
        def render(self, state, params):
            shade = jnp.clip(128 + 100 * state.position[0], 0, 255).astype(jnp.uint8)
            return jnp.full((6, 8, 3), shade, jnp.uint8)

    policy = lambda observation, t, key: jnp.ones(2, jnp.float32)  # noqa: E731  (moves right)
    env = Drawn()
    params = env.default_params.replace(max_steps=7)
    trace = jax.jit(lambda: record_episode(env, params, policy))()
    assert trace["frame"].shape == (7, 6, 8, 3) and trace["frame"].dtype == jnp.uint8
    start = env.reset(jax.random.split(jax.random.split(heldout_key(), 1)[0])[0], params)[1]
    np.testing.assert_array_equal(trace["frame"][0], env.render(start, params))
    assert "frame" not in jax.jit(lambda: record_episode(my_env.PointReach(), params, policy))()


def test_a_render_that_is_not_the_replay_hook_is_left_alone_with_a_warning(monkeypatch):
    """A gym-style ``render`` (host-side, or not an image) does not stop the training program:
    the showcase records no frames and says why, once, at trace time."""
    import jax
    import jax.numpy as jnp

    from purehr.envs.rollout import record_episode

    monkeypatch.syspath_prepend(str(REPO / "examples"))
    import my_env

    class HostDrawn(my_env.PointReach):
        def render(self, state, params):
            return np.zeros((4, 4, 3), np.uint8) + int(state.position[0] > 0)  # reads a tracer on the host

    class Text(my_env.PointReach):
        def render(self, state, params):
            return jnp.zeros((5,), jnp.uint8)

    policy = lambda observation, t, key: jnp.ones(2, jnp.float32)  # noqa: E731
    for env, why in ((HostDrawn(), "cannot be traced"), (Text(), "not an image")):
        params = env.default_params.replace(max_steps=3)
        with pytest.warns(UserWarning, match=f"{type(env).__name__}.render.*{why}.*no replay frames"):
            trace = jax.jit(lambda env=env, params=params: record_episode(env, params, policy))()
        assert "frame" not in trace and trace["reward"].shape == (3,)


def test_a_task_whose_showcases_hold_frames_gets_the_replay(tmp_path):
    """A run without the swing whose showcases hold its environment's frames: render_run writes
    the replay of them (before: only the swing had one), each checkpoint's episode its active
    steps, the pictures as recorded."""
    run_dir = build_run_directory(tmp_path)
    colours = [(230, 20, 20), (20, 230, 20), (20, 20, 230)]
    active_steps = 6
    for seed in (0, 1):
        for index, colour in enumerate(colours):
            path = run_dir / f"hrv/seed_{seed}/showcase/steps_{index}.npz"
            frames = np.broadcast_to(np.uint8(colour), (TRACE_ROWS, 40, 60, 3))
            np.savez(path, **_hrv_trace(TRACE_ROWS), frame=frames, active=np.arange(TRACE_ROWS) < active_steps)
    assert render_run(run_dir, tasks=["hrv"], replay=False)  # no replay asked: none
    assert not (run_dir / "figures" / "replay.mp4").exists()
    written = render_run(run_dir, tasks=["hrv"])
    assert run_dir / "figures" / "replay.html" in written
    num_frames, _ = imageio_ffmpeg.count_frames_and_secs(str(run_dir / "figures" / "replay.mp4"))
    assert num_frames == len(colours) * active_steps
    picture = first_frame(run_dir / "figures" / "replay.mp4")
    height, width, _ = picture.shape
    centre = picture[int(height * 0.45), int(width * 0.23)].astype(int)  # the left panel: the first checkpoint's
    assert np.abs(centre - np.asarray(colours[0])).max() < 40, centre
    timeline = json.loads((run_dir / "figures" / "replay_timeline.json").read_text())
    assert timeline["task"] == "hrv" and [entry["num_frames"] for entry in timeline["checkpoints"]] == [6, 6, 6]
