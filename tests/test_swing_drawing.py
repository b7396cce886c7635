"""Rider geometry and frame drawing agree with the model, and the MP4 writer works."""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from purehr.envs.swing import SwingParams, physics
from purehr.viz.swing_drawing import draw_frame, episode_length, rider_geometry, write_episode_mp4
from purehr.viz.video import video_stream

PARAMS = SwingParams()


def synthetic_trace(steps: int = 12, success_at: int | None = 8) -> dict[str, np.ndarray]:
    t = np.arange(1, steps + 1) * PARAMS.dt
    success = np.zeros(steps, bool)
    if success_at is not None:
        success[success_at:] = True
    return {
        "time": t,
        "theta": 0.5 * np.sin(2.6 * t),
        "theta_dot": 1.3 * np.cos(2.6 * t),
        "squat": np.cos(5.2 * t),
        "lean": np.sin(2.6 * t),
        "energy_norm": np.full(steps, 0.1),
        "tension": np.linspace(700.0, -50.0, steps),
        "command_speed": np.ones(steps),
        "reward": np.zeros(steps),
        "success": success,
    }


def test_rider_com_matches_the_model():
    theta = np.array([0.3, -2.0, 4.0])
    squat = np.array([-1.0, 0.2, 1.0])
    lean = np.array([0.5, -1.0, 0.0])
    geometry = rider_geometry(theta, squat, lean, PARAMS)
    for i in range(3):
        model = physics.com_position(jnp.float32(theta[i]), jnp.array([squat[i], lean[i]]), PARAMS)
        np.testing.assert_allclose(geometry["com"][i], model, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(geometry["seat"], axis=-1), PARAMS.length)
    assert set(geometry) >= {"pivot", "seat", "feet", "knees", "hips", "shoulders", "head", "com"}


def test_squat_lowers_hips_and_bends_knees():
    tall = rider_geometry(0.0, -1.0, 0.0, PARAMS)
    deep = rider_geometry(0.0, 1.0, 0.0, PARAMS)
    assert deep["hips"][1] < tall["hips"][1] - 0.4  # y up; the rider hangs below
    knee_out = lambda g: abs(g["knees"][0] - g["feet"][0])  # noqa: E731
    assert knee_out(deep) > knee_out(tall) + 0.2
    leaning = rider_geometry(0.0, 0.0, 1.0, PARAMS)
    body = leaning["shoulders"] - leaning["hips"]
    assert math.isclose(math.atan2(body[0], body[1]), PARAMS.beta_max, rel_tol=1e-6)


def test_draw_frame_and_episode_length():
    trace = synthetic_trace()
    assert episode_length(trace) == 9 and episode_length(synthetic_trace(success_at=None)) == 12
    fig = Figure(figsize=(3, 3), dpi=50)
    canvas = FigureCanvasAgg(fig)
    frame = draw_frame(fig.add_axes([0, 0, 1, 1]), trace, 11, PARAMS)
    canvas.draw()
    assert "rod pushes" in frame.text.get_text() and "full revolution" in frame.text.get_text()
    image = np.asarray(canvas.buffer_rgba())
    assert image[..., :3].std() > 5  # something was drawn


def test_write_episode_mp4_h264_without_forking_python(tmp_path):
    """Once JAX's backend is up it warns at every os.fork (and every subprocess started with
    a preexec_fn, as imageio-ffmpeg's writer and reader do); encoding must not trigger it."""
    jax.devices()  # installs JAX's at-fork hook, as any training run has
    path = tmp_path / "episode.mp4"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frames = write_episode_mp4(synthetic_trace(), PARAMS, path, fps=10, stride=2, size_px=160, hold_s=0.2)
        stream = video_stream(path)
    assert [str(w.message) for w in caught if "fork" in str(w.message)] == []
    assert frames == len(range(0, 9, 2)) + 2
    assert stream == {"codec": "h264", "pix_fmt": "yuv420p", "width": 160, "height": 160}
