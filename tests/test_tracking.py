"""Dashboards (``--log tensorboard wandb``): the naming, the rule that keeps a backend exact
across resumes, a failing or stalled backend, the seed API and sweeps, and the bad inputs
refused before anything is compiled. The kill-and-resume test of a logged protocol run is in
tests/test_run.py (its killed run logs to both; tests/dashboard_checks.py reads them back)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from purehr.run.protocol import train_all_seeds
from purehr.tracking import Tracking, TrackingSettings
from purehr.tracking.backend import ALL_TAGS, Backend
from purehr.tracking.naming import heldout_scalars, history, update_scalars, update_tag

pytest.importorskip("tensorboardX")
pytest.importorskip("wandb")
from dashboard_checks import scalars  # noqa: E402  (reads TensorBoard's files: after the skip)

ROOT = Path(__file__).resolve().parents[1]
TASK = "hrv"


# --- naming and the exactly-once rule ----------------------------------------------------------


def test_columns_are_named_by_group_and_merged_by_step():
    assert [update_tag(c) for c in ("approx_kl", "grad_norm", "mean_episode_return", "elapsed_s", "mean_distance")] == [
        "train/approx_kl",
        "train/grad_norm",
        "rollout/mean_episode_return",
        "time/elapsed_s",
        "env/mean_distance",
    ]
    update = {"update": 2, "env_steps": 1024, "loss": 0.5, "mean_episode_return": float("nan")}
    assert set(update_scalars(update)) == {"train/loss", "rollout/mean_episode_return"}  # NaN kept, axis not
    checkpoint = {"actual_steps": 1024, "target_steps": 1000, "eval_success_rate": 1.0, "state_digest": "ab"}
    assert heldout_scalars(checkpoint) == {"heldout/success_rate": 1.0}
    merged = history([{"env_steps": 512, "loss": 1.0}, update], [{"actual_steps": 0, "eval_x": 3.0}, checkpoint])
    assert [step for step, _ in merged] == [0, 512, 1024]
    assert set(merged[2][1]) == {"train/loss", "rollout/mean_episode_return", "heldout/success_rate"}
    assert merged[2][1]["heldout/success_rate"] == 1.0 and np.isnan(merged[2][1]["rollout/mean_episode_return"])


class Recording(Backend):
    """A backend that keeps what it is given (and holds ``held`` already)."""

    name = "recording"

    def __init__(self, held=None, fail_at=None):
        super().__init__()
        self.given_held, self.fail_at, self.logged = held or {}, fail_at, []

    def held_steps(self, task, seed):
        return self.given_held

    def _open(self, task, seed, run, start):
        self.start = start

    def _log(self, task, seed, step, scalars):
        if step == self.fail_at:
            raise OSError("No space left on device")
        self.logged.append((step, dict(scalars)))


def test_a_backend_is_given_only_the_steps_after_those_it_holds():
    kept = ([{"env_steps": s, "loss": float(s)} for s in (512, 1024, 1536)], [{"actual_steps": 0, "eval_r": 1.0}])
    per_tag = Recording({"train/loss": 1024, "heldout/r": 0})  # TensorBoard: per tag
    whole = Recording({ALL_TAGS: 512})  # W&B: whole steps
    tracking = Tracking([per_tag, whole], say=lambda message: None)
    tracking.open({("t", 0): {}}, {("t", 0): kept})
    tracking.update("t", 0, {"env_steps": 1024, "loss": 1024.0})  # trained again after the resume
    tracking.update("t", 0, {"env_steps": 2048, "loss": 2048.0})
    tracking.close()
    assert per_tag.start == whole.start == "resumed"
    assert per_tag.logged == [(1536, {"train/loss": 1536.0}), (2048, {"train/loss": 2048.0})]
    assert whole.logged == [
        (1024, {"train/loss": 1024.0}),
        (1536, {"train/loss": 1536.0}),
        (2048, {"train/loss": 2048.0}),
    ]


def test_a_failing_backend_is_said_once_and_dropped_while_the_others_go_on():
    failing, healthy, said = Recording(fail_at=1024), Recording(), []
    healthy.name = "healthy"
    tracking = Tracking([failing, healthy], say=said.append)
    tracking.open({("t", 0): {}}, {})
    for step in (512, 1024, 1536, 2048):
        tracking.update("t", 0, {"env_steps": step, "loss": 1.0})
    tracking.sync()
    tracking.close()
    assert [step for step, _ in failing.logged] == [512]
    assert [step for step, _ in healthy.logged] == [512, 1024, 1536, 2048]
    assert len(said) == 1 and "recording logging failed" in said[0] and "No space left on device" in said[0]
    assert tracking.failed == {"recording": "OSError: No space left on device"}


# --- bad input, refused before anything is compiled --------------------------------------------


def test_an_unknown_backend_lists_the_choices():
    with pytest.raises(ValueError, match="unknown backend; expected one or more of tensorboard, wandb"):
        TrackingSettings.checked(["tensorbord"])
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train_all_seeds.py"), "--log", "mlflow"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "invalid choice: 'mlflow'" in result.stderr and "tensorboard" in result.stderr


def test_a_missing_package_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(
        ValueError, match=r"--log wandb needs wandb, which is not installed: pip install .*\.\[tracking\]"
    ):
        TrackingSettings.checked(["tensorboard", "wandb"])


def test_an_unwritable_or_taken_log_dir_is_refused_before_the_run_starts(tmp_path):
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    settings = TrackingSettings(backends=("tensorboard",), log_dir=str(blocked / "logs"))
    with pytest.raises(ValueError, match="is a file, not a directory"):
        train_all_seeds(tmp_path / "run", tasks=[TASK], seeds=[0], log=settings, progress=False)
    taken = tmp_path / "taken"
    (taken / TASK / "seed_0").mkdir(parents=True)
    (taken / TASK / "seed_0" / "events.out.tfevents.1.host").write_bytes(b"")
    with pytest.raises(ValueError, match=r"already holds TensorBoard runs under hrv/seed_0"):
        train_all_seeds(tmp_path / "run", tasks=[TASK], seeds=[0], log=settings.__class__(("tensorboard",), str(taken)))
    assert not (tmp_path / "run").exists()  # refused before the run directory was touched
    with pytest.raises(ValueError, match="--wandb-mode 'cloud'"):
        TrackingSettings(backends=("wandb",), wandb_mode="cloud").validated()


def test_wandb_is_offline_unless_asked(monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert TrackingSettings().resolved_wandb_mode() == "offline"
    monkeypatch.setenv("WANDB_MODE", "online")
    assert TrackingSettings().resolved_wandb_mode() == "online"
    assert TrackingSettings(wandb_mode="offline").resolved_wandb_mode() == "offline"


def test_explained_variance_by_hand():
    from purehr.algorithms.ppo.algorithm import explained_variance

    targets = np.float32([1.0, 2.0, 3.0, 4.0])  # Var = 1.25
    values = np.float32([1.0, 2.0, 3.0, 5.0])  # residuals 0, 0, 0, -1: Var = 0.1875
    assert float(explained_variance(values, targets)) == pytest.approx(1 - 0.1875 / 1.25, abs=1e-6)
    assert np.isnan(float(explained_variance(values, np.ones(4, np.float32))))  # nothing to explain


def test_the_seed_api_logs_each_update_at_its_env_steps(tmp_path):
    """``train_hr_ppo(..., log=...)``'s host callback (what make_train calls after each update)
    writes the one seed's metrics to its TensorBoard run."""
    from purehr.model.facade import _api_tracking, _seed_callback
    from purehr.tasks import HRV_DEFAULTS

    tracking = _api_tracking("tensorboard", tmp_path / "logs", "hrv", 3, HRV_DEFAULTS)
    on_update = _seed_callback(None, None, "hrv", tracking, seed=3)
    for update in (1, 2):
        on_update(
            {"update": np.int32([update]), "env_steps": np.int64([update * 2048]), "loss": np.float32([0.5 * update])}
        )
    tracking.close()
    assert scalars(tmp_path / "logs" / "hrv" / "seed_3", "train/loss") == [(2048, 0.5), (4096, 1.0)]
    with pytest.raises(ValueError, match=r"already holds TensorBoard runs under hrv/seed_3"):
        _api_tracking("tensorboard", tmp_path / "logs", "hrv", 3, HRV_DEFAULTS)  # never mixed with another run


