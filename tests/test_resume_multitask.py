"""Resume of a two-task, two-seed run from directory states a kill can leave: tasks at
different checkpoints, seeds that disagree, newer folders the index does not list, half-written
saves, a task that starts over. Built by editing a copy of a finished run, so no real SIGKILL
(and no timing) is involved; and a failed checkpoint save that must not end as "finished".

The reference is the session's (tests/conftest.py), which tests/test_run.py uses too: one
training and one compiled program for both files."""

import json
import os
import shutil
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import PROTOCOL_SEEDS, PROTOCOL_TASKS, protocol_configs

from purehr.run.outcome import RunDiverged, RunFailed
from purehr.run.protocol import train_all_seeds
from purehr.run.store.checkpoints import SeedCheckpoints
from purehr.run.store.files import read_csv, write_csv
from purehr.run.store.lock import RunDirectoryBusy
from purehr.run.store.run_dir import RunDirectory
from purehr.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
SEEDS = PROTOCOL_SEEDS
TASKS = PROTOCOL_TASKS
CHECKPOINTS = [0, 3072, 6144, 9216, 12288, 15360, 16384]  # batch 512: update = steps // 512


configs = protocol_configs


@pytest.fixture(scope="module")
def reference(protocol_reference):
    return protocol_reference["summary"]


