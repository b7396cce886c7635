"""Record one structured-controller swing episode and write it as an MP4 (and a poster PNG).

python studies/scripts/record_swing_episode.py --out swing.mp4 [--theta-deg 3] [--png frame.png]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed

import jax  # noqa: E402
import numpy as np  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="MP4 path to write")
    parser.add_argument("--theta-deg", type=float, default=3.0, help="start angle, degrees")
    parser.add_argument("--theta-dot", type=float, default=0.0, help="start rate, rad/s")
    parser.add_argument("--fps", type=int, default=25, help="video frames per second")
    parser.add_argument("--stride", type=int, default=4, help="control steps per frame")
    parser.add_argument("--png", type=Path, default=None, help="also save one frame as PNG (at --png-time seconds)")
    parser.add_argument(
        "--png-time",
        type=float,
        default=None,
        help="time of the PNG frame, s (default: deepest squat of the last swing)",
    )
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from purehr.envs.swing import SwingEnv, make_structured_policy, record_episode
    from purehr.viz.swing_drawing import draw_frame, episode_length, write_episode_mp4

    env = SwingEnv()
    params = env.default_params
    policy = make_structured_policy(params)
    trace = jax.jit(lambda: record_episode(env, params, policy, math.radians(args.theta_deg), args.theta_dot))()
    trace = {k: np.asarray(v) for k, v in trace.items()}
    length = episode_length(trace)
    succeeded = bool(trace["success"][length - 1])
    print(
        f"episode: {length} steps ({length * float(params.dt):.2f} s), "
        f"success={succeeded}, min tension {trace['tension'][:length].min():.0f} N"
    )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    frames = write_episode_mp4(trace, params, args.out, fps=args.fps, stride=args.stride)
    print(f"wrote {args.out} ({frames} frames at {args.fps} fps)")

    if args.png is not None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        if args.png_time is None:
            window = slice(max(0, length - 150), length)
            index = window.start + int(np.argmax(trace["squat"][window]))
        else:
            index = min(int(round(args.png_time / float(params.dt))), length - 1)
        fig = Figure(figsize=(6.4, 6.4), dpi=100)
        FigureCanvasAgg(fig)
        draw_frame(fig.add_axes([0, 0, 1, 1]), trace, index, params)
        fig.savefig(args.png)
        print(f"wrote {args.png} (step {index})")


if __name__ == "__main__":
    main()
