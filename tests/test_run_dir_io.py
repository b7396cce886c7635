"""The one run-directory module: its cell format reads back exactly, its writers leave no
temporary behind, its errors are both what a caller catches, and it loads without JAX."""

from __future__ import annotations

import csv
import io
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from purehr.reports import stats
from purehr.run.store.files import (
    RunDirectoryError,
    RunDirectoryNotFound,
    atomic_output,
    atomic_write_json,
    csv_text,
    format_cell,
    json_values,
    parse_row,
    read_csv,
    read_csv_columns,
    read_npz,
    write_csv,
    write_npz,
)
from purehr.run.store.run_dir import read_manifest

REPO = Path(__file__).resolve().parents[1]


def test_cells_read_back_exactly():
    values = {
        "steps": 2048.0,
        "count": 7,
        "ratio": 0.1 + 0.2,
        "tiny": 1e-300,
        "minus_zero": -0.0,
        "missing": math.nan,
        "infinite": -math.inf,
        "float32": np.float32(0.3),
        "path": "a/b.npz",
    }
    text = csv_text(None, [values])
    assert text.splitlines()[1].split(",")[:2] == ["2048", "7"]  # whole numbers as integers
    back = parse_row(next(csv.DictReader(io.StringIO(text))), text_columns=("path",))
    for name in ("steps", "count", "ratio", "tiny", "infinite", "path"):
        assert back[name] == values[name]
    assert back["float32"] == float(np.float32(0.3)) and math.isnan(back["missing"])
    assert math.copysign(1.0, back["minus_zero"]) == -1.0
    assert format_cell(None) == "" and csv_text(["a", "b"], [{"a": 1}]) == "a,b\n1,\n"


def test_writers_are_atomic_and_leave_nothing_behind(tmp_path):
    write_csv(tmp_path / "a.csv", None, [{"x": 1.5}])
    write_npz(tmp_path / "t.npz", {"time": np.arange(3.0)})
    assert read_csv(tmp_path / "a.csv") == [{"x": "1.5"}]
    np.testing.assert_array_equal(read_npz(tmp_path / "t.npz")["time"], np.arange(3.0))
    with pytest.raises(RuntimeError), atomic_output(tmp_path / "figure.png") as partial:
        partial.write_text("half")
        raise RuntimeError("killed mid-write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "t.npz"]


def test_json_files_write_non_finite_numbers_as_null(tmp_path):
    """manifest.json and every other JSON a run writes is valid JSON (bare NaN is not, issue 48):
    a NaN or infinite number (a floor's success rate of a task without success, a return of an
    environment that produced NaN) reads back as null, as ``json_values`` says it."""
    import json

    data = {"rate": math.nan, "returns": [1.5, math.inf], "array": np.array([-np.inf, 2.0]), "n": np.float32("nan")}
    atomic_write_json(tmp_path / "manifest.json", data)
    strict = json.loads((tmp_path / "manifest.json").read_text(), parse_constant=lambda name: pytest.fail(name))
    expected = {"rate": None, "returns": [1.5, None], "array": [None, 2.0], "n": None}
    assert strict == expected and json_values(data) == expected
    # the manifest's readers (reports, figures, dashboards) get a baseline's undefined number as NaN
    baselines = {"metrics": {"success_rate": 1.0, "time_to_rotation": math.nan}, "floors": {"zero": {"time": math.inf}}}
    atomic_write_json(tmp_path / "manifest.json", {"baselines": {"swing": baselines}, "diverged": {}})
    back = read_manifest(tmp_path)["baselines"]["swing"]
    assert back["metrics"]["success_rate"] == 1.0 and math.isnan(back["metrics"]["time_to_rotation"])
    assert math.isnan(back["floors"]["zero"]["time"])


def test_one_error_type_and_a_missing_path_is_also_file_not_found(tmp_path):
    with pytest.raises(RunDirectoryNotFound, match="run directory not found") as missing:
        read_manifest(tmp_path / "absent")
    assert isinstance(missing.value, FileNotFoundError) and isinstance(missing.value, RunDirectoryError)
    (tmp_path / "manifest.json").write_text("[1]")
    with pytest.raises(RunDirectoryError, match="a JSON list, expected an object"):
        read_manifest(tmp_path)
    (tmp_path / "log.csv").write_text("env_steps,name\n1,x\n")
    assert read_csv_columns(tmp_path / "log.csv", ("name",))["name"].tolist() == ["x"]
    with pytest.raises(RunDirectoryError, match="column 'name' holds a non-number"):
        read_csv_columns(tmp_path / "log.csv", ("name",), numeric=True)


def test_tail_mean_and_t_interval():
    log = np.array([np.nan] + list(range(20)), dtype=np.float64)  # 20 finite: the last 2
    assert stats.tail_mean(log) == 18.5 and math.isnan(stats.tail_mean(np.array([np.nan])))
    summary = stats.mean_confidence_interval(np.array([1.0, 3.0, np.nan]))
    assert summary["n"] == 2 and summary["mean"] == 2.0
    assert summary["ci_high"] - 2.0 == pytest.approx(12.706204736 * 1.0)  # t(0.975, 1) * sd / sqrt(2)


def test_the_run_directory_module_loads_without_jax():
    """Scripts' --help and the renderer import it; JAX takes seconds to import."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, purehr.run.store.run_dir, purehr.reports.analysis, "
            "purehr.viz.run_data; print(sorted(m for m in ('jax', 'scipy') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert loaded.stdout.strip() == "[]", loaded.stderr
