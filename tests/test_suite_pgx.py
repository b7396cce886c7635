"""The pgx suite (issue 52, item 1: "the adapters of suites that have masks pass them through; a
pgx game as a shipped example with a test"): ``pgx:tic_tac_toe`` against a random legal
opponent, pgx's legal moves as the observation's ``"action_mask"``. The shipped example
(examples/pgx_tic_tac_toe.py) trains through ``scripts/train_all_seeds.py``: every seed beats
the random-among-legal floor by a margin and training makes no illegal move.

Ctrl-C with the output piped (issue 52, friction 7: ``train_all_seeds.py ... | tee log`` ended
"failed" with BrokenPipeError, exit 141): the same command in a subprocess, its stdout and
stderr into ``tee``, both sent the SIGINT a terminal's Ctrl-C sends its foreground group; the
run ends "interrupted" with 130, and ``--resume`` ends with the uninterrupted run's checkpoint
digests (the resume bit-identity the issue asks of a masked game, through a real pipe).

One compiled program in this process (the example's run; the resume reuses it) and one in the
subprocess: about 40 s of CPU on the 2-core machine, more wall time when it is shared."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pgx")

from purehr.run.protocol import train_all_seeds  # noqa: E402

pytestmark = pytest.mark.slow  # a learning run and a training subprocess

REPO = Path(__file__).resolve().parents[1]
TASK = "pgx:tic_tac_toe"
SEEDS = (0, 1, 2)
FLAGS = ["--steps", "8192", "--checkpoint-interval", "2048", "--seeds", *map(str, SEEDS), "--no-render"]
"""16 updates of 32 games x 16 moves, checkpoints every 4 updates."""
MARGIN = 0.3
"""Held-out return over the random-among-legal floor. Measured at 8,192 steps: seeds 0-2 held
0.64, 0.51 and 0.42 (win rates 0.79-0.69) against the floor's 0.04 (win rate 0.45)."""
PAUSE_AT_UPDATE = 6
"""The subprocess waits at this update (of 16, after the checkpoint at update 4) for the Ctrl-C."""


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    """The example's ``main`` (scripts/train_all_seeds.py with ``--tasks pgx:tic_tac_toe``), in
    this process so that the resume below reuses its compiled program."""
    root = tmp_path_factory.mktemp("pgx")
    example = load(REPO / "examples" / "pgx_tic_tac_toe.py", "_purehr_example_pgx")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        code = example.main(["--run-dir", str(root / "run"), *FLAGS, "--no-progress"])
    return {"root": root, "run": root / "run", "code": code, "printed": printed.getvalue()}


def digests(run: Path, seed: int) -> list[str]:
    with open(run / TASK / f"seed_{seed}" / "checkpoints.csv") as file:
        return [row["state_digest"] for row in csv.DictReader(file)]


def test_tic_tac_toe_trains_through_the_cli_with_its_mask_and_beats_the_random_among_legal_floor(example_run):
    assert example_run["code"] == 0
    run = example_run["run"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["sources"][TASK]["versions"]["pgx"] == "2.6.0"
    floor = manifest["baselines"][TASK]["floors"]["random"]
    # random among the legal cells, both sides: it wins and loses about equally (0 on average; 200
    # games resolve it to about +-0.13). Random among all nine cells would lose at its first taken
    # cell: -0.88 over 20,000 games (measured), far below this range.
    assert abs(floor["return_mean"]) < 0.25 and 0.3 < floor["success_rate"] < 0.6, floor
    for seed in SEEDS:
        seed_dir = run / TASK / f"seed_{seed}"
        with open(seed_dir / "updates.csv") as file:
            updates = list(csv.DictReader(file))
        assert len(updates) == 16 and all(float(row["invalid_actions"]) == 0 for row in updates), seed
        with open(seed_dir / "checkpoints.csv") as file:
            last = list(csv.DictReader(file))[-1]
        assert int(last["actual_steps"]) == 8192
        assert float(last["eval_return_mean"]) >= floor["return_mean"] + MARGIN, (seed, last, floor)
        assert float(last["eval_success_rate"]) > floor["success_rate"], (seed, last, floor)
    printed = example_run["printed"]
    assert printed.count("illegal moves in training: 0") == len(SEEDS), printed


PAUSING_TRAINER = """
import pathlib, runpy, sys, time
import numpy as np
from purehr.run.host.recorder import RunRecorder

ready, go, script = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
logged = RunRecorder.on_update

def pausing(self, task, metrics):
    # at the update the test waits for: say so, then wait for the Ctrl-C and for the reader's end
    if int(np.asarray(metrics["update"])[0]) == {update} and not ready.exists():
        ready.touch()
        deadline = time.monotonic() + 300
        while not (self.stop_requested and go.exists()) and time.monotonic() < deadline:
            time.sleep(0.02)
    return logged(self, task, metrics)

RunRecorder.on_update = pausing
sys.argv = [script, *sys.argv[4:]]
runpy.run_path(script, run_name="__main__")
""".replace("{update}", str(PAUSE_AT_UPDATE))


@pytest.mark.skipif(shutil.which("tee") is None, reason="needs tee")
def test_ctrl_c_with_the_output_piped_to_tee_marks_the_run_interrupted_and_resumes_bit_identical(example_run):
    """``train_all_seeds.py ... 2>&1 | tee log`` in a process group of its own, then the
    terminal's Ctrl-C: SIGINT to the group. The trainer waits at update 6 until the signal has
    reached it and tee has ended, so that everything it writes after the signal meets a pipe
    with no reader (the order in which the issue's run failed)."""
    root = example_run["root"]
    run, log, ready, go = root / "piped", root / "piped.log", root / "ready", root / "go"
    command = [sys.executable, "-c", PAUSING_TRAINER, str(ready), str(go), str(REPO / "scripts" / "train_all_seeds.py")]
    command += ["--tasks", TASK, "--run-dir", str(run), *FLAGS]
    # a process group of their own, as a shell's job: the trainer leads it, tee joins it
    trainer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, process_group=0)
    tee = subprocess.Popen(
        ["tee", str(log)], stdin=trainer.stdout, stdout=subprocess.DEVNULL, process_group=trainer.pid
    )
    trainer.stdout.close()  # tee is the pipe's only reader
    try:
        deadline = time.monotonic() + 400
        while not ready.exists() and trainer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), f"the trainer never reached update {PAUSE_AT_UPDATE}:\n{log.read_text()[-3000:]}"
        os.killpg(trainer.pid, signal.SIGINT)  # Ctrl-C: the trainer and tee
        assert tee.wait(timeout=60) == -signal.SIGINT
        go.touch()
        code = trainer.wait(timeout=300)
    finally:
        for process in (trainer, tee):
            if process.poll() is None:
                process.kill()
                process.wait()
    written = log.read_text()
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == 130, (code, manifest.get("error"), written[-3000:])
    assert manifest["status"] == "interrupted", (manifest["status"], manifest.get("error"))
    with open(run / TASK / "seed_0" / "updates.csv") as file:
        assert len(list(csv.DictReader(file))) < 16  # it stopped before the end
    with contextlib.redirect_stderr(io.StringIO()):
        train_all_seeds(run, resume=True, progress=False)
    assert json.loads((run / "manifest.json").read_text())["status"] == "finished"
    for seed in SEEDS:
        resumed = digests(run, seed)
        assert resumed == digests(example_run["run"], seed) and len(resumed) == 5 and all(resumed), seed
