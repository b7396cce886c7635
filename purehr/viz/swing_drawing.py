"""Drawing a recorded swing episode: one frame with matplotlib, or an H.264 MP4.

The rider is a stick figure standing on the seat: the model's body axis (lean ``beta``
from the suspension) carries feet, knees, hips, shoulders and head; squatting lowers the
hips and pushes the knees out, so both actions are visible. The CoM drawn is the model's
(at height ``h`` along the body axis), not the figure's.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from purehr.envs.swing.physics import SwingParams, com_height
from purehr.viz.video import H264Writer

LEG_SEGMENT = 0.47  # m, shin and thigh (standing hip height 0.9 m leaves the knees soft)
HIP_BELOW_COM = 0.15  # m, hips sit this far below the CoM along the body axis
TORSO = 0.5  # m, hips to shoulders
HEAD_RADIUS = 0.1  # m
TRAIL_STEPS = 50  # CoM trail drawn behind the rider (one second at dt = 0.02 s)

COLORS = {"rod": "#444444", "rider": "#0072B2", "com": "#D55E00", "trail": "#E69F00", "seat": "#222222"}


def rider_geometry(theta, squat, lean, params: SwingParams) -> dict[str, np.ndarray]:
    """Positions (..., 2) of pivot, seat, feet, knees, hips, shoulders, hands, head, com.

    ``theta``, ``squat``, ``lean`` broadcast (scalars or arrays, NumPy).
    """
    theta, squat, lean = np.broadcast_arrays(*(np.asarray(x, float) for x in (theta, squat, lean)))
    length = float(params.length)
    beta = lean * float(params.beta_max)
    radial = np.stack([np.sin(theta), -np.cos(theta)], -1)  # pivot -> seat
    tangential = np.stack([np.cos(theta), np.sin(theta)], -1)  # direction of theta > 0
    cos_b, sin_b = np.cos(beta)[..., None], np.sin(beta)[..., None]
    up = -cos_b * radial + sin_b * tangential  # body axis, feet -> head
    forward = sin_b * radial + cos_b * tangential  # knees bend this way

    height = np.asarray(com_height(squat, params), float)[..., None]
    seat = length * radial
    hip_height = np.maximum(height - HIP_BELOW_COM, 0.2)
    half = 0.5 * hip_height
    knee_out = np.sqrt(np.maximum(LEG_SEGMENT**2 - half**2, 0.0))
    hips = seat + hip_height * up
    shoulders = hips + TORSO * up
    return {
        "pivot": np.zeros_like(seat),
        "seat": seat,
        "feet": seat,
        "knees": seat + half * up + knee_out * forward,
        "hips": hips,
        "shoulders": shoulders,
        "hands": np.sum(shoulders * radial, -1, keepdims=True) * radial,  # grip on the rod
        "head": shoulders + 1.3 * HEAD_RADIUS * up,  # centre
        "com": seat + height * up,
    }


def episode_length(trace: Mapping[str, np.ndarray]) -> int:
    """Rows that belong to the episode: up to and including the first success."""
    success = np.asarray(trace["success"], bool)
    return int(np.argmax(success)) + 1 if success.any() else len(success)


class SwingFrame:
    """Matplotlib artists for one swing picture, created once and updated per frame."""

    def __init__(self, ax, params: SwingParams):
        import matplotlib.patches as patches

        self.ax, self.params = ax, params
        reach = float(params.length) + 0.7
        ax.set_xlim(-reach, reach)
        ax.set_ylim(-reach, reach)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.plot([-0.6, 0.6], [0.0, 0.0], color=COLORS["rod"], lw=4, solid_capstyle="round")
        ax.add_patch(patches.Circle((0, 0), float(params.length), fill=False, ls=":", color="#BBBBBB", lw=0.8))
        (self.rod,) = ax.plot([], [], color=COLORS["rod"], lw=2)
        (self.seat,) = ax.plot([], [], color=COLORS["seat"], lw=5, solid_capstyle="butt")
        (self.trail,) = ax.plot([], [], color=COLORS["trail"], lw=1.2, alpha=0.7)
        (self.body,) = ax.plot([], [], color=COLORS["rider"], lw=3, solid_joinstyle="round")
        (self.arms,) = ax.plot([], [], color=COLORS["rider"], lw=2)
        self.head = patches.Circle((0, 0), HEAD_RADIUS, color=COLORS["rider"])
        ax.add_patch(self.head)
        (self.com,) = ax.plot([], [], "o", color=COLORS["com"], ms=9, mec="white", mew=1.5, label="centre of mass")
        ax.plot([0.0], [0.0], "o", color=COLORS["rod"], ms=7)
        self.text = ax.text(0.02, 0.98, "", transform=ax.transAxes, va="top", ha="left", family="monospace", fontsize=9)

    def update(self, trace: Mapping[str, np.ndarray], index: int) -> None:
        """Show row ``index`` of a recorded trace (``record_episode`` keys)."""
        row = {k: np.asarray(trace[k])[index] for k in ("theta", "squat", "lean")}
        g = rider_geometry(row["theta"], row["squat"], row["lean"], self.params)
        tangent = np.array([np.cos(row["theta"]), np.sin(row["theta"])])
        seat_ends = np.stack([g["seat"] - 0.22 * tangent, g["seat"] + 0.22 * tangent])
        self.rod.set_data([0.0, g["seat"][0]], [0.0, g["seat"][1]])
        self.seat.set_data(seat_ends[:, 0], seat_ends[:, 1])
        body = np.stack([g["feet"], g["knees"], g["hips"], g["shoulders"]])
        self.body.set_data(body[:, 0], body[:, 1])
        self.arms.set_data([g["shoulders"][0], g["hands"][0]], [g["shoulders"][1], g["hands"][1]])
        self.head.center = tuple(g["head"])
        self.com.set_data([g["com"][0]], [g["com"][1]])
        first = max(0, index - TRAIL_STEPS)
        path = rider_geometry(
            np.asarray(trace["theta"])[first : index + 1],
            np.asarray(trace["squat"])[first : index + 1],
            np.asarray(trace["lean"])[first : index + 1],
            self.params,
        )["com"]
        self.trail.set_data(path[:, 0], path[:, 1])
        tension = float(np.asarray(trace["tension"])[index])
        lines = [
            f"t      {float(np.asarray(trace['time'])[index]):6.2f} s",
            f"angle  {np.degrees(row['theta']):7.1f} deg",
            f"energy {float(np.asarray(trace['energy_norm'])[index]):6.2f}",
            f"tension{tension:7.0f} N" + ("  (rod pushes)" if tension < 0 else ""),
            f"squat  {row['squat']:+5.2f}  lean {row['lean']:+5.2f}",
        ]
        if bool(np.asarray(trace["success"])[index]):
            lines.append("full revolution!")
        self.text.set_text("\n".join(lines))


def draw_frame(ax, trace: Mapping[str, np.ndarray], index: int, params: SwingParams) -> SwingFrame:
    """Draw row ``index`` of a trace on ``ax``; returns the artists for cheap updates."""
    frame = SwingFrame(ax, params)
    frame.update(trace, index)
    return frame


def write_episode_mp4(
    trace: Mapping[str, np.ndarray],
    params: SwingParams,
    path,
    fps: int = 25,
    stride: int = 4,
    size_px: int = 640,
    hold_s: float = 1.0,
) -> int:
    """Write the episode (up to its first success) as H.264/yuv420p; returns frames written.

    Every ``stride``-th control step becomes a frame: with dt = 0.02 s, stride 4 at 25 fps
    plays at twice real time, keeping a 15 s episode near 8 s of video.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    trace = {k: np.asarray(v) for k, v in trace.items()}
    last = episode_length(trace) - 1
    indices = list(range(0, last + 1, stride))
    if indices[-1] != last:
        indices.append(last)
    indices += [last] * int(round(hold_s * fps))

    dpi = 100
    fig = Figure(figsize=(size_px / dpi, size_px / dpi), dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes([0, 0, 1, 1])
    frame = SwingFrame(ax, params)
    # crf 25: the quality imageio's default (quality 5) gave this video before
    with H264Writer(path, fps=fps, crf=25) as writer:
        for index in indices:
            frame.update(trace, index)
            canvas.draw()
            writer.append(np.asarray(canvas.buffer_rgba())[..., :3])
    return len(indices)