def test_a_task_without_success_gets_no_success_tag(tmp_path):
    """Issue 63 F13: a task whose environment defines no success had a ``heldout/success_rate``
    curve of NaNs (and a training one of zeros, and an hparams column) on TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from purehr.model.facade import _api_tracking
    from purehr.tasks import HRV_DEFAULTS

    for success, name in ((False, "none"), (True, "some")):
        tracking = _api_tracking("tensorboard", tmp_path / name, "hrv", 0, HRV_DEFAULTS, success)
        tracking.update("hrv", 0, {"env_steps": 512, "loss": 0.5, "train_success_rate": 0.0})
        rate = float("nan") if not success else 0.25
        tracking.checkpoint("hrv", 0, {"actual_steps": 512, "eval_success_rate": rate, "eval_return_mean": 2.0})
        tracking.close()
        accumulator = EventAccumulator(str(tmp_path / name / "hrv" / "seed_0"), size_guidance={"scalars": 0})
        accumulator.Reload()
        tags = set(accumulator.Tags()["scalars"])
        assert {"train/loss", "heldout/return_mean"} <= tags
        assert ({"heldout/success_rate", "rollout/train_success_rate"} <= tags) == success, tags
        assert (b"success_rate" in b"".join(p.read_bytes() for p in (tmp_path / name).rglob("events*"))) == success


def test_a_sweep_logs_every_setting_and_seed_with_its_final_evaluation(tmp_path):
    from purehr.experiments.group_result import GroupResult
    from purehr.experiments.sweep_dashboards import log_group
    from purehr.tasks import HRV_DEFAULTS

    config = HRV_DEFAULTS.replace(num_envs=4, num_steps=8, minibatch_size=16, total_timesteps=3 * 32)
    settings = [{"learning_rate": 0.001}, {"learning_rate": 0.003}]
    runs = 4  # settings x seeds, setting-major
    loss = np.arange(runs * 3, dtype=np.float32).reshape(runs, 3)
    update = np.tile(np.int32([1, 2, 0]), (runs, 1))  # the third update after a stop: not logged
    group = GroupResult(
        "default",
        config,
        settings,
        [0, 1],
        None,
        {"update": update, "loss": loss},
        {"success_rate": np.float32([0, 1, 0.5, 1])},
    )
    log_group(TrackingSettings(("tensorboard",)), tmp_path, "hrv", group)
    folder = tmp_path / "tensorboard" / "hrv" / "default" / "learning_rate=0.003" / "seed_1"  # run 3
    assert scalars(folder, "train/loss") == [(32, 9.0), (64, 10.0)]
    assert scalars(folder, "heldout/success_rate") == [(96, 1.0)]


def test_a_stalled_backend_holds_up_neither_sync_nor_the_others():
    import threading

    release = threading.Event()

    class Stalled(Recording):
        name, synced = "stalled", False  # as W&B online without a network

        def _log(self, task, seed, step, scalars):
            release.wait(60)
            super()._log(task, seed, step, scalars)

    stalled, healthy = Stalled(), Recording()
    tracking = Tracking([stalled, healthy], say=lambda message: None)
    tracking.open({("t", 0): {}}, {})
    tracking.update("t", 0, {"env_steps": 512, "loss": 1.0})
    started = time.perf_counter()
    tracking.sync()  # what a checkpoint waits for: the synced backend only
    # far less than the stalled backend's 60 s, with room for a loaded machine
    assert time.perf_counter() - started < 30 and healthy.logged == [(512, {"train/loss": 1.0})]
    assert stalled.logged == []
    release.set()
    tracking.close()
    assert stalled.logged == [(512, {"train/loss": 1.0})]


def test_wandb_failing_for_real_is_said_once_and_tensorboard_beside_it_goes_on(tmp_path):
    from purehr.tracking import start_tracking

    (tmp_path / "wandb").write_text("")  # W&B cannot make its folder: what a full or read-only disk does
    settings = TrackingSettings(("tensorboard", "wandb")).validated().with_run_ids(["t"], [0])
    said = []
    run = {"config": {}, "identity": {}, "wandb_id": settings.run_id("t", 0)}
    tracking = start_tracking(settings, tmp_path, "group", {("t", 0): run}, say=said.append)
    for step in (512, 1024):
        tracking.update("t", 0, {"env_steps": step, "loss": step / 1024})
    tracking.close()
    assert len(said) == 1 and said[0].startswith("warning: wandb logging failed (open: NotADirectoryError")
    assert scalars(tmp_path / "tensorboard" / "t" / "seed_0", "train/loss") == [(512, 0.5), (1024, 1.0)]


# --- who owns a log dir (issue 48) ---------------------------------------------------------------


def test_a_log_dir_run_folder_is_claimed_by_exactly_one_of_runs_starting_at_once(tmp_path, monkeypatch):
    """Defect 3: the check and the claim are one step (an exclusive create), so of runs that
    all found the folder free (each waits after its check until all have checked) exactly one
    gets it; the claim is the owner's again on its resume, and nobody else's."""
    import threading

    from purehr.tracking import claims
    from purehr.tracking.claims import Owner, take_claim

    folder, runs = tmp_path / "shared" / "hrv" / "seed_0", 8
    all_checked, checked, problems = threading.Barrier(runs), threading.local(), [None] * runs
    check = claims.claim_problem

    def check_then_wait(*arguments):
        problem = check(*arguments)
        if not getattr(checked, "once", False):
            checked.once = True
            all_checked.wait(30)
        return problem

    monkeypatch.setattr(claims, "claim_problem", check_then_wait)

    def claim(index):
        problems[index] = take_claim(folder, Owner(f"run{index:05d}", str(tmp_path / f"run{index}")))

    threads = [threading.Thread(target=claim, args=(index,)) for index in range(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    monkeypatch.undo()
    winners = [index for index, problem in enumerate(problems) if problem is None]
    assert len(winners) == 1, problems
    assert all("claimed by another run" in problem for problem in problems if problem is not None)
    winner = Owner(f"run{winners[0]:05d}", str(tmp_path / f"run{winners[0]}"))
    (folder / "events.out.tfevents.1.host").write_bytes(b"")  # it logged
    assert take_claim(folder, winner) is None  # its resume
    assert take_claim(folder, Owner("another0", str(tmp_path / "x"))) == "already holds TensorBoard runs"


def test_a_claim_whose_write_fails_leaves_no_claim_and_an_empty_one_names_its_way_out(tmp_path, monkeypatch):
    """Issue 63 D4: a claim is whole or absent. A failed write (a full disk) left an empty
    claim file that refused the run's own resume, and every other run, for good."""
    import errno

    from purehr.tracking import claims
    from purehr.tracking.claims import CLAIM_FILE, Owner, take_claim

    folder, owner = tmp_path / "shared" / "hrv" / "seed_0", Owner("run00001", str(tmp_path / "run1"))
    real_write = claims._write_claim_text

    def full_disk(path, text):
        path.write_text("")  # what a full disk leaves: the file, without its text
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(claims, "_write_claim_text", full_disk)
    with pytest.raises(OSError, match="No space left"):
        take_claim(folder, owner)
    monkeypatch.setattr(claims, "_write_claim_text", real_write)
    assert sorted(path.name for path in folder.iterdir()) == []  # neither the claim nor its temporary
    assert take_claim(folder, owner) is None  # once space is freed, the run goes on
    assert take_claim(folder, owner) is None  # and its resume finds its own claim
    assert claims.read_claim(folder)["owner"] == "run00001"
    (folder / CLAIM_FILE).write_text("")  # an empty claim left by an older purehr
    problem = take_claim(folder, Owner("run00002", str(tmp_path / "run2")))
    assert str(folder / CLAIM_FILE) in problem and f"delete {folder / CLAIM_FILE}" in problem, problem


