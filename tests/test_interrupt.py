"""Ctrl-C (SIGINT) during training: the run stops at its next update, its manifest says
"interrupted", the command line prints the resume command and exits 130 without a traceback,
and ``--resume`` ends bit-identical to the uninterrupted run. A second Ctrl-C does not wait.
A run whose training ended (its manifest not yet "finished") resumes without compiling."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import PROTOCOL_CLI, PROTOCOL_SEEDS, PROTOCOL_TASKS, ctrl_c_from_a_callback

from purehr.run import protocol
from purehr.run.compiled import program
from purehr.run.host.recorder import RunRecorder
from purehr.run.protocol import train_all_seeds
from purehr.run.store.files import read_csv

ROOT = Path(__file__).resolve().parents[1]
CLI = PROTOCOL_CLI + ["--seeds", "0", "1", "--no-render", "--no-progress"]
UPDATES = 32  # PROTOCOL_SMALL: 16,384 steps of 512


def digests(run: Path, task: str, seed: int) -> list[str]:
    return [row["state_digest"] for row in read_csv(run / task / f"seed_{seed}" / "checkpoints.csv")]


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, protocol_reference):
    """The command line (``scripts/train_all_seeds.py``'s ``main``), run in this process so that
    it trains with the reference's compiled program, sent one SIGINT, as a terminal's Ctrl-C
    reaches it, at its first swing update after its second checkpoint."""
    run_dir = tmp_path_factory.mktemp("interrupt") / "run"
    spec = importlib.util.spec_from_file_location("train_all_seeds_script", ROOT / "scripts" / "train_all_seeds.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    signalled = {}
    logged = RunRecorder.on_update

    def interrupting(self, task, metrics):
        if task == "swing" and int(np.asarray(metrics["update"])[0]) == 7 and not signalled:
            ctrl_c_from_a_callback(self)
            signalled["at"] = time.perf_counter()
        return logged(self, task, metrics)

    handler = signal.getsignal(signal.SIGINT)
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunRecorder, "on_update", interrupting)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                returncode = script.main(["--run-dir", str(run_dir)] + CLI)
        finally:
            signal.signal(signal.SIGINT, handler)  # the script ignores SIGINT once it has stopped
    signalled["exited_after_s"] = time.perf_counter() - signalled.get("at", time.perf_counter())
    return {
        "run_dir": run_dir,
        "reference": protocol_reference["summary"],
        "returncode": returncode,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "signalled": signalled,
    }


def test_ctrl_c_stops_at_the_next_update_marks_the_run_interrupted_and_exits_130(interrupted):
    stderr = interrupted["stderr"]
    assert "at" in interrupted["signalled"], stderr[-3000:]
    assert interrupted["returncode"] == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    run_dir = interrupted["run_dir"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    # it stopped well before the end (the signal came at update 7 of 32)
    logged = [len(read_csv(run_dir / task / "seed_0" / "updates.csv")) for task in PROTOCOL_TASKS]
    assert max(logged) < UPDATES, logged
    # it says where it resumes, and how, with the interpreter that ran it
    assert "--resume" in stderr and sys.executable in stderr
    assert "A resume continues" in stderr


def test_the_resume_after_ctrl_c_is_bit_identical_to_an_uninterrupted_run(interrupted, capsys):
    run_dir, reference = interrupted["run_dir"], interrupted["reference"]
    assert interrupted["returncode"] == 130, interrupted["stderr"][-3000:]
    resumed = train_all_seeds(run_dir, resume=True, progress=False)
    assert json.loads((run_dir / "manifest.json").read_text())["resumes"][-1]["status_before"] == "interrupted"
    for task in PROTOCOL_TASKS:
        for seed in PROTOCOL_SEEDS:
            assert digests(run_dir, task, seed) == digests(reference.run_dir, task, seed), (task, seed)
        for ours, theirs in zip(
            jax.tree.leaves(resumed.final_runners[task]), jax.tree.leaves(reference.final_runners[task])
        ):
            assert np.array_equal(np.asarray(ours), np.asarray(theirs)), task


def test_a_second_ctrl_c_does_not_wait_for_the_program_to_stop():
    """The first SIGINT asks the program to stop at its next update; the second, while it has
    not, raises at once (the command line then exits 130 without waiting). Ordered by events,
    not by a clock, so a loaded machine cannot fail it: the second is sent once the first was
    heard, and the program is still running when the second raises."""
    asked, heard, running, stopped = [], threading.Event(), threading.Event(), threading.Event()

    def long_update():  # a program whose next update is far away
        running.set()
        stopped.wait(30)
        running.clear()

    def send_two_interrupts():
        running.wait(60)
        time.sleep(0.3)  # the main thread is in CtrlC's wait (a signal before it is a bare KeyboardInterrupt)
        os.kill(os.getpid(), signal.SIGINT)
        heard.wait(60)
        os.kill(os.getpid(), signal.SIGINT)

    def on_first():
        asked.append(running.is_set())
        heard.set()

    ctrl_c = program.CtrlC(on_first)
    threading.Thread(target=send_two_interrupts, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        ctrl_c.run(long_update)
    still_running = running.is_set() and ctrl_c.abandoned is not None and ctrl_c.abandoned.is_alive()
    stopped.set()
    assert asked == [True]  # the first asked the running program to stop, once
    assert still_running  # the second raised without waiting for it


def test_a_resume_of_a_run_whose_training_ended_compiles_nothing(protocol_reference, tmp_path, monkeypatch):
    """A run stopped after its last checkpoint (manifest still "running", or "interrupted")
    has nothing left to train: its resume marks it finished without compiling the program."""
    reference = protocol_reference["summary"].run_dir
    run_dir = tmp_path / "ended"
    shutil.copytree(reference, run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["status"] = "running"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))

    def no_compiling(*args, **kwargs):
        raise AssertionError("compiled a program to train nothing")

    monkeypatch.setattr(protocol, "compiled_program", no_compiling)
    messages = io.StringIO()
    with contextlib.redirect_stderr(messages):
        summary = train_all_seeds(run_dir, resume=True, progress=False)
    assert "compiling" not in messages.getvalue()
    assert summary.compile_s == 0.0
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "finished"
    for task in PROTOCOL_TASKS:
        for seed in PROTOCOL_SEEDS:
            assert digests(run_dir, task, seed) == digests(reference, task, seed)


def test_ctrl_c_in_the_python_api_raises_run_interrupted_after_marking_the_manifest(
    protocol_reference, tmp_path, monkeypatch
):
    """SIGINT sent from inside the run (at its 5th swing update) reaches train_all_seeds as
    RunInterrupted, a KeyboardInterrupt, once the manifest says "interrupted"."""
    from conftest import protocol_configs

    from purehr.run.host.recorder import RunRecorder
    from purehr.run.outcome import RunInterrupted

    logged = RunRecorder.on_update

    def interrupting(self, task, metrics):
        if task == "swing" and int(np.asarray(metrics["update"])[0]) == 5:
            ctrl_c_from_a_callback(self)
        return logged(self, task, metrics)

    monkeypatch.setattr(RunRecorder, "on_update", interrupting)
    run_dir = tmp_path / "api"
    with pytest.raises(RunInterrupted, match="marked interrupted") as raised, contextlib.redirect_stderr(io.StringIO()):
        train_all_seeds(run_dir, tasks=PROTOCOL_TASKS, seeds=PROTOCOL_SEEDS, configs=protocol_configs(), progress=False)
    assert isinstance(raised.value, KeyboardInterrupt) and not raised.value.at_once
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["interrupted"]["waited_for_the_program"]
    assert raised.value.resumes_from == manifest["interrupted"]["resumes_from_steps"]
    assert len(read_csv(run_dir / "swing" / "seed_0" / "updates.csv")) < UPDATES


def test_ctrl_c_with_the_output_piped_to_a_reader_it_also_ended_is_an_interruption(monkeypatch, tmp_path):
    """``train_all_seeds.py ... | tee log``, then Ctrl-C: the SIGINT ends tee too, and what the
    interrupt handling writes meets a closed pipe. The stop is still asked for, the progress
    line and its notes go nowhere without raising (an error there would mark the run failed),
    and the command line exits as an interrupted run does (130), not with BrokenPipeError."""
    from purehr.run.host.progress import Progress, TaskPlan

    read, write = os.pipe()
    os.close(read)  # the reader is gone: every write to the pipe is a BrokenPipeError
    stream = os.fdopen(write, "w")
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(sys, "stdout", stream)
    recorder = RunRecorder.__new__(RunRecorder)  # only what request_stop reads
    recorder.progress, recorder.stop_requested = None, False
    recorder.request_stop()
    assert recorder.stop_requested
    bar = Progress({"hrv": TaskPlan(512, 60, 30_720, (), ())}, 1, file=stream, clock=lambda: 0.0)
    recorder.progress = bar
    bar.start()
    bar.on_update("hrv", {"mean_episode_return": np.asarray([1.0])})
    recorder.say("a warning")
    bar.close()
    spec = importlib.util.spec_from_file_location("train_all_seeds_script", ROOT / "scripts" / "train_all_seeds.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    handler = signal.getsignal(signal.SIGINT)
    try:
        args = argparse.Namespace(run_dir=tmp_path, run_name=None)
        assert script._stopped_by_ctrl_c("Ctrl-C: training stopped", args, tmp_path, "--run-dir", False) == 130
    finally:
        signal.signal(signal.SIGINT, handler)
    stream.close()  # its buffer flushes without raising


POINT_CLI = ["--seeds", "0", "--steps", "20480", "--num-envs", "4", "--num-steps", "16", "--minibatch-size", "64"]
POINT_CLI += ["--num-epochs", "1", "--actor-hidden", "8", "--critic-hidden", "8", "--checkpoint-interval", "2048"]
POINT_CLI += ["--eval-episodes", "4", "--quick-eval-episodes", "4", "--no-render", "--no-progress"]


@pytest.mark.slow
def test_sigterm_with_sigint_ignored_stops_the_run_and_its_resume_file_continues_it_from_a_fresh_shell(tmp_path):
    """Issue 63 W1, F11, F9, F6: a job started with ``&`` by a non-interactive shell ignores
    SIGINT, so the plan says Ctrl-C cannot stop it and ``kill PID`` (SIGTERM) can; SIGTERM stops
    it at the next update as Ctrl-C does (manifest "interrupted", exit 143, the resume command
    printed). The command is in RESUME.txt too, with normalised absolute paths and the
    PYTHONPATH its ``module:factory`` task came from: run as written from another directory, in
    an environment without PYTHONPATH, it finishes the run."""
    import subprocess

    modules, elsewhere = tmp_path / "modules", tmp_path / "elsewhere"
    modules.mkdir()
    elsewhere.mkdir()
    shutil.copy(ROOT / "examples" / "my_env.py", modules / "point_task.py")
    run_dir = tmp_path / "work" / ".." / "run"  # as a user may type it
    python = Path(sys.executable).parent / ".." / Path(sys.executable).parent.name / Path(sys.executable).name
    script = ROOT / "scripts" / "train_all_seeds.py"
    command = [str(python), "-W", "ignore", str(script), "--run-dir", str(run_dir), "--tasks", "point_task:make_env"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(modules), *filter(None, [os.environ.get("PYTHONPATH")])])}
    child = subprocess.Popen(  # SIGINT ignored as `sh -c 'job &'` leaves it (kept across exec; no
        # preexec_fn: a fork of this multithreaded JAX process may deadlock)
        ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command, *POINT_CLI],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    updates = tmp_path / "run" / "point_task:make_env" / "seed_0" / "updates.csv"
    deadline = time.monotonic() + 600
    while child.poll() is None and time.monotonic() < deadline:
        if updates.exists() and len(read_csv(updates)) >= 3:
            child.send_signal(signal.SIGINT)  # ignored: it trains on
            time.sleep(0.5)
            child.send_signal(signal.SIGTERM)
            break
        time.sleep(0.05)
    output = child.communicate(timeout=600)[0].decode()
    assert child.returncode == 143, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert "Ctrl-C cannot stop it (SIGINT is ignored in this process" in output, output[-3000:]
    assert f"kill {child.pid} (SIGTERM) stops it at the next update" in output
    assert "Ctrl-C stops it" not in output and "SIGTERM: training stopped" in output
    run = tmp_path / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["interrupted"]["stopped_by"] == "SIGTERM"
    assert len(read_csv(updates)) < 320  # stopped well before its 320 updates
    assert f"the command that continues it is in {run / 'RESUME.txt'}" in output
    resume = [line for line in (run / "RESUME.txt").read_text().splitlines() if not line.startswith("#")]
    assert resume == [f"PYTHONPATH={modules} {os.path.abspath(sys.executable)} {script} --run-dir {run} --resume"]
    assert f"continue it with:\n  {resume[0]}\n" in output
    fresh = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    resumed = subprocess.run(
        ["sh", str(run / "RESUME.txt")], cwd=elsewhere, env=fresh, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((run / "manifest.json").read_text())["status"] == "finished"
    assert len(read_csv(updates)) == 320
