"""H.264 video out of RGB frames through the ffmpeg that ``imageio-ffmpeg`` ships.

Why not ``imageio.get_writer``: imageio-ffmpeg starts ffmpeg with
``subprocess.Popen(..., preexec_fn=os.setpgrp)``. A ``preexec_fn`` makes CPython run the
``os.register_at_fork`` hooks, and JAX's hook warns "os.fork() was called ... JAX is
multithreaded, so this will likely lead to a deadlock" at the end of every rendered run (a
``preexec_fn`` runs Python code in the forked child of a multithreaded process, which is
exactly what can deadlock). Here ffmpeg is started with ``process_group=0``, which does the
same ``setpgid`` in C between fork and exec: no Python runs in the child, no at-fork hook
fires, and a Ctrl-C in the terminal still reaches only Python, which then stops ffmpeg.
"""

from __future__ import annotations

import subprocess
import tempfile
from fractions import Fraction
from pathlib import Path
from types import TracebackType

import numpy as np

MACRO_BLOCK = 16
"""H.264 players want both frame sides divisible by 16 (ffmpeg pads the frame otherwise)."""


def ffmpeg_executable() -> str:
    """The ffmpeg binary imageio-ffmpeg ships (or the one IMAGEIO_FFMPEG_EXE names)."""
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


def h264_command(
    path: Path, width: int, height: int, fps: float, crf: int, output_params: list[str] | None = None
) -> list[str]:
    """The ffmpeg command line: raw rgb24 frames on stdin -> H.264/yuv420p in ``path``.
    A frame whose sides are not multiples of 16 is padded (black), not stretched."""
    command = [
        ffmpeg_executable(),
        "-y",
        "-v",
        "error",
        "-f",
        "rawvideo",
        "-vcodec",
        "rawvideo",
        "-s",
        f"{width}x{height}",
        "-pix_fmt",
        "rgb24",
        "-r",
        str(Fraction(fps).limit_denominator()),
        "-i",
        "-",
        "-an",
        "-vcodec",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-crf",
        str(int(crf)),
    ]
    if width % MACRO_BLOCK or height % MACRO_BLOCK:
        command += ["-vf", f"pad=ceil(iw/{MACRO_BLOCK})*{MACRO_BLOCK}:ceil(ih/{MACRO_BLOCK})*{MACRO_BLOCK}"]
    return command + list(output_params or []) + [str(path)]


class H264Writer:
    """``with H264Writer(path, fps=25) as writer: writer.append(frame)`` for (height, width, 3)
    uint8 frames of one size. ffmpeg starts at the first frame; leaving the block waits for
    it and raises, with ffmpeg's own message, if it failed. ``crf`` is x264's quality (lower
    is better; 23 is x264's default, 20 what imageio's quality=6 gave)."""

    def __init__(self, path: str | Path, fps: float = 25, crf: int = 20, output_params: list[str] | None = None):
        self.path = Path(path)
        self.fps, self.crf, self.output_params = fps, crf, list(output_params or [])
        self.frame_shape: tuple[int, ...] | None = None
        self.frames_written = 0
        self._process: subprocess.Popen | None = None
        self._log = None

    def _start(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 3 or shape[2] != 3:
            raise ValueError(f"{self.path}: frames must be (height, width, 3) RGB arrays, got shape {shape}")
        self.frame_shape = shape
        height, width, _ = shape
        self._log = tempfile.TemporaryFile()
        # process_group=0: setpgid in the child without a preexec_fn (see the module docstring)
        self._process = subprocess.Popen(
            h264_command(self.path, width, height, self.fps, self.crf, self.output_params),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            process_group=0,
        )

    def append(self, frame: np.ndarray) -> None:
        frame = np.asarray(frame)
        if self._process is None:
            self._start(frame.shape)
        elif frame.shape != self.frame_shape:
            raise ValueError(
                f"{self.path}: frame {self.frames_written} has shape {frame.shape}; every frame "
                f"of a video must have the first frame's shape {self.frame_shape}"
            )
        if frame.dtype != np.uint8:
            raise ValueError(f"{self.path}: frames must be uint8 RGB, got {frame.dtype}")
        try:
            self._process.stdin.write(np.ascontiguousarray(frame).tobytes())
        except BrokenPipeError:
            self._process.wait()
            raise RuntimeError(f"ffmpeg stopped while writing {self.path}: {self._ffmpeg_log()}") from None
        self.frames_written += 1

    def close(self) -> None:
        """Ends the stream and waits for ffmpeg; raises if it reported a failure."""
        if self._process is None:
            return
        process, self._process = self._process, None
        try:
            process.stdin.close()
        except BrokenPipeError:
            pass
        code = process.wait()
        log = self._ffmpeg_log()
        self._log.close()
        if code != 0:
            raise RuntimeError(f"ffmpeg failed (exit {code}) writing {self.path}: {log}")

    def abort(self) -> None:
        """Stops ffmpeg without waiting for the video (the caller discards the file)."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process.stdin.close()
            self._process = None
            self._log.close()

    def _ffmpeg_log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip() or "(no message from ffmpeg)"

    def __enter__(self) -> H264Writer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def video_stream(path: str | Path) -> dict[str, str | int]:
    """Codec, pixel format and size of the first video stream, as ffmpeg reports them
    (imageio's reader would start ffmpeg with a ``preexec_fn``, see the module docstring)."""
    import re

    completed = subprocess.run(
        [ffmpeg_executable(), "-hide_banner", "-i", str(path)], capture_output=True, text=True, process_group=0
    )
    match = re.search(r"Stream #\S+.*?: Video: (\w+)[^,]*, (\w+)[^,]*(?:\([^)]*\))?, (\d+)x(\d+)", completed.stderr)
    if match is None:
        raise ValueError(f"{path}: ffmpeg finds no video stream in it: {completed.stderr.strip()[-500:]}")
    codec, pix_fmt, width, height = match.groups()
    return {"codec": codec, "pix_fmt": pix_fmt, "width": int(width), "height": int(height)}


def first_frame(path: str | Path) -> np.ndarray:
    """The first frame of a video as a (height, width, 3) uint8 array."""
    stream = video_stream(path)
    completed = subprocess.run(
        [
            ffmpeg_executable(),
            "-v",
            "error",
            "-i",
            str(path),
            "-frames:v",
            "1",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-",
        ],
        capture_output=True,
        process_group=0,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"ffmpeg could not decode {path}: {completed.stderr.decode(errors='replace')}")
    return np.frombuffer(completed.stdout, np.uint8).reshape(stream["height"], stream["width"], 3)