def test_two_writers_of_a_run_folder_in_one_second_keep_both_event_files(tmp_path, monkeypatch):
    """Defect 3: tensorboardX names an event file by the second and the host; a second writer
    in the same second (a resume right after a kill) truncated the first one's file; the two are
    read in the order they were written (TensorBoard reads a folder's files by name)."""
    import types

    import tensorboardX.event_file_writer

    import purehr.tracking.tensorboard
    from purehr.tracking.tensorboard import TensorBoardBackend

    monkeypatch.setattr(tensorboardX.event_file_writer, "time", types.SimpleNamespace(time=lambda: 1.7e9))
    # the process's 10th and 11th writers: a count in the name without fixed width sorts "10" before "9"
    monkeypatch.setattr(purehr.tracking.tensorboard, "_WRITERS", itertools.count(9))
    for step in (512, 1024):
        tracking = Tracking([TensorBoardBackend(tmp_path)], say=lambda message: None)
        tracking.open({("t", 0): {"config": {}, "identity": {}, "resumed_from_steps": 512}}, {})
        tracking.update("t", 0, {"env_steps": step, "loss": step / 1024})
        tracking.close()
    assert len(list((tmp_path / "t" / "seed_0").glob("events.out.tfevents.*"))) == 2
    assert scalars(tmp_path / "t" / "seed_0", "train/loss") == [(512, 0.5), (1024, 1.0)]


