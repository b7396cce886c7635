"""The checkpoint writer's thread (purehr/run/writer.py) and the one-shot programs' compiler
options (purehr/run/program.py): jobs run in order, a failure stops the later ones and is
kept for the recorder, a second Ctrl-C drops what is queued; the initial states compiled
for compile time are bit-identical to XLA's default."""

import os
import subprocess
import sys
import threading

import pytest

from purehr.run.writer import PENDING_JOBS, BackgroundWriter


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
from purehr.run.checkpoints import tree_digest
from purehr.run.program import initial_runners
from purehr.run.task_setup import build_task_setup
from purehr.ppo.trainer import keys_for_seeds
from purehr.tasks import SWING_DEFAULTS
seeds = [0, 1, 2]
tiny_swing = SWING_DEFAULTS.replace(num_envs=8, num_steps=16, minibatch_size=64, total_timesteps=1024)
for task, config in (("hrv", HRV_TINY), ("swing", tiny_swing)):
    setup = build_task_setup(task, config)
    fast = initial_runners([setup], seeds)[task]
    plain = jax.jit(jax.vmap(setup.ppo.init))(keys_for_seeds(seeds))
    print(task, tree_digest(fast) == tree_digest(plain))
"""
    environ = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    environ["PYTHONPATH"] = os.path.dirname(__file__)
    environ["PUREHR_TEST_XLA_DEFAULT"] = "1"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environ, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["hrv", "True", "swing", "True"]
