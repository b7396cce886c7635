"""benchmarks/colab_quickstart.ipynb, executed top to bottom on CPU with a tiny budget, so
it cannot rot: the checkout it runs in is used as it is (no clone, no pip install: the
notebook is told to refuse installs), the training cell trains one hrv seed for one update."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

from purehr.tasks import HRV_DEFAULTS, SWING_DEFAULTS

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "benchmarks" / "colab_quickstart.ipynb"
TINY_RUN = (
    "--num-envs 8 --num-steps 64 --minibatch-size 128 --num-epochs 1 --actor-hidden 16 "
    "--critic-hidden 16 --eval-episodes 4 --no-progress"
)


def _execute(working_dir: Path, monkeypatch, **environment: str) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel started in ``working_dir``, with ``environment`` set."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(working_dir)}}
    )
    client.execute()
    return notebook


def _text(cell) -> str:
    return "".join(output.get("text", "") for output in cell.get("outputs", []))


@pytest.mark.slow  # a Jupyter kernel: a subprocess
def test_notebook_runs_top_to_bottom_on_cpu(tmp_path, monkeypatch):
    run_dir = tmp_path / "colab"
    monkeypatch.delenv("PUREHR_NOTEBOOK_THROUGHPUT", raising=False)  # the default: not measured
    # the kernel starts in the checkout: it is used as it is (no clone), and the installs are
    # skipped because jax and purehr are already there (PUREHR_NOTEBOOK_INSTALL=never would
    # turn any install into an error)
    notebook = _execute(
        REPO,
        monkeypatch,
        PUREHR_NOTEBOOK_STEPS="512",
        PUREHR_NOTEBOOK_TASKS="hrv",
        PUREHR_NOTEBOOK_SEEDS="0",
        PUREHR_NOTEBOOK_ARGS=TINY_RUN,
        PUREHR_NOTEBOOK_RUN_DIR=str(run_dir),
        PUREHR_NOTEBOOK_INSTALL="never",
        PUREHR_REPO_URL="",
    )
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(output.get("output_type") != "error" for cell in code for output in cell.outputs)
    outputs = "\n".join(_text(cell) for cell in code)
    assert f"using the checkout {REPO}" in outputs
    assert "jax 0.10.2 is installed for cpu" in outputs and "purehr is importable from" in outputs
    assert "$ " + sys.executable in outputs  # the kernel's own python trained
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["tasks"] == ["hrv"]
    assert f"3 figures in {run_dir / 'figures'}" in outputs  # hrv learning figure, training log, statistics
    assert "no replay: the swing task was not trained in this run" in outputs
    assert "throughput not measured: set RUN_THROUGHPUT = True" in outputs  # opt-in (PUREHR_NOTEBOOK_THROUGHPUT unset)
    table = next(output for output in code[-2].outputs if output.get("output_type") == "display_data")
    assert "<td>hrv</td><td>0</td><td>512</td>" in table["data"]["text/html"]


def test_the_defaults_say_what_they_teach_and_the_throughput_cell_is_opt_in(monkeypatch):
    """User path 9: the notebook said 10M swing steps (not the protocol's budget), its 100k default
    taught the swing nothing without saying so, and its 32 x 2,048 throughput cell ran by
    default. The settings cell runs here alone, with no PUREHR_NOTEBOOK_* variable set."""
    for name in [name for name in os.environ if name.startswith("PUREHR_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(REPO)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    settings: dict = {}
    exec(compile(notebook.cells[1].source, "settings cell", "exec"), settings)
    assert settings["RUN_THROUGHPUT"] is False and settings["STEPS"] == "100000"
    text = "\n".join(cell.source for cell in notebook.cells)
    budgets = f"swing {SWING_DEFAULTS.total_timesteps / 1e6:g}M, hrv {HRV_DEFAULTS.total_timesteps // 1000}k"
    assert "10M" not in text and budgets in text  # the protocol's budgets, whatever they are
    assert "teaches hrv, not the swing" in notebook.cells[0].source and "1.5M" in notebook.cells[0].source
    assert "set `RUN_THROUGHPUT = True`" in notebook.cells[12].source


@pytest.mark.slow
def test_notebook_stops_at_once_without_a_repository(tmp_path, monkeypatch):
    """Outside a checkout, with REPO_URL unset, the first code cell stops "Run all" with the
    reason instead of failing three cells later."""
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="REPO_URL is not set"):
        _execute(tmp_path, monkeypatch, PUREHR_REPO_URL="", PUREHR_NOTEBOOK_INSTALL="never")