def test_a_full_log_disk_is_one_line_without_a_thread_traceback(tmp_path, monkeypatch):
    """Weak row: tensorboardX's own writer thread hit ENOSPC and printed its traceback (and the
    file's buffer another at exit); now one warning line, the backend off, the run going on."""
    import gc
    import threading

    import tensorboardX.record_writer

    from purehr.tracking.tensorboard import TensorBoardBackend

    thread_errors, unraisable, said = [], [], []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    monkeypatch.setattr(tensorboardX.record_writer, "open_file", lambda path: open("/dev/full", "wb"))  # ENOSPC
    monkeypatch.setattr(TensorBoardBackend, "FLUSH_SECS", 0.01)  # its thread flushes at once
    tracking = Tracking([TensorBoardBackend(tmp_path)], say=said.append)
    tracking.open({("t", 0): {"config": {}, "identity": {}}}, {})
    tracking.update("t", 0, {"env_steps": 512, "loss": 0.5})
    time.sleep(0.5)  # the writer thread has written and flushed
    tracking.sync()  # what a checkpoint waits for: it returns
    tracking.update("t", 0, {"env_steps": 1024, "loss": 1.0})
    tracking.close()
    gc.collect()
    assert thread_errors == [] and unraisable == []
    assert len(said) == 1 and said[0].startswith("warning: tensorboard logging failed"), said
    assert "No space left on device" in said[0] and "\n" not in said[0]
    assert "tensorboard" in tracking.failed