def killed_copy(reference, tmp_path: Path) -> Path:
    copy = tmp_path / "killed"
    shutil.copytree(reference.run_dir, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["status"] = "running"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def truncate_index(run: Path, task: str, seed: int, last_steps: int | None) -> None:
    """The CSVs as the killed process last wrote them: rows up to the checkpoint at
    ``last_steps`` (None: no file at all), whatever folders stay on disk."""
    seed_dir = run / task / f"seed_{seed}"
    if last_steps is None:
        (seed_dir / "checkpoints.csv").unlink()
        (seed_dir / "updates.csv").unlink()
        return
    for name, keep in (
        ("checkpoints.csv", lambda r: int(r["actual_steps"]) <= last_steps),
        ("updates.csv", lambda r: int(r["update"]) <= last_steps // 512),
    ):
        rows = read_csv(seed_dir / name)
        columns = list(rows[0])
        write_csv(seed_dir / name, columns, [r for r in rows if keep(r)])


def half_written(run: Path, task: str, seed: int, steps: int) -> None:
    """Turns a finished checkpoint folder into what a kill during its asynchronous save leaves."""
    folder = run / task / f"seed_{seed}" / "checkpoints" / str(steps)
    folder.rename(folder.with_name(f"{steps}.orbax-checkpoint-tmp-1764480000000000"))


def assert_matches_reference(summary, reference, run: Path) -> None:
    for task in TASKS:
        for leaf, expected in zip(
            jax.tree.leaves(summary.final_runners[task].params), jax.tree.leaves(reference.final_runners[task].params)
        ):
            assert np.array_equal(np.asarray(leaf), np.asarray(expected)), task
        for seed in SEEDS:
            seed_dir = run / task / f"seed_{seed}"
            rows = read_csv(seed_dir / "checkpoints.csv")
            reference_rows = read_csv(reference.run_dir / task / f"seed_{seed}" / "checkpoints.csv")
            assert [r["state_digest"] for r in rows] == [r["state_digest"] for r in reference_rows], (task, seed)
            on_disk = sorted(int(p.name) for p in (seed_dir / "checkpoints").iterdir())
            assert on_disk == [int(r["actual_steps"]) for r in rows] == CHECKPOINTS, (task, seed)
            assert [int(r["update"]) for r in read_csv(seed_dir / "updates.csv")] == list(range(1, 33))
    assert json.loads((run / "manifest.json").read_text())["status"] == "finished"


def quarantined(run: Path, task: str, seed: int) -> list[str]:
    folder = run / task / f"seed_{seed}" / "quarantine"
    return sorted(p.name.split("-")[0] for p in folder.iterdir() if p.is_dir()) if folder.exists() else []


def test_tasks_killed_at_different_checkpoints_resume_to_the_reference(reference, tmp_path, capsys):
    run = killed_copy(reference, tmp_path)
    # swing: the index ends at 9216 while every newer folder stays; seed 1's 12288 was being
    # written and its 15360 never started, seed 0 has both (written after the last row)
    truncate_index(run, "swing", 0, 9216)
    truncate_index(run, "swing", 1, 9216)
    half_written(run, "swing", 1, 12288)
    shutil.rmtree(run / "swing" / "seed_1" / "checkpoints" / "15360")
    shutil.rmtree(run / "swing" / "seed_1" / "checkpoints" / "16384")
    # hrv: killed between the two seeds' CSV writes, seed 1 one checkpoint ahead of seed 0
    truncate_index(run, "hrv", 0, 3072)
    truncate_index(run, "hrv", 1, 6144)
    # CartPole (a suite's task): both seeds killed after the same checkpoint
    truncate_index(run, "gymnax:CartPole-v1", 0, 12288)
    truncate_index(run, "gymnax:CartPole-v1", 1, 12288)
    summary = train_all_seeds(run, resume=True, progress=False)  # tasks, seeds: the run's
    assert summary.resumed_from == {"swing": 9216, "hrv": 3072, "gymnax:CartPole-v1": 12288}
    assert_matches_reference(summary, reference, run)
    manifest = json.loads((run / "manifest.json").read_text())  # every resume is recorded
    [record] = manifest["resumes"]
    assert manifest["precision"] == "float32" and record["status_before"] == "running"
    assert record["from_steps"] == summary.resumed_from and record["extended"] == {}
    assert sorted(q["path"] for q in record["quarantined"]) == sorted(
        str(p.relative_to(run)) for p in run.glob("*/seed_*/quarantine/*") if not p.name.endswith(".REASON.txt")
    )
    assert all(q["reason"] for q in record["quarantined"]) and len(record["quarantined"]) == 18
    assert quarantined(run, "swing", 0) == ["12288", "15360", "16384"]
    assert quarantined(run, "swing", 1) == ["12288.orbax"]
    assert quarantined(run, "hrv", 1) == ["12288", "15360", "16384", "6144", "9216"]
    for folder in (run / "hrv" / "seed_1" / "quarantine").iterdir():
        assert "newer than the resume point 3072" in (folder / "REASON.txt").read_text()
    assert "FileExistsError" not in capsys.readouterr().err


def test_a_task_that_starts_over_keeps_its_intact_step_0(reference, tmp_path, capsys):
    run = killed_copy(reference, tmp_path)
    # swing: seed 0 was killed after its step-0 save completed but before its first row (no
    # CSV; the intact step 0 stays and its row is written again), seed 1 lists step 0 only
    truncate_index(run, "swing", 0, None)
    for steps in CHECKPOINTS[1:]:
        shutil.rmtree(run / "swing" / "seed_0" / "checkpoints" / str(steps))
    truncate_index(run, "swing", 1, 0)
    # hrv: only step 0 listed for seed 0; seed 1 was killed while saving step 0 (no CSV yet);
    # every newer folder of seed 0 stays on disk, unlisted
    truncate_index(run, "hrv", 0, 0)
    truncate_index(run, "hrv", 1, None)
    for steps in CHECKPOINTS[1:]:
        shutil.rmtree(run / "hrv" / "seed_1" / "checkpoints" / str(steps))
    half_written(run, "hrv", 1, 0)
    summary = train_all_seeds(run, tasks=TASKS, seeds=SEEDS, resume=True, progress=False)
    assert summary.resumed_from == {"gymnax:CartPole-v1": 16384}  # untouched: it continues from its end
    assert_matches_reference(summary, reference, run)
    assert quarantined(run, "swing", 0) == []
    assert quarantined(run, "swing", 1) == ["12288", "15360", "16384", "3072", "6144", "9216"]
    assert quarantined(run, "hrv", 0) == ["12288", "15360", "16384", "3072", "6144", "9216"]
    assert quarantined(run, "hrv", 1) == ["0.orbax"]
    err = capsys.readouterr().err
    assert "swing starts over: it trains from scratch, from step 0" in err
    assert "hrv starts over: it trains from scratch, from step 0" in err
    assert "checkpoint 0 to" not in err.replace("checkpoint 0.orbax", "")  # the intact step 0 stays
    assert "damaged" not in err


def test_a_failed_checkpoint_save_stops_the_run_and_marks_it_failed(reference, tmp_path, monkeypatch, capfd):
    """Through the CLI: one line on stderr, exit 1, "failed" in the manifest; then resumable."""
    run = killed_copy(reference, tmp_path)
    for task in TASKS:
        for seed in SEEDS:
            truncate_index(run, task, seed, 3072)
    original = SeedCheckpoints.save

    def save(self, steps, state, **options):
        if steps == 9216 and "hrv" in self.directory.parts:
            raise OSError(28, "No space left on device (simulated)")
        return original(self, steps, state, **options)

    monkeypatch.setattr(SeedCheckpoints, "save", save)
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import train_all_seeds as script
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    capfd.readouterr()
    with pytest.raises(SystemExit) as stopped:
        script.main(
            ["--run-dir", str(run), "--resume", "--tasks", *TASKS, "--seeds", "0", "1", "--no-render", "--no-progress"]
        )
    assert stopped.value.code == 1 and isinstance(stopped.value.__context__, RunFailed)
    assert "marked failed" in str(stopped.value.__context__)
    err = capfd.readouterr().err
    assert "error: training stopped: saving a hrv checkpoint failed: OSError" in err
    assert "No space left on device" in err and "Traceback" not in err
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "No space left on device" in manifest["error"]
    monkeypatch.setattr(SeedCheckpoints, "save", original)
    summary = train_all_seeds(run, tasks=TASKS, seeds=SEEDS, resume=True, progress=False)
    assert_matches_reference(summary, reference, run)


def test_a_seed_that_diverges_is_frozen_reported_and_the_run_is_not_finished(reference, tmp_path, monkeypatch, capsys):
    """Resumed at 15,360 steps (update 30) with seed 1's learning rate made huge (the learning
    rate is data in the state, so the compiled program is the same): seed 1 diverges at
    update 31 and keeps its update-30 parameters; seed 0 ends exactly as the reference."""
    import dataclasses

    import purehr.run.protocol as protocol
    from purehr.run import restore

    run = killed_copy(reference, tmp_path)
    for task in TASKS:
        for seed in SEEDS:
            truncate_index(run, task, seed, 15360)
    original = protocol.restore_task

    def restore_with_a_huge_learning_rate(*args, **kwargs):
        resumed = original(*args, **kwargs)
        hparams = resumed.runner.hparams
        learning_rate = np.array(hparams.learning_rate)
        learning_rate[1] = 1e30
        runner = resumed.runner.replace(hparams=hparams.replace(learning_rate=learning_rate))
        return dataclasses.replace(resumed, runner=runner)

    monkeypatch.setattr(protocol, "restore_task", restore_with_a_huge_learning_rate)
    with pytest.raises(RunDiverged) as raised:
        train_all_seeds(run, tasks=TASKS, seeds=SEEDS, resume=True, progress=False)
    expected = {task: {"1": {"update": 31, "env_steps": 31 * 512}} for task in TASKS}
    assert raised.value.diverged == expected
    assert "training diverged: swing seed 1 at update 31 (15,872 env steps); hrv seed 1 at update 31" in str(
        raised.value
    )
    assert "warning: swing seed 1 diverged at update 31" in capsys.readouterr().err
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "diverged" and manifest["diverged"] == expected
    for task in TASKS:
        seed_1 = read_csv(run / task / "seed_1" / "updates.csv")
        assert [int(r["diverged_at_update"]) for r in seed_1] == [0] * 30 + [31, 31]
        assert {r["diverged_at_update"] for r in read_csv(run / task / "seed_0" / "updates.csv")} == {"0"}
        digests = [r["state_digest"] for r in read_csv(run / task / "seed_0" / "checkpoints.csv")]
        assert digests == [r["state_digest"] for r in read_csv(reference.run_dir / task / "seed_0" / "checkpoints.csv")]
    frozen, before = restore(run, "hrv", 1, 16384), restore(run, "hrv", 1, 15360)
    for leaf, expected_leaf in zip(jax.tree.leaves(frozen.params), jax.tree.leaves(before.params)):
        assert np.array_equal(np.asarray(leaf), np.asarray(expected_leaf))


def test_resume_is_refused_while_another_process_still_trains_in_the_directory(reference, tmp_path):
    """A kill that reaches a wrapper (``timeout``) but not the trainer leaves it running; a
    resume beside it would save the same checkpoints again (the FileExistsError of issue 14)."""
    run = killed_copy(reference, tmp_path)
    truncate_index(run, "hrv", 0, 3072)
    before = sorted(str(p.relative_to(run)) for p in run.rglob("*"))
    still_training = RunDirectory(run).lock()  # what the live trainer holds
    try:
        with pytest.raises(RunDirectoryBusy, match=f"in use by another running process \\(pid {os.getpid()}\\)"):
            train_all_seeds(run, tasks=TASKS, seeds=SEEDS, resume=True, progress=False)
        with pytest.raises(RunDirectoryBusy):
            train_all_seeds(run, tasks=TASKS, seeds=SEEDS, configs=configs(), overwrite=True, progress=False)
    finally:
        still_training.release()
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == before  # nothing moved


def test_resume_of_a_run_stopped_before_its_manifest_starts_it_and_anything_else_is_refused(tmp_path):
    """Killed while evaluating baselines: only the lock is there, nothing was trained."""
    from purehr.run.planning.preparation import prepare_run_directory

    started = RunDirectory(tmp_path / "started")
    started.lock().release()
    assert prepare_run_directory(started, resume=True, overwrite=False) is False
    for foreign in (tmp_path / "missing", tmp_path / "foreign"):
        if foreign.name == "foreign":
            foreign.mkdir()
            (foreign / ".lock").write_text("")
            (foreign / "notes.txt").write_text("not a purehr run\n")
        with pytest.raises(FileNotFoundError, match="holds no run to resume"):
            prepare_run_directory(RunDirectory(foreign), resume=True, overwrite=False)


def test_a_finished_run_is_finished_only_when_its_index_matches_the_checkpoints(reference, tmp_path):
    from purehr.run.compiled.task_setup import build_setups
    from purehr.run.planning.triage import index_disagreements

    run = killed_copy(reference, tmp_path)
    setups = build_setups(TASKS, configs())
    assert index_disagreements(RunDirectory(run), setups, SEEDS) == []
    shutil.move(run / "hrv" / "seed_1" / "checkpoints" / "9216", tmp_path / "elsewhere")
    rows = read_csv(run / "swing" / "seed_0" / "checkpoints.csv")
    write_csv(run / "swing" / "seed_0" / "checkpoints.csv", list(rows[0]), rows[:-1])
    assert index_disagreements(RunDirectory(run), setups, SEEDS) == [
        "swing/seed_0/checkpoints.csv lists [0, 3072, 6144, 9216, 12288, 15360], swing/seed_0/checkpoints/ holds "
        "[0, 3072, 6144, 9216, 12288, 15360, 16384]",
        "hrv/seed_1/checkpoints.csv lists [0, 3072, 6144, 9216, 12288, 15360, 16384], hrv/seed_1/checkpoints/ "
        "holds [0, 3072, 6144, 12288, 15360, 16384]",
    ]
    (run / "hrv" / "seed_0" / "checkpoints.csv").unlink()
    from purehr.run import restore

    with pytest.raises(FileNotFoundError, match="seed_0/checkpoints.csv is missing: it holds the digests"):
        restore(run, "hrv", 0)


@pytest.mark.parametrize("anneal_lr", [False, True])
def test_one_update_is_the_same_computation_whatever_the_budget_unless_the_rate_decays(anneal_lr):
    """What extending a run rests on: with a constant learning rate (and no curriculum) the
    update a run of 9,216 steps compiles is the one a run of 16,384 steps compiles, so the
    first 9,216 steps of both are the same; with anneal_lr they are not (extension is refused).
    Traced, not compiled."""
    from purehr.algorithms.ppo.algorithm import make_ppo

    task = get_task("hrv")
    env = task.make_env()
    programs = []
    for budget in (9216, 16384):
        config = configs()["hrv"].replace(total_timesteps=budget, anneal_lr=anneal_lr)
        ppo = make_ppo(config, env, env.default_params)
        runner = jax.eval_shape(ppo.init, jax.random.PRNGKey(0))
        programs.append(str(jax.make_jaxpr(ppo.update)(runner)))
    assert (programs[0] == programs[1]) != anneal_lr


def test_a_run_extended_to_a_larger_budget_ends_bit_identical_to_an_uninterrupted_one(reference, tmp_path, capfd):
    """A finished run of 9,216 steps per task (18 updates of 512), then --resume --steps 16,384,
    against the uninterrupted reference (constant learning rate). The 9,216-step run is cut
    from the reference (its checkpoints and rows up to 9,216 steps, that budget in the
    manifest), which spares a compile: by the test above its states are what a 9,216-step run
    reaches; only its last row differs from such a run's (target 9,000 and a quick evaluation
    rather than target 9,216 and a full one), and the extension keeps rows as they are."""
    from purehr.algorithms.ppo.config import PPOConfig

    run = tmp_path / "extended"
    shutil.copytree(reference.run_dir, run)
    manifest = json.loads((run / "manifest.json").read_text())
    for task in TASKS:
        manifest["configs"][task]["total_timesteps"] = 9216
        for seed in SEEDS:
            truncate_index(run, task, seed, 9216)
            for steps in CHECKPOINTS[4:]:
                shutil.rmtree(run / task / f"seed_{seed}" / "checkpoints" / str(steps))
    (run / "manifest.json").write_text(json.dumps(manifest))
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import train_all_seeds as script
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    capfd.readouterr()
    assert script.main(["--run-dir", str(run), "--resume", "--steps", "16384", "--no-render", "--no-progress"]) == 0
    assert (
        "resume: extending swing from 9,216 to 16,384 steps per seed, hrv from 9,216 to 16,384 steps per seed"
        in capfd.readouterr().err
    )
    for task in TASKS:
        for seed in SEEDS:
            rows = read_csv(run / task / f"seed_{seed}" / "checkpoints.csv")
            reference_rows = read_csv(reference.run_dir / task / f"seed_{seed}" / "checkpoints.csv")
            assert [r["state_digest"] for r in rows] == [r["state_digest"] for r in reference_rows]  # whole states
            assert [int(r["update"]) for r in read_csv(run / task / f"seed_{seed}" / "updates.csv")] == list(
                range(1, 33)
            )
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "finished"
    assert {task: PPOConfig.from_dict(manifest["configs"][task]) for task in TASKS} == configs()
    [record] = manifest["resumes"]
    assert record["extended"] == {task: {"from_steps": 9216, "to_steps": 16384} for task in TASKS}
    assert record["status_before"] == "finished" and record["from_steps"] == {task: 9216 for task in TASKS}
