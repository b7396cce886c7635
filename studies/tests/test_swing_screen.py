"""Command-line checks of studies/scripts/swing_screen.py that need no simulation (moved from
tests/test_swing_scripts.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "studies" / "scripts"


def load(name: str):
    """Import studies/scripts/<name>.py (registered in sys.modules: its dataclasses need that)."""
    module_name = f"_purehr_script_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def test_swing_screen_summary_by_hand(tmp_path):
    """Two starts (upper bounds 10 and 20 s), three seeds, seed 2 never rotating from start 1:
    the gap per start takes the median over the seeds that rotate, median over starts."""
    screen = load("swing_screen")
    nan = float("nan")
    per_seed = {
        0: {"success": 1.0, "time": 13.0},
        1: {"success": 0.99, "time": 14.5},
        2: {"success": 0.5, "time": 12.0},
    }
    rotation = np.array([[11.0, 22.0], [12.0, 26.0], [14.0, nan]])  # (seeds, starts)
    reached = {name: rotation - 1.0 for name in screen.LEVELS}
    reached["10 deg"] = np.array([[1.0, 3.0], [2.0, nan], [4.0, 5.0]])
    reached["360 deg"] = rotation
    summary = screen.screen_summary(per_seed, reached, np.array([10.0, 20.0]))
    assert (summary["median_s"], summary["worst_s"]) == (13.0, 14.5) and summary["mean_s"] == pytest.approx(39.5 / 3)
    assert summary["min_success"] == 0.5 and summary["seeds_at_095"] == 2
    assert summary["faster_than_controller"] == 1  # seed 2 is fast but below 0.95
    # per start: median(11, 12, 14) = 12 -> +20%; median(22, 26) = 24 -> +20%
    assert summary["gap_per_start"] == pytest.approx(0.2) and summary["median_start_s"] == pytest.approx(18.0)
    assert summary["reach_10deg_s"] == pytest.approx(3.0)  # per start 2 and 4: median 3
    (tmp_path / "not_a_run").mkdir()
    with pytest.raises(SystemExit, match="no manifest.json, expected a run directory"):
        screen.main([str(tmp_path / "not_a_run")])
