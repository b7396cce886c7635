"""The swing training replay: what the policy does at each checkpoint, next to how far along
the learning curve that checkpoint is.

Each checkpoint's showcase episode (same start for every checkpoint, so only the policy
changes) is played sped up, subsampled to a fixed number of frames, beside the held-out
success and return curves grown up to that checkpoint. Outputs: an H.264/yuv420p MP4 (plays in every
browser), a poster PNG, a JSON timeline (checkpoint -> seconds in the video) and the HTML
player built on that timeline.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import imageio.v3 as iio
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from purehr.envs.swing import SwingEnv
from purehr.run.store.files import atomic_output, atomic_write_text, read_npz
from purehr.viz import swing_drawing
from purehr.viz.html_player import write_html_player
from purehr.viz.learning_curves import (
    HIGHLIGHT_COLOUR,
    METRIC_LIMITS,
    OFF_SCALE,
    aggregate_over_seeds,
    draw_reference_levels,
    draw_seed_curves,
)
from purehr.viz.run_data import RunData, SeedLog
from purehr.viz.video import H264Writer

# draw_frame(ax, trace, index, params): draw frame ``index`` of a showcase trace on ``ax``;
# it may return an object with update(trace, index) that redraws cheaply (see _ReplayCanvas).
DrawFrame = Callable[[Axes, dict[str, np.ndarray], int, Any], Any]

VIDEO_NAME = "replay.mp4"
POSTER_NAME = "replay_poster.png"
TIMELINE_NAME = "replay_timeline.json"
HTML_NAME = "replay.html"
SUCCESS_COLUMN = "eval_success_rate"
RETURN_COLUMN = "eval_return_mean"
CURVE_COLUMNS = (SUCCESS_COLUMN, RETURN_COLUMN)
TENSION_COLUMN = "eval_min_tension_worst"


@dataclass(frozen=True)
class ReplayOutputs:
    video: Path
    poster: Path
    timeline: Path
    html: Path


def frame_indices(num_steps: int, frames_per_checkpoint: int) -> np.ndarray:
    """Evenly spaced control steps, first and last included (the last is where a successful
    episode ends), never more frames than steps."""
    count = max(1, min(num_steps, frames_per_checkpoint))
    return np.unique(np.round(np.linspace(0, num_steps - 1, count)).astype(int))


def _format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "n/a"
    minutes, rest = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {rest:02d} s" if minutes else f"{seconds:.1f} s"


def _checkpoint_value(log: SeedLog, column: str, row: int) -> float:
    return float(log.checkpoints[column][row]) if column in log.checkpoints else math.nan


def checkpoint_label(row: int, num_checkpoints: int) -> str:
    """How a checkpoint is named in the frames, the poster and the HTML slider alike (the
    player's JavaScript builds the same words from the timeline)."""
    return f"checkpoint {row + 1} of {num_checkpoints}"


def _summary_text(run: RunData, task: str, showcase: SeedLog, row: int) -> str:
    """The line under the title: how much interaction and time this checkpoint cost, and how
    good (held-out success and return) and how safe it is: the lowest chain tension of any
    held-out episode (``min_tension_worst``; below zero the chain would have to push)."""
    logs = list(run.logs[task].values())
    target = showcase.checkpoints["target_steps"][row]
    success = _checkpoint_value(showcase, SUCCESS_COLUMN, row)
    mean_note = ""
    if len(logs) > 1:
        aggregate = aggregate_over_seeds(logs, SUCCESS_COLUMN, max_target=target)
        if aggregate.target_steps.size and aggregate.target_steps[-1] == target:
            mean_note = f" (mean of {len(logs)} seeds {aggregate.mean[-1]:.0%})"
    first = (
        f"{int(showcase.checkpoints['actual_steps'][row]):,} env steps, training time "
        f"{_format_duration(_checkpoint_value(showcase, 'elapsed_s', row))}"
    )
    second = f"held-out return {_checkpoint_value(showcase, RETURN_COLUMN, row):.3g}"
    if math.isfinite(success):  # NaN: the task defines no success
        second = f"held-out success {success:.0%}{mean_note}, {second}"
    if TENSION_COLUMN in showcase.checkpoints:  # the swing's safety
        tension = _checkpoint_value(showcase, TENSION_COLUMN, row)
        second += f", minimum chain tension {tension:.1f} N (worst held-out episode)"
    return f"{first}\n{second}"


def _draw_curve_panels(
    axes: tuple[Axes, Axes], run: RunData, task: str, showcase: SeedLog, row: int, max_steps: float
) -> None:
    """Held-out success (top) and return (bottom) up to this checkpoint, with the baseline
    and the floors; the legend lives outside both (see _ReplayCanvas)."""
    logs = list(run.logs[task].values())
    target = showcase.checkpoints["target_steps"][row]
    for ax, column in zip(axes, CURVE_COLUMNS):
        ax.cla()
        draw_seed_curves(ax, logs, column, max_target=target, highlight_seed=showcase.seed)
        ax.set_xlim(0, max_steps * 1.02)
        if column in METRIC_LIMITS:
            ax.set_ylim(*METRIC_LIMITS[column])
        else:
            ax.set_ylim(*_full_run_limits(logs, column, _reference_values(run, task, column)))
        ax.axvline(showcase.checkpoints["actual_steps"][row], color=HIGHLIGHT_COLOUR, linestyle=":", linewidth=1.0)
        draw_reference_levels(ax, run, task, column, with_values=False)
    axes[0].set_xlabel("")
    axes[0].tick_params(labelbottom=False)
    axes[0].set_title("held-out evaluation up to this checkpoint", fontsize=11)


def _reference_values(run: RunData, task: str, column: str) -> list[float]:
    """The baseline's and the floors' values of ``column`` in the manifest."""
    metric = column.removeprefix("eval_")
    sources = list(run.floors(task).values())
    baseline = run.baseline(task)
    if baseline is not None:
        sources.append(baseline[1])
    values = [source.get(metric) for source in sources]
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def _full_run_limits(logs: list[SeedLog], column: str, references: list[float]) -> tuple[float, float]:
    """The same y range in every frame (the whole run's values, and the reference levels
    that sit within one data range of them; farther ones become off-scale legend notes), so
    the curve grows into a fixed frame instead of rescaling from checkpoint to checkpoint."""
    values = np.concatenate([log.checkpoints[column] for log in logs if column in log.checkpoints])
    values = values[np.isfinite(values)]
    if not values.size:
        return -1.0, 1.0
    low, high = float(values.min()), float(values.max())
    span = max(high - low, 1e-9)
    near = [value for value in references if low - span <= value <= high + span]
    low, high = min([low, *near]), max([high, *near])
    pad = 0.06 * (high - low) if high > low else 1.0
    return low - pad, high + pad


_OFF_SCALE_NOTE = re.compile(rf"\n= (?P<value>\S+), {OFF_SCALE} \((?P<where>above|below)\)$")
"""The note ``learning_curves._draw_level`` appends to a reference level it cannot draw."""


def _shared_legend_entries(axes: tuple[Axes, ...]) -> tuple[list, list[str]]:
    """Every distinct entry of the panels once (their labels carry no values). A reference
    level drawn in one panel and off scale in another is one entry, with the panel where it
    is off scale named in it (not a second entry of the same name)."""
    handles: dict[str, Any] = {}
    notes: dict[str, list[str]] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            note = _OFF_SCALE_NOTE.search(label)
            name = label[: note.start()] if note else label
            handles.setdefault(name, handle)
            notes.setdefault(name, [])
            if note:
                notes[name].append(
                    f"= {note['value']} in {ax.get_ylabel() or 'a panel'}: {OFF_SCALE} ({note['where']})"
                )
    labels = [name + "".join(f"\n{note}" for note in notes[name]) for name in handles]
    return list(handles.values()), labels


def image_frame(ax: Axes, trace: dict[str, np.ndarray], index: int, params: Any) -> None:
    """The ``draw_frame`` of a task whose environment renders itself (``render(state, params)``):
    the showcase's recorded ``frame`` at ``index``, as the environment drew it."""
    ax.imshow(np.asarray(trace["frame"][index]), interpolation="nearest")
    ax.set_axis_off()


def replays_images(trace_path: Path) -> bool:
    """Whether a showcase trace holds the environment's own frames (``render``)."""
    try:
        with np.load(trace_path, allow_pickle=False) as trace:
            return "frame" in trace.files
    except (OSError, ValueError):
        return False


def _episode_length(trace: dict[str, np.ndarray]) -> int:
    """The trace's rows that belong to its episode: the swing's up to its success, a generic
    showcase's ``active`` ones (``purehr.envs.rollout.record_episode``)."""
    if "active" in trace:
        return max(1, int(np.asarray(trace["active"], bool).sum()))
    return swing_drawing.episode_length(trace)


def _clock_text(trace: dict[str, np.ndarray], index: int, indices: np.ndarray, fps: int) -> str:
    if "time" not in trace:
        return f"step {index + 1} of {int(indices[-1]) + 1}"
    episode_seconds = float(trace["time"][indices[-1]] - trace["time"][0])
    speed_up = episode_seconds / (len(indices) / fps)
    return f"episode time {float(trace['time'][index]):5.1f} s (played {speed_up:.2g}x)"


def _swing_height(trace: dict[str, np.ndarray], index: int) -> float:
    return -math.cos(float(trace["theta"][index])) if "theta" in trace else 0.0


def _is_frame_updater(drawn: Any) -> bool:
    """draw_frame may return an object with ``update(trace, index)`` (the swing drawing's
    SwingFrame): moving its artists is much cheaper than drawing the picture anew."""
    return callable(getattr(drawn, "update", None)) and not isinstance(drawn, Artist)


def _remove_drawn_artists(ax: Axes) -> None:
    """Empty the axes for the next frame but keep its axis and ticks: ``cla()`` rebuilds the
    ticks every frame, which costs more than drawing the swing itself."""
    for artist in [
        *ax.lines,
        *ax.patches,
        *ax.texts,
        *ax.collections,
        *ax.images,
        *ax.artists,
        *([ax.legend_] if ax.legend_ else []),
    ]:
        artist.remove()


class _ReplayCanvas:
    """The video frame: the swing on the left; on the right held-out success and return up
    to the checkpoint, their legend beneath them; the checkpoint's numbers under the title.
    Nothing is drawn over the data or the rider.

    Blitting: the right side only changes per checkpoint, so it is drawn once per
    checkpoint and only the swing panel and the clock are redrawn per frame."""

    def __init__(self, size_px: tuple[int, int], draw_frame: DrawFrame, env_params: Any):
        width, height = size_px
        self.figure = Figure(figsize=(width / 100, height / 100), dpi=100)
        self.canvas = FigureCanvasAgg(self.figure)  # pixels without pyplot or a GUI backend
        self.swing_ax = self.figure.add_axes((0.02, 0.08, 0.42, 0.74))
        self.curve_axes = (
            self.figure.add_axes((0.565, 0.555, 0.41, 0.255)),
            self.figure.add_axes((0.565, 0.255, 0.41, 0.255)),
        )
        self.title = self.figure.text(0.5, 0.965, "", ha="center", va="center", fontsize=14)
        self.summary = self.figure.text(0.5, 0.895, "", ha="center", va="center", fontsize=10.5, linespacing=1.4)
        self.clock = self.figure.text(0.23, 0.035, "", ha="center", va="center", fontsize=11, family="monospace")
        self.legend = None
        self.draw_frame, self.env_params = draw_frame, env_params
        self.drawn: Any = None
        self.background: Any = None

    def start_checkpoint(self, run: RunData, task: str, showcase: SeedLog, row: int, max_steps: float) -> None:
        _draw_curve_panels(self.curve_axes, run, task, showcase, row, max_steps)
        if self.legend is not None:
            self.legend.remove()
        handles, labels = _shared_legend_entries(self.curve_axes)
        self.legend = self.figure.legend(
            handles, labels, loc="lower center", bbox_to_anchor=(0.77, 0.005), ncol=2, fontsize=8.5, frameon=False
        )
        self.title.set_text(
            f"{task}: PPO training replay, seed {showcase.seed}, showcase "
            f"episode of {checkpoint_label(row, showcase.num_checkpoints)}"
        )
        self.summary.set_text(_summary_text(run, task, showcase, row))
        moving = (self.swing_ax, self.clock)
        for artist in moving:
            artist.set_visible(False)
        self.canvas.draw()
        for artist in moving:
            artist.set_visible(True)
        self.background = self.canvas.copy_from_bbox(self.figure.bbox)

    def frame(self, trace: dict[str, np.ndarray], index: int, clock_text: str) -> np.ndarray:
        self.canvas.restore_region(self.background)
        if _is_frame_updater(self.drawn):
            self.drawn.update(trace, index)
        else:
            _remove_drawn_artists(self.swing_ax)
            self.drawn = self.draw_frame(self.swing_ax, trace, index, self.env_params)
        self.clock.set_text(clock_text)
        self.figure.draw_artist(self.swing_ax)
        self.figure.draw_artist(self.clock)
        return np.asarray(self.canvas.buffer_rgba())[..., :3].copy()


def replayed_rows(num_checkpoints: int, max_checkpoints: int) -> list[int]:
    """At most ``max_checkpoints`` checkpoint rows, evenly spaced, first and last included: a
    10M-step run has 201 checkpoints, and 3.5 s of video each would make a 12-minute replay
    that takes longer to draw than the training took."""
    if max_checkpoints < 1:
        raise ValueError(f"max_checkpoints={max_checkpoints!r}: expected a positive integer")
    count = min(num_checkpoints, max_checkpoints)
    return sorted(set(np.round(np.linspace(0, num_checkpoints - 1, count)).astype(int).tolist()))


def render_replay(
    run: RunData,
    out_dir: Path,
    *,
    task: str = "swing",
    seed: int | None = None,
    seconds_per_checkpoint: float = 3.5,
    max_checkpoints: int = 24,
    fps: int = 25,
    size_px: tuple[int, int] = (1280, 720),
    draw_frame: DrawFrame | None = None,
    env_params: Any = None,
) -> ReplayOutputs:
    """Write replay.mp4, replay_poster.png, replay_timeline.json and replay.html to
    ``out_dir``. ``seed`` defaults to the lowest seed; ``draw_frame`` to the swing drawing
    (with the swing's default parameters when ``env_params`` is None), or for a task whose
    showcases hold the environment's own ``frame`` (its ``render``), those images."""
    logs = run.logs[task]
    showcase = logs[min(logs) if seed is None else seed]
    recorded = [row for row in range(showcase.num_checkpoints) if str(showcase.checkpoints["showcase_path"][row])]
    if (
        draw_frame is None
        and recorded
        and replays_images(run.run_dir / str(showcase.checkpoints["showcase_path"][recorded[0]]))
    ):
        draw_frame = image_frame
    if draw_frame is None:
        draw_frame = swing_drawing.draw_frame
        if env_params is None:
            env_params = SwingEnv().default_params
    video_path, poster_path = out_dir / VIDEO_NAME, out_dir / POSTER_NAME
    with atomic_output(video_path) as partial_video:
        with H264Writer(partial_video, fps=fps, crf=20, output_params=["-movflags", "+faststart"]) as writer:
            entries, frame_count, poster = _write_frames(
                writer,
                _ReplayCanvas(size_px, draw_frame, env_params),
                run,
                task,
                showcase,
                rows=[recorded[i] for i in replayed_rows(len(recorded), max_checkpoints)],
                frames_per_checkpoint=max(1, round(seconds_per_checkpoint * fps)),
                fps=fps,
            )
    with atomic_output(poster_path) as partial_poster:
        iio.imwrite(partial_poster, poster, extension=".png")
    timeline = _timeline(task, showcase, fps, frame_count, entries)
    timeline_path = atomic_write_text(out_dir / TIMELINE_NAME, json.dumps(timeline, indent=2))
    html_path = write_html_player(
        out_dir / HTML_NAME,
        video_path,
        poster_path,
        timeline,
        title=f"{task}: PPO training replay (seed {showcase.seed})",
        description=(
            "Each checkpoint's recorded showcase episode, sped up, beside the "
            "held-out success and return curves up to that checkpoint. The poster "
            "is the last checkpoint; play plays them all in turn, the slider jumps to one."
        ),
    )
    return ReplayOutputs(video_path, poster_path, timeline_path, html_path)


def _write_frames(
    writer: H264Writer,
    replay_canvas: _ReplayCanvas,
    run: RunData,
    task: str,
    showcase: SeedLog,
    *,
    rows: list[int],
    frames_per_checkpoint: int,
    fps: int,
) -> tuple[list[dict[str, Any]], int, np.ndarray | None]:
    """Each replayed checkpoint row's showcase episode, sped up to its frames, into ``writer``:
    the timeline entries, the number of frames and the poster (the last replayed checkpoint
    when the swing is highest), a (height, width, 3) uint8 frame."""
    max_steps = max(float(log.checkpoints["actual_steps"].max()) for log in run.logs[task].values())
    entries, frame_count, poster, poster_height = [], 0, None, -math.inf
    for row in rows:
        trace = read_npz(run.run_dir / str(showcase.checkpoints["showcase_path"][row]))
        # rows after a success repeat it (recording.py): play the episode's own rows
        indices = frame_indices(_episode_length(trace), frames_per_checkpoint)
        replay_canvas.start_checkpoint(run, task, showcase, row, max_steps)
        is_last = row == rows[-1]
        for index in map(int, indices):
            frame = replay_canvas.frame(trace, index, _clock_text(trace, index, indices, fps))
            writer.append(frame)
            if is_last and _swing_height(trace, index) > poster_height:
                poster, poster_height = frame, _swing_height(trace, index)
        entries.append(_timeline_entry(showcase, row, frame_count, len(indices), fps))
        frame_count += len(indices)
    return entries, frame_count, poster


def _timeline(
    task: str, showcase: SeedLog, fps: int, frame_count: int, entries: list[dict[str, Any]]
) -> dict[str, Any]:
    """replay_timeline.json: the video's checkpoints and where each plays. The poster shows
    the last replayed checkpoint: the player opens its slider there."""
    return {
        "task": task,
        "seed": showcase.seed,
        "fps": fps,
        "num_frames": frame_count,
        "duration_s": frame_count / fps,
        "video": VIDEO_NAME,
        "num_checkpoints": showcase.num_checkpoints,
        "poster_checkpoint": len(entries) - 1,
        "checkpoints": entries,
    }


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _timeline_entry(log: SeedLog, row: int, start_frame: int, num_frames: int, fps: int) -> dict[str, Any]:
    return {
        "index": row,
        "target_steps": int(log.checkpoints["target_steps"][row]),
        "actual_steps": int(log.checkpoints["actual_steps"][row]),
        "elapsed_s": _finite_or_none(_checkpoint_value(log, "elapsed_s", row)),
        SUCCESS_COLUMN: _finite_or_none(_checkpoint_value(log, SUCCESS_COLUMN, row)),
        "start_frame": start_frame,
        "num_frames": num_frames,
        "start_s": start_frame / fps,
        "end_s": (start_frame + num_frames) / fps,
    }
