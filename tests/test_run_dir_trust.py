"""Nothing unverified in a run directory is trusted (issue 27): a checkpoint row without a valid
digest is damaged, a listed checkpoint that is gone is named, a user's file in ``checkpoints/``
is left alone, "latest" says when the index lost rows, and a published record says what it does
not ship (``--overwrite`` keeping the user's files: tests/test_bad_inputs_run_dir.py).

The run is hrv in miniature with real checkpoints (tests/test_bad_inputs_run_dir.py's
``run_with_checkpoints``), built once and copied: nothing here trains."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from test_bad_inputs_run_dir import _tiny_setup, run_with_checkpoints

from purehr.run import restore
from purehr.run.planning.triage import restore_task
from purehr.run.store.checkpoints import CheckpointNotShipped, CorruptCheckpointError
from purehr.run.store.files import RunDirectoryError, read_rows
from purehr.run.store.run_dir import RunDirectory

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "results" / "protocol"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return run_with_checkpoints(tmp_path_factory.mktemp("trust") / "run")


@pytest.fixture
def run(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "run"))


def edit_row(run: Path, seed: int, steps: int, edit) -> None:
    """Rewrites the line of checkpoints.csv that lists ``steps`` through ``edit(line)``."""
    path = run / "hrv" / f"seed_{seed}" / "checkpoints.csv"
    lines = path.read_text().splitlines()
    lines = [edit(line) if line.split(",")[1] == str(steps) else line for line in lines]
    path.write_text("\n".join(lines) + "\n")


def flip_a_byte(folder: Path) -> None:
    data = max((p for p in folder.rglob("*") if p.is_file() and p.parent.name == "d"), key=lambda p: p.stat().st_size)
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    data.write_bytes(bytes(raw))


def resume(run: Path, seeds=(0, 1)) -> tuple:
    rows = {"updates": {s: [] for s in seeds}, "checkpoints": {s: [] for s in seeds}}
    return restore_task(RunDirectory(run), _tiny_setup(), list(seeds), rows), rows


WITHOUT_DIGEST = {
    "the cell cut off": lambda line: line.rsplit(",", 1)[0],
    "an empty cell": lambda line: line.rsplit(",", 1)[0] + ",",
    "not hex": lambda line: line.rsplit(",", 1)[0] + ",abc",
    "63 hex digits": lambda line: line[:-1],
}


@pytest.mark.parametrize("edit", WITHOUT_DIGEST.values(), ids=list(WITHOUT_DIGEST))
def test_restore_refuses_a_checkpoint_without_a_valid_digest(run, edit):
    """Defect 2: a row without its digest skipped verification and returned damaged state."""
    flip_a_byte(run / "hrv" / "seed_0" / "checkpoints" / "2048")
    edit_row(run, 0, 2048, edit)
    with pytest.raises(CorruptCheckpointError, match=r"checkpoints/2048 has no valid state digest in checkpoints.csv"):
        restore(run, "hrv", 0, 2048)
    assert restore(run, "hrv", 0, 1024).steps == 1024  # the rows around it still restore


def test_resume_falls_back_from_a_checkpoint_without_a_digest(run, capsys):
    edit_row(run, 0, 2048, WITHOUT_DIGEST["the cell cut off"])
    resumed, rows = resume(run)
    err = capsys.readouterr().err
    assert resumed.steps == 1024, err
    assert "checkpoints/2048 has no valid state digest" in err and "falling back to the previous checkpoint" in err
    assert sorted(q["path"].split("/")[1] + "/" + q["path"].split("/")[3][:4] for q in resumed.quarantined) == [
        "seed_0/2048",
        "seed_1/2048",
    ]
    assert [r["actual_steps"] for r in rows["checkpoints"][0]] == [0, 1024]


def test_resume_names_a_listed_checkpoint_missing_from_disk(run, capsys):
    shutil.rmtree(run / "hrv" / "seed_1" / "checkpoints" / "2048")
    resumed, rows = resume(run)
    err = " ".join(capsys.readouterr().err.split())
    assert resumed.steps == 1024
    assert (
        "resume: hrv seed 1: checkpoint 2048 listed in checkpoints.csv is missing from disk "
        "(hrv/seed_1/checkpoints/2048)" in err
    )
    assert [r["actual_steps"] for r in rows["checkpoints"][1]] == [0, 1024]


def test_resume_leaves_a_users_file_in_checkpoints_alone(run, capsys):
    folder = run / "hrv" / "seed_0" / "checkpoints"
    (folder / "USER.txt").write_text("my notes\n")
    (folder / "analysis").mkdir()
    (folder / "2048").rename(folder / "2048.orbax-checkpoint-tmp-1764480000000000")  # a kill mid-save
    resumed, _ = resume(run)
    err = " ".join(capsys.readouterr().err.split())
    assert resumed.steps == 1024
    assert (folder / "USER.txt").read_text() == "my notes\n" and (folder / "analysis").is_dir()
    assert "left hrv/seed_0/checkpoints/USER.txt alone: not a checkpoint" in err
    assert "USER.txt to" not in err and "a save that never completed" in err
    assert [q["path"].split("/")[3][:10] for q in resumed.quarantined if "seed_0" in q["path"]] == ["2048.orbax"]


def test_latest_warns_when_the_index_lost_its_last_row(run):
    path = run / "hrv" / "seed_0" / "checkpoints.csv"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    with pytest.warns(
        UserWarning, match=r"checkpoints/2048 on disk is newer than the last checkpoint .* lists \(1024\)"
    ):
        restored = restore(run, "hrv", 0)
    assert restored.steps == 1024


def test_latest_is_the_newest_complete_checkpoint_when_the_last_listed_save_never_completed(run):
    """Issue 63 W12: checkpoints.csv lists a checkpoint once its asynchronous save has started,
    so a run killed at that moment lists one Orbax never completed (its temporary folder is
    there, ``<steps>/`` is not); "latest" is then the newest complete one, said in a warning,
    rather than an error. A step asked for by number still refuses the unfinished one."""
    folder = run / "hrv" / "seed_0" / "checkpoints"
    (folder / "2048").rename(folder / "2048.orbax-checkpoint-tmp-1764480000000000")  # killed mid-save
    with pytest.warns(UserWarning, match=r"checkpoint 2048 .* never completed .* restoring 1024, the latest complete"):
        restored = restore(run, "hrv", 0)
    assert restored.steps == 1024
    with pytest.raises(CorruptCheckpointError, match=r"checkpoint 2048 listed in checkpoints.csv is missing"):
        restore(run, "hrv", 0, 2048)


def test_restore_refuses_a_bool_seed_and_takes_numpy_integers(run):
    with pytest.raises(ValueError, match=r"seed=True: expected an integer seed"):
        restore(run, "hrv", True)
    with pytest.raises(ValueError, match=r"step=1024.0: expected an integer number of environment steps"):
        restore(run, "hrv", 0, step=1024.0)
    restored = restore(run, "hrv", np.int64(1), step=np.int64(1024))
    assert (restored.seed, restored.steps) == (1, 1024) and type(restored.seed) is int


def test_restore_names_the_file_line_and_column_of_a_damaged_row(run):
    edit_row(run, 0, 1024, lambda line: line.replace(",4,1.024,", ",4,abc,", 1))
    with pytest.raises(RunDirectoryError, match=r"seed_0/checkpoints.csv: line 3, column 'elapsed_s': 'abc' is not a"):
        restore(run, "hrv", 0)
    edit_row(run, 0, 1024, lambda line: line[:9])
    with pytest.raises(RunDirectoryError, match=r"seed_0/checkpoints.csv: line 3 ends after 2 of .* \(cut short\?\)"):
        restore(run, "hrv", 0)


def test_restore_refuses_a_manifest_that_disagrees_with_the_checkpoint(run):
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["configs"]["hrv"]["actor_hidden"] = [16]
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"disagrees with checkpoint .*actor.Dense_0.kernel is saved with shape"):
        restore(run, "hrv", 0)


def load_script(name: str):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(REPO / "scripts"))


def test_evaluate_names_a_cut_row_and_says_when_latest_moved_back(run, capsys):
    evaluate = load_script("evaluate")
    seed_0 = run / "hrv" / "seed_0" / "checkpoints.csv"
    intact = seed_0.read_text()
    seed_0.write_text(intact[: intact.rindex("\n", 0, -1) + 14])  # the last row cut inside elapsed_s
    argv = ["--checkpoint", str(run), "--task", "hrv", "--num-episodes", "2", "--json"]
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert "checkpoints.csv: line 4 ends after" in err and "Traceback" not in err
    seed_0.write_text("".join(intact.splitlines(keepends=True)[:-1]))
    assert evaluate.main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["checkpoint"]["actual_steps"] == 1024
    assert "warning: restore(step='latest'):" in captured.err and "checkpoints/2048 on disk is newer" in captured.err


def test_evaluate_random_policy_uses_its_seed():
    evaluate = load_script("evaluate")
    evaluation = evaluate.load_task("hrv")
    obs, _ = evaluation.env.reset(jax.random.PRNGKey(0), evaluation.env_params)
    key = jax.random.PRNGKey(5)

    def action(*argv):
        args = evaluate.parse_args(["--task", "hrv", "--policy", "random", *argv])
        return np.asarray(evaluate.build_policy(args, evaluation)(obs, 0, key))

    protocol = np.asarray(get_baseline("hrv", "random").make_policy(evaluation.env, evaluation.env_params)(obs, 0, key))
    np.testing.assert_array_equal(action(), protocol)  # seed 0: the manifest's random floor
    assert not np.array_equal(action("--seed", "3"), protocol)
    np.testing.assert_array_equal(action("--seed", "3"), action("--seed", "3"))


def get_baseline(task: str, flag: str):
    from purehr.tasks import get_task

    return get_task(task).baseline_by_flag(flag)


def test_a_published_record_says_what_it_does_not_ship():
    """User path 2: the committed record lists checkpoints it does not ship."""
    with pytest.raises(CheckpointNotShipped, match=r"checkpoints/53248 is missing: not shipped in this record"):
        restore(RECORD, "swing", 0, step=50_000)
    with pytest.raises(CheckpointNotShipped, match=r"Restore step='latest' \(shipped: \[\d+\]\)"):
        restore(RECORD, "hrv", 0, step=0)


def test_a_run_missing_a_checkpoint_is_not_called_a_record(run):
    shutil.rmtree(run / "hrv" / "seed_0" / "checkpoints" / "1024")
    with pytest.raises(CorruptCheckpointError, match=r"checkpoint 1024 listed in checkpoints.csv is missing from disk"):
        restore(run, "hrv", 0, step=1024)


def test_example_analysis_runs_on_the_committed_record(capsys):
    example = load_script("example_analysis")
    assert example.main(["--run-dir", str(RECORD), "--task", "hrv", "--seed", "0", "--num-episodes", "4"]) == 0
    out = capsys.readouterr().out
    assert "7 checkpoints listed, 1 shipped in this record (301,056)" in out
    assert "step   301,056: success" in out and "initial parameters" in out


def test_render_and_analysis_leave_out_seed_folders_not_in_the_manifest(tmp_path, capsys):
    from test_viz import build_run_directory

    from purehr.reports.analysis import analyze_run
    from purehr.viz.run_data import load_run

    run = build_run_directory(tmp_path)
    (run / "hrv" / "seed_7").mkdir()  # the audit's stray folder
    shutil.copytree(run / "swing" / "seed_1", run / "swing" / "seed_9")  # a copy, not one of the run's seeds
    shutil.rmtree(run / "hrv" / "seed_1")
    (run / "hrv" / "seed_1").mkdir()  # one of the run's seeds, emptied
    loaded = load_run(run)
    assert loaded.seeds("hrv") == [0] and loaded.seeds("swing") == [0, 1]
    err = " ".join(capsys.readouterr().err.split())
    assert f"note: {run / 'hrv' / 'seed_7'} is left out: seed 7 is not one of the run's seeds (0 1" in err
    assert f"note: {run / 'swing' / 'seed_9'} is left out: seed 9 is not one of the run's seeds" in err
    assert f"note: {run / 'hrv' / 'seed_1'} is left out: it is empty" in err
    analysis = analyze_run(run)
    assert sorted(analysis["tasks"]["swing"]["seeds"]) == [0, 1] and sorted(analysis["tasks"]["hrv"]["seeds"]) == [0]


def test_read_rows_checks_every_cell(tmp_path):
    path = tmp_path / "checkpoints.csv"
    path.write_text("actual_steps,elapsed_s,eval_x,checkpoint_path,state_digest\n0,1.5,,a,d\n8,nan,2\n")
    rows = read_rows(path, ("checkpoint_path", "state_digest"), ("actual_steps",))
    assert rows[0]["actual_steps"] == 0 and np.isnan(rows[0]["eval_x"]) and rows[1]["state_digest"] == ""
    path.write_text("actual_steps,elapsed_s\n,1\n")
    with pytest.raises(RunDirectoryError, match=r"line 2, column 'actual_steps': '' is not an integer"):
        read_rows(path, (), ("actual_steps",))
    path.write_text("actual_steps,elapsed_s\n1,2,3\n")
    with pytest.raises(RunDirectoryError, match=r"line 2 has 3 fields, the header 2"):
        read_rows(path, (), ())
    assert read_rows(tmp_path / "absent.csv") == []
