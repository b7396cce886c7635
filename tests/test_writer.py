"""The checkpoint writer's thread (purehr/run/host/writer.py) and the one-shot programs' compiler
options (purehr/run/compiled/program.py): jobs run in order, a failure stops the later ones and is
kept for the recorder, a second Ctrl-C drops what is queued; the initial states compiled
for compile time are bit-identical to XLA's default."""

import os
import subprocess
import sys
import threading
from typing import Any, NamedTuple

import pytest

from purehr.run.host.writer import PENDING_JOBS, BackgroundWriter


def test_jobs_run_in_order_off_the_calling_thread():
    writer, done = BackgroundWriter(), []
    for index in range(5):
        writer.submit(lambda index=index: done.append((index, threading.current_thread().name)))
    writer.close()
    assert [index for index, _ in done] == list(range(5))
    assert {name for _, name in done} == {"purehr-checkpoint-writer"}
    assert writer.failed is None and writer.seconds_writing >= 0.0


def test_a_failed_job_is_kept_and_the_later_ones_do_not_run():
    writer, done = BackgroundWriter(), []
    writer.submit(lambda: done.append(0))
    writer.submit(lambda: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    writer.submit(lambda: done.append(2))  # after a failed save nothing more is written
    writer.close()
    assert done == [0]
    assert isinstance(writer.failed, OSError) and writer.failed.errno == 28


def test_submit_waits_while_the_queue_is_full_and_abandon_drops_the_queued_jobs():
    writer, release, done = BackgroundWriter(), threading.Event(), []
    writer.submit(release.wait)  # the thread is busy with this one
    for index in range(PENDING_JOBS):
        writer.submit(lambda index=index: done.append(index))
    blocked = threading.Thread(target=writer.submit, args=(lambda: done.append("late"),))
    blocked.start()
    blocked.join(timeout=0.3)
    assert blocked.is_alive()  # a slow disk holds the program up instead of filling memory
    writer.abandoned = True  # a second Ctrl-C
    release.set()
    blocked.join(timeout=10)
    writer.close()
    assert not blocked.is_alive() and done == []


@pytest.mark.slow
def test_initial_states_compiled_for_compile_time_are_bit_identical_to_the_default():
    """In a fresh process at XLA's default level (the suite runs at level 1): ``initial_runners``
    (level 1 on the CPU) against a plain ``jax.jit`` of the same init."""
    script = """
import jax
from conftest import HRV_TINY
from purehr.run.store.checkpoints import tree_digest
from purehr.run.compiled.program import initial_runners
from purehr.run.compiled.task_setup import build_task_setup
from purehr.engine.seeds import keys_for_seeds
from purehr.tasks import SWING_DEFAULTS
seeds = [0, 1, 2]
tiny_swing = SWING_DEFAULTS.replace(num_envs=8, num_steps=16, minibatch_size=64, total_timesteps=1024)
for task, config in (("hrv", HRV_TINY), ("swing", tiny_swing)):
    setup = build_task_setup(task, config)
    fast = initial_runners([setup], seeds)[task]
    plain = jax.jit(jax.vmap(setup.algorithm.init))(keys_for_seeds(seeds))
    print(task, tree_digest(fast) == tree_digest(plain))
"""
    environ = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    environ["PYTHONPATH"] = os.path.dirname(__file__)
    environ["PUREHR_TEST_XLA_DEFAULT"] = "1"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environ, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["hrv", "True", "swing", "True"]


class _Runner(NamedTuple):
    update_index: Any


class _OrderedDashboard:
    """A stand-in for ``purehr.tracking.Tracking`` that keeps the order of what it is handed."""

    def __init__(self):
        self.logged: list[tuple[str, int, int]] = []

    def update(self, task, seed, row):
        self.logged.append(("update", seed, int(row["env_steps"])))

    def checkpoint(self, task, seed, row):
        self.logged.append(("heldout", seed, int(row["actual_steps"])))

    def sync(self):
        pass


def test_a_checkpoints_heldout_row_reaches_the_dashboards_before_the_next_update_while_its_files_wait(tmp_path):
    """W&B takes no step back: a held-out row logged after a later update's row is dropped. The
    writer may lag the program by a checkpoint or two, so the dashboards hear the checkpoint
    from the callback itself; its files and CSV rows follow in the writer's thread."""
    from types import SimpleNamespace

    import numpy as np

    from purehr.run.host.recorder import RunRecorder
    from purehr.run.store.files import read_csv
    from purehr.run.store.run_dir import RunDirectory

    config = SimpleNamespace(batch_size=64, total_timesteps=64 * 4)
    protocol = SimpleNamespace(checkpoint_interval=128)
    setup = SimpleNamespace(name="t", config=config, protocol=protocol, algorithm=SimpleNamespace(num_updates=4))
    run_dir = RunDirectory(tmp_path / "run")
    recorder = RunRecorder(run_dir, [setup], [0, 1])
    recorder.tracking = _OrderedDashboard()
    release = threading.Event()
    recorder.writer.submit(release.wait)  # a slow disk: the writer is busy until released

    def update(index):
        recorder.on_update("t", {"update": np.array([index, index]), "loss": np.array([0.5, 0.25])})

    update(1)
    update(2)
    runner = _Runner(update_index=np.array([2, 2]))  # what the recorder reads of a RunnerState
    recorder.on_checkpoint("t", runner, {"return_mean": np.array([1.0, 2.0])}, None)
    update(3)
    assert not (run_dir.seed_dir("t", 0) / "checkpoints.csv").exists()  # the files wait for the writer
    release.set()
    recorder.finish()
    seed_0 = [entry for entry in recorder.tracking.logged if entry[1] == 0]
    assert seed_0 == [("update", 0, 64), ("update", 0, 128), ("heldout", 0, 128), ("update", 0, 192)]
    [row] = read_csv(run_dir.seed_dir("t", 1) / "checkpoints.csv")
    assert (int(row["actual_steps"]), float(row["eval_return_mean"])) == (128, 2.0)
    assert [r["update"] for r in read_csv(run_dir.seed_dir("t", 1) / "updates.csv")] == ["1", "2", "3"]
