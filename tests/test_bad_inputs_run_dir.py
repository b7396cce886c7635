"""Bad run directories and resume requests (issues 10 and 11): each row is a command line that
must be refused with exit code 2 and a message naming the value, before anything is compiled,
written or removed. The run directories are built by hand (a manifest, a few files), so no
row trains or compiles anything; ``main`` runs in this process.

A row's arguments may name ``TMP``, the test's temporary folder (a --log-dir beside the run).

Plus the --overwrite contract (only a recognisable run, and only the files a run writes) and
the resume messages of a task with nothing to continue from (unit level)."""

import importlib.util
import json
import os
from pathlib import Path

import jax
import pytest
from conftest import train_all_seeds_script

from purehr.run.planning.preparation import prepare_run_directory
from purehr.run.planning.triage import restore_task
from purehr.run.status import PROTOCOL_TEXT
from purehr.run.store.files import RunDirectoryError
from purehr.run.store.run_dir import RunDirectory
from purehr.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "--steps",
    "2048",
    "--num-envs",
    "4",
    "--num-steps",
    "64",
    "--minibatch-size",
    "64",
    "--actor-hidden",
    "8",
    "--critic-hidden",
    "8",
    "--no-render",
    "--no-progress",
]


def write_run(root: Path, *, tasks=("hrv",), seeds=(0, 1), status="running", precision="float32", **changes) -> Path:
    """A run directory as a purehr run leaves it after its manifest (no checkpoint yet)."""
    root.mkdir(parents=True, exist_ok=True)
    configs = {t: get_task(t).default_config.replace(total_timesteps=4096, **changes).to_dict() for t in tasks}
    manifest = dict(
        status=status,
        tasks=list(tasks),
        seeds=list(seeds),
        configs=configs,
        protocol=PROTOCOL_TEXT,
        curricula={},
        precision=precision,
        wall_time_s=None,
    )
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / ".lock").write_text("")
    return root


def foreign_manifest(root: Path) -> Path:
    """Issue 11 item 1: a web app's folder, which happens to hold a manifest.json."""
    (root / "src").mkdir(parents=True)
    (root / "manifest.json").write_text('{"name": "My PWA"}\n')
    (root / "index.html").write_text("x\n")
    return root


def seed_without_index(root: Path) -> Path:
    """Issue 11 item 3: one seed's checkpoints.csv deleted, its checkpoints still there."""
    write_run(root)
    for seed in (0, 1):
        (root / "hrv" / f"seed_{seed}" / "checkpoints" / "2048").mkdir(parents=True)
        (root / "hrv" / f"seed_{seed}" / "checkpoints" / "0").mkdir(parents=True)
    (root / "hrv" / "seed_1" / "checkpoints.csv").write_text("target_steps,actual_steps\n0,0\n2048,2048\n")
    (root / "hrv" / "seed_1" / "updates.csv").write_text("update\n1\n")
    return root


def seed_with_emptied_index(text: str):
    """Issue 63 W18: one seed's checkpoints.csv emptied (``text``: "" or the header alone),
    its checkpoints still there: a lost index, as a deleted one is."""

    def build(root: Path) -> Path:
        seed_without_index(root)
        (root / "hrv" / "seed_0" / "checkpoints.csv").write_text(text)
        return root

    return build


def unwritable(root: Path) -> Path:
    """A directory this process cannot write in. Root ignores permission bits, so there a
    folder under /sys (sysfs takes no new files) stands in."""
    if os.geteuid() == 0:
        if not Path("/sys").is_dir():
            pytest.skip("running as root without /sys: no directory root cannot write")
        return Path("/sys/purehr-test-run")
    root.mkdir()
    root.chmod(0o500)
    return root


def with_tensorboard(root: Path, log_dir: str) -> Path:
    """The manifest says the run logs to TensorBoard in ``log_dir`` (as recorded)."""
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["tracking"] = {"backends": ["tensorboard"], "log_dir": log_dir}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def other_runs_dashboard(root: Path) -> Path:
    """Issue 48 defect 2: run B (this one, which logged nothing) beside run A, which logged to
    TensorBoard in its own directory ``A/tensorboard``."""
    run_with_checkpoints(root)
    events = write_run(root.parent / "A", seeds=(0,)) / "tensorboard" / "hrv" / "seed_0"
    events.mkdir(parents=True)
    (events / "events.out.tfevents.1.host").write_bytes(b"")
    return root


def no_longer_a_run(root: Path) -> Path:
    """Run A's dashboard folder alone: its manifest and lock gone."""
    (root.parent / "A" / "manifest.json").unlink()
    (root.parent / "A" / ".lock").unlink()
    return root


def log_dir_claimed_by_another_run(root: Path) -> Path:
    """Issue 48 defect 3: a run started a second earlier claimed ``TMP/shared/hrv/seed_0``
    and is still compiling (no event file yet)."""
    folder = root.parent / "shared" / "hrv" / "seed_0"
    folder.mkdir(parents=True)
    claim = {"owner": "firstrun0001", "run_dir": str(root.parent / "first"), "claimed_at": "2026-12-05T10:00:00Z"}
    (folder / "purehr_claim.json").write_text(json.dumps(claim))
    return root


def a_file(root: Path) -> Path:
    root.parent.mkdir(parents=True, exist_ok=True)
    root.write_text("my notes\n")
    return root


def not_empty(root: Path) -> Path:
    root.mkdir()
    (root / "thesis.tex").write_text("\\documentclass{article}\n")
    return root


# hrv in miniature with real checkpoints: batch 4 x 64 = 256, 16 updates; checkpoints at updates 0, 4, 8
TINY_CONFIG = dict(num_envs=4, num_steps=64, minibatch_size=64, actor_hidden=(8,), critic_hidden=(8,))
TINY_STEPS = (0, 1024, 2048)


def run_with_checkpoints(root: Path, saved: dict | None = None, **changes) -> Path:
    """A run killed after its checkpoint at 2,048 steps: write_run's manifest (TINY_CONFIG and
    ``changes``), each seed's initial state saved at TINY_STEPS (its update index advanced) with
    the index files listing them. ``saved``: the config changes the checkpoints were saved with
    (default: the manifest's)."""
    from purehr.engine.seeds import keys_for_seeds
    from purehr.run.compiled.task_setup import build_task_setup
    from purehr.run.store.checkpoints import SeedCheckpoints
    from purehr.run.store.columns import UPDATE_COLUMNS, checkpoint_columns
    from purehr.run.store.files import write_csv

    write_run(root, **{**TINY_CONFIG, **changes})
    config = get_task("hrv").default_config.replace(total_timesteps=4096, **{**TINY_CONFIG, **(saved or changes)})
    setup = build_task_setup("hrv", config)
    manifest = json.loads((root / "manifest.json").read_text())  # the environment, as a run records it
    manifest["environments"] = {"hrv": get_task("hrv").env_kwargs(setup.env)}
    (root / "manifest.json").write_text(json.dumps(manifest))
    initial = jax.jit(jax.vmap(setup.algorithm.init))(keys_for_seeds([0, 1]))
    for index, seed in enumerate([0, 1]):
        seed_dir = root / "hrv" / f"seed_{seed}"
        manager = SeedCheckpoints(seed_dir / "checkpoints", asynchronous=False)
        rows = []
        for steps in TINY_STEPS:
            state = jax.tree.map(lambda leaf: leaf[index], initial)
            state = state.replace(update_index=state.update_index + steps // 256)
            row = dict(target_steps=steps, actual_steps=steps, update=steps // 256, elapsed_s=steps / 1000)
            row.update(eval_success_rate=steps / 4096, checkpoint_path=f"hrv/seed_{seed}/checkpoints/{steps}")
            rows.append(dict(row, showcase_path="", state_digest=manager.save(steps, state)))
        manager.finish()
        write_csv(seed_dir / "checkpoints.csv", checkpoint_columns(["success_rate"]), rows)
        updates = [
            {c: u if c == "update" else u * 256 if c == "env_steps" else 0.5 for c in UPDATE_COLUMNS}
            for u in range(1, 9)
        ]
        write_csv(seed_dir / "updates.csv", UPDATE_COLUMNS, updates)
    return root


def edit_line(relative: str, line: int, edit) -> callable:
    """A builder: run_with_checkpoints, then line ``line`` (1: the header) of ``relative`` edited."""

    def build(root: Path) -> Path:
        run_with_checkpoints(root)
        path = root / relative
        lines = path.read_text().splitlines()
        lines[line - 1] = edit(lines[line - 1])
        path.write_text("\n".join(lines) + "\n")
        return root

    return build


def config_file(text: str):
    """A run directory not yet there, and ``TMP/run.toml`` holding ``text`` (``--config``, issue 52)."""

    def build(root: Path) -> Path:
        (root.parent / "run.toml").write_text(text)
        return root

    return build


# (id, build the directory from a tmp path, arguments after --run-dir DIR, message fragments)
ROWS = [
    (
        "--config, unknown key",
        config_file('tasks = ["hrv"]\nlearning_rat = 0.1\n'),
        ["--config", "TMP/run.toml"],
        ["TMP/run.toml: unknown key 'learning_rat'; expected one of:", "learning_rate,", "[task.NAME]"],
    ),
    (
        "--config, bad value",
        config_file("learning_rate = 'fast'\n"),
        ["--config", "TMP/run.toml"],
        ["TMP/run.toml: argument --learning-rate: invalid float value: 'fast'"],
    ),
    (
        "--config, a manifest without run_config",
        lambda p: write_run(p.parent / "old") and p,
        ["--config", "TMP/old/manifest.json"],
        ["TMP/old/manifest.json: records no run_config"],
    ),
    ("run-dir is a file", a_file, [], ["is a file, not a directory"]),
    ("run-dir below a file", lambda p: a_file(p) / "run", [], ["is a file, not a directory"]),
    ("run-dir unwritable", unwritable, [], ["cannot be written"]),
    ("foreign manifest, --resume", foreign_manifest, ["--resume"], ["is not a purehr run manifest", "lacks 'tasks'"]),
    (
        "foreign manifest, --overwrite",
        foreign_manifest,
        ["--overwrite", "--tasks", "hrv", "--seeds", "0"],
        ["is not a purehr run manifest", "refusing to remove anything in it", "choose another --run-dir"],
    ),
    ("foreign manifest, new run", foreign_manifest, [], ["is not a purehr run manifest", "refusing to train"]),
    (
        "manifest not JSON, --resume",
        lambda p: (p.mkdir(), (p / "manifest.json").write_text("{half"), p)[2],
        ["--resume"],
        ["is not valid JSON"],
    ),
    ("--resume, nothing there", lambda p: p, ["--resume"], ["holds no run to resume"]),
    ("--resume with --overwrite", write_run, ["--resume", "--overwrite"], ["contradict each other"]),
    (
        "--resume, other seeds",
        write_run,
        ["--resume", "--seeds", "0", "1", "2"],
        ["--seeds 0 1 2 does not match the run's seeds 0 1"],
    ),
    (
        "--resume, other tasks",
        write_run,
        ["--resume", "--tasks", "swing"],
        ["--tasks swing does not match the run's tasks hrv"],
    ),
    (
        "--resume, other setting",
        write_run,
        ["--resume", "--learning-rate", "0.5", "--num-envs", "64"],
        ["learning_rate: given 0.5, the run has 0.001"],
    ),
    (
        "--resume, smaller budget",
        write_run,
        ["--resume", "--steps", "2048"],
        ["--steps 2,048 is below the run's hrv budget of 4,096", "cannot be shortened"],
    ),
    (
        "--resume, larger budget, annealed",
        write_run,
        ["--resume", "--steps", "8192"],
        ["cannot extend hrv from 4,096 to 8,192 steps", "anneal_lr=True", "--anneal-lr false"],
    ),
    (
        "--resume, larger budget, curriculum",
        lambda p: _with_curriculum(write_run(p, anneal_lr=False)),
        ["--resume", "--steps", "8192"],
        ["cannot extend hrv", "curriculum's stages are fractions of the budget"],
    ),
    (
        "--resume --x64 on a float32 run",
        write_run,
        ["--resume", "--x64"],
        ["trained in float32", "computes in float64", "resume without --x64"],
    ),
    (
        "--resume, one seed's index deleted",
        seed_without_index,
        ["--resume"],
        ["hrv/seed_0/checkpoints.csv is missing", "holds checkpoints 2048", "Nothing was changed"],
    ),
    (
        "--resume, one seed's index emptied",
        seed_with_emptied_index(""),
        ["--resume"],
        ["hrv/seed_0/checkpoints.csv is empty", "holds checkpoints 2048", "Nothing was changed"],
    ),
    (
        "--resume, one seed's index cut to its header",
        seed_with_emptied_index("target_steps,actual_steps\n"),
        ["--resume"],
        ["hrv/seed_0/checkpoints.csv lists no checkpoint", "holds checkpoints 2048", "Put hrv/seed_0/checkpoints"],
    ),
    (
        "new run into a run",
        lambda p: write_run(p, status="failed"),
        TINY,
        [
            "already holds a failed run (tasks hrv, seeds 0 1, hrv 4,096 steps)",
            "--resume continues it",
            "choose another --run-dir",
        ],
    ),
    (
        "new run into an interrupted run",
        lambda p: write_run(p, status="interrupted"),
        TINY,
        ["already holds a run stopped by Ctrl-C (interrupted) (tasks hrv", "--resume continues it"],
    ),
    (
        "new run into a finished run",
        lambda p: write_run(p, status="finished"),
        TINY,
        ["already holds a finished run", "--resume renders the figures it is missing"],
    ),
    ("new run into other files", not_empty, TINY, ["is not empty and holds no purehr run"]),
    (
        "--overwrite with a bad setting",
        lambda p: write_run(p, status="finished"),
        ["--overwrite", "--learning-rate", "-1", *TINY],
        ["PPOConfig.learning_rate=-1.0: expected a finite number > 0"],
    ),
    (
        "--resume, checkpoints.csv cut mid-row",
        edit_line("hrv/seed_1/checkpoints.csv", 4, lambda line: line[:12]),
        ["--resume"],
        ["--resume:", "hrv/seed_1/checkpoints.csv: line 4 ends after", "(cut short?)", "Nothing was changed"],
    ),
    (
        "--resume, updates.csv cut mid-row",
        edit_line("hrv/seed_0/updates.csv", 9, lambda line: line[:6]),
        ["--resume"],
        ["hrv/seed_0/updates.csv: line 9 ends after", "no value for column"],
    ),
    (
        "--resume, a garbled cell",
        edit_line("hrv/seed_0/checkpoints.csv", 3, lambda line: line.replace(",1024,", ",abc,", 1)),
        ["--resume"],
        ["hrv/seed_0/checkpoints.csv: line 3, column 'actual_steps': 'abc' is not an integer"],
    ),
    (
        "--resume into another run's --log-dir",
        other_runs_dashboard,
        ["--resume", "--log", "tensorboard", "--log-dir", "TMP/A/tensorboard"],
        ["--log-dir TMP/A/tensorboard is inside TMP/A", "another run's directory", "choose another --log-dir"],
    ),
    (
        "--resume into a --log-dir holding runs this run did not write",
        lambda p: no_longer_a_run(other_runs_dashboard(p)),
        ["--resume", "--log", "tensorboard", "--log-dir", "TMP/A/tensorboard"],
        ["--log-dir TMP/A/tensorboard already holds TensorBoard runs under hrv/seed_0", "this run did not write"],
    ),
    (
        "new run into a --log-dir another run has claimed",
        log_dir_claimed_by_another_run,
        [*TINY, "--tasks", "hrv", "--seeds", "0", "--log", "tensorboard", "--log-dir", "TMP/shared"],
        ["--log-dir TMP/shared: hrv/seed_0 is claimed by another run (run directory TMP/first", "choose another"],
    ),
    (
        "--log-dir without --log tensorboard",
        lambda p: p,
        [*TINY, "--tasks", "hrv", "--seeds", "0", "--log-dir", "TMP/tb"],
        ["--log-dir TMP/tb is TensorBoard's directory, but --log does not name tensorboard", "add --log tensorboard"],
    ),
    (
        "--resume of a run that recorded a relative --log-dir",
        lambda p: with_tensorboard(run_with_checkpoints(p), "tb"),
        ["--resume"],
        ["the run recorded --log-dir 'tb' relative to", "give --log-dir with that folder's absolute path"],
    ),
    (
        "--resume, the manifest's actor_hidden edited",
        lambda p: run_with_checkpoints(p, saved=dict(actor_hidden=(8,)), actor_hidden=(16,)),
        ["--resume"],
        [
            "manifest.json disagrees with the checkpoints of hrv",
            "configs.hrv.actor_hidden is [16]",
            "Nothing was changed",
        ],
    ),
]


def _with_curriculum(root: Path) -> Path:
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["curricula"] = {"hrv": {"stages": [[0.5, 0.5, 0.05], [0.5, 0.9, 0.02]]}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def snapshot(path: Path) -> dict:
    """Every path below ``path`` (or the file itself), with each file's size and modification
    time (a folder's own time changes with the write probe, which leaves nothing behind)."""
    if not path.exists():
        return {}
    paths = [path] if path.is_file() else sorted(path.rglob("*"))
    return {str(p): "folder" if p.is_dir() else (p.stat().st_size, p.stat().st_mtime_ns) for p in paths}


@pytest.fixture
def restore_precision():
    before = jax.config.jax_enable_x64
    yield
    jax.config.update("jax_enable_x64", before)


@pytest.mark.parametrize("build, arguments, fragments", [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_bad_run_directory_is_refused_before_anything_is_written(
    tmp_path, capsys, restore_precision, build, arguments, fragments
):
    run = build(tmp_path / "run")
    watched = run if run.is_relative_to(tmp_path) else run.parent
    before = snapshot(tmp_path) if watched.is_relative_to(tmp_path) else snapshot(run)
    existed = run.exists()
    arguments = [argument.replace("TMP", str(tmp_path)) for argument in arguments]
    with pytest.raises(SystemExit) as stopped:
        train_all_seeds_script().main(["--run-dir", str(run), *arguments])
    err = capsys.readouterr().err
    assert stopped.value.code == 2, err
    message = " ".join(err.split())
    for fragment in fragments:
        assert fragment.replace("TMP", str(tmp_path)) in message, (fragment, err)
    assert "Traceback" not in err
    after = snapshot(tmp_path) if watched.is_relative_to(tmp_path) else snapshot(run)
    assert after == before and run.exists() == existed


def test_run_name_is_named_when_the_user_gave_run_name(tmp_path, capsys, monkeypatch):
    import purehr.cli.train

    script = train_all_seeds_script()
    monkeypatch.setattr(purehr.cli.train, "ROOT", tmp_path)  # the command's code (the script is its wrapper)
    write_run(tmp_path / "artifacts" / "quick", status="finished")
    with pytest.raises(SystemExit) as stopped:
        script.main(["--run-name", "quick", *TINY])
    err = " ".join(capsys.readouterr().err.split())
    assert stopped.value.code == 2
    assert "choose another --run-name" in err and "--run-dir" not in err


def files_left_by_overwrite(run: Path, ours: list[str], users: list[str]) -> list[str]:
    """Writes each of ``ours`` and ``users`` below ``run`` (a finished run), overwrites the run,
    and returns the files left, sorted."""
    for name in ours + users:
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text("x\n")
    assert prepare_run_directory(RunDirectory(run), resume=False, overwrite=True) is False
    return sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())


def test_overwrite_removes_only_the_files_a_run_writes(tmp_path, capsys):
    run = write_run(tmp_path / "run", tasks=("swing", "hrv"), status="finished")
    ours = [
        "hrv/seed_0/updates.csv",
        "hrv/seed_0/checkpoints.csv",
        "hrv/seed_0/checkpoints/0/state",
        "hrv/seed_1/quarantine/2048-20250101T000000/REASON.txt",
        "swing/seed_0/showcase/steps_0.npz",
        "figures/hrv_learning.png",
        "figures/swing_training_log.pdf",
        "figures/replay.html",
        "final_metrics.csv",
        ".manifest.json.tmp",
    ]
    users = [
        "notes.txt",
        "figures/my_plot.png",
        "hrv/seed_0/my_notes.md",
        "hrv/seed_7/updates.csv",
        "analysis/table.csv",
    ]
    (run / "empty_folder_of_mine").mkdir()
    assert files_left_by_overwrite(run, ours, users) == sorted(users)
    assert (run / "empty_folder_of_mine").is_dir() and not (run / "swing").exists()
    err = capsys.readouterr().err
    assert "removed the finished run" in err and "kept 6 entries a run does not write" in err


def test_overwrite_keeps_user_files_inside_checkpoints_and_showcase(tmp_path, capsys):
    """Issue 27 defect 6: --overwrite deleted checkpoints/USER.txt and showcase/sub/mine.txt."""
    run = write_run(tmp_path / "run", status="finished")
    ours = [
        "hrv/seed_0/checkpoints/0/state",
        "hrv/seed_0/checkpoints/2048.orbax-checkpoint-tmp-1764480000000000/state",
        "hrv/seed_0/showcase/steps_0.npz",
        "hrv/seed_0/showcase/.steps_2048.partial.npz",
        "hrv/seed_0/quarantine/2048-20250101T000000/REASON.txt",
        "hrv/seed_0/quarantine/0.orbax-checkpoint-tmp-1-20250101T000000-1.REASON.txt",
    ]
    users = [
        "hrv/seed_0/checkpoints/USER.txt",
        "hrv/seed_0/showcase/sub/mine.txt",
        "hrv/seed_0/showcase/steps_0.mp4",
        "hrv/seed_0/quarantine/notes.md",
    ]
    assert files_left_by_overwrite(run, ours, users) == sorted(users)
    err = " ".join(capsys.readouterr().err.split())
    assert "kept 4 entries a run does not write: hrv/seed_0/checkpoints/USER.txt" in err
    assert "hrv/seed_0/showcase/sub" in err


def test_overwrite_of_a_foreign_manifest_removes_nothing(tmp_path):
    run = foreign_manifest(tmp_path / "w")
    before = snapshot(run)
    with pytest.raises(RunDirectoryError, match=r"manifest.json is not a purehr run manifest"):
        prepare_run_directory(RunDirectory(run), resume=False, overwrite=True)
    assert snapshot(run) == before


def _tiny_setup():
    from purehr.run.compiled.task_setup import build_setups

    config = get_task("hrv").default_config.replace(
        total_timesteps=4096, num_envs=4, num_steps=64, minibatch_size=64, actor_hidden=(8,), critic_hidden=(8,)
    )
    return build_setups(["hrv"], {"hrv": config})[0]


def test_resume_with_a_manifest_but_no_checkpoint_says_it_trains_from_scratch(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    rows = {"updates": {0: [], 1: []}, "checkpoints": {0: [], 1: []}}
    resumed = restore_task(RunDirectory(run), _tiny_setup(), [0, 1], rows)
    err = capsys.readouterr().err
    assert resumed.runner is None and resumed.steps == 0 and resumed.quarantined == []
    assert (
        "resume: hrv has no checkpoint yet (the run stopped before saving its first): it trains from "
        "scratch, from step 0" in err
    )
    assert "moved" not in err and "None" not in err


def test_a_step_0_saved_but_never_listed_is_kept_when_it_holds_the_initial_state(tmp_path, capsys):
    """Issue 10 item 9: killed while recording its first checkpoint. The intact initial state
    stays (the recorder writes its row when the program reaches step 0); a damaged one is
    quarantined as damaged, and nothing says "resume point None"."""
    from purehr.engine.seeds import keys_for_seeds
    from purehr.run.store.checkpoints import SeedCheckpoints

    run = RunDirectory(write_run(tmp_path / "run"))
    setup = _tiny_setup()
    initial = jax.jit(jax.vmap(setup.algorithm.init))(keys_for_seeds([0, 1]))
    for index, seed in enumerate([0, 1]):
        manager = SeedCheckpoints(run.checkpoint_dir("hrv", seed), asynchronous=False)
        state = jax.tree.map(lambda x: x[index], initial)
        if seed == 1:  # a different state under step 0: not this seed's initial state
            state = state.replace(update_index=state.update_index + 7)
        manager.save(0, state)
        manager.finish()
    rows = {"updates": {0: [], 1: []}, "checkpoints": {0: [], 1: []}}
    resumed = restore_task(run, setup, [0, 1], rows, initial)
    err = capsys.readouterr().err
    assert "hrv starts over: it trains from scratch, from step 0" in err
    assert list(resumed.kept[0]) == [0] and resumed.kept[1] == {}
    assert [q["path"].split("/")[:3] for q in resumed.quarantined] == [["hrv", "seed_1", "quarantine"]]
    assert resumed.quarantined[0]["reason"].startswith("damaged: it does not hold the initial state")
    assert (run.checkpoint_dir("hrv", 0) / "0").is_dir() and not (run.checkpoint_dir("hrv", 1) / "0").exists()
    assert "None" not in err


def test_a_relative_log_dir_is_recorded_absolute_and_a_resume_from_elsewhere_uses_it(tmp_path, monkeypatch):
    """Issue 48 weak row: ``--log-dir tb`` was recorded as given, so a resume started from
    another working directory logged into another folder (the first dashboard left cut short)."""
    from purehr.run.planning.resume import plan_resume
    from purehr.run.planning.run_plan import RunRequest, new_run_plan
    from purehr.tracking import TrackingSettings

    for folder in ("here", "elsewhere"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "here")
    request = RunRequest.checked(["hrv"], [0, 1], log=TrackingSettings(("tensorboard",), "tb"))
    plan = new_run_plan(tmp_path / "run", request)
    assert plan.tracking.log_dir == str(tmp_path / "here" / "tb")
    run = write_run(tmp_path / "run")
    manifest = {**json.loads((run / "manifest.json").read_text()), "tracking": plan.tracking.to_json()}
    monkeypatch.chdir(tmp_path / "elsewhere")
    resumed = plan_resume(RunDirectory(run), manifest, RunRequest.checked())
    assert resumed.tracking.log_dir == str(tmp_path / "here" / "tb")
    assert resumed.tracking.owner == plan.tracking.owner is not None


def test_a_directory_holding_only_the_lock_of_a_run_that_failed_early_is_reused(tmp_path):
    """Issue 63 W16: a run that failed before its manifest (a bad environment, a busy device)
    leaves only purehr's ``.lock``; the same command again must start the run, not refuse the
    directory as "holds no purehr run". Anything else beside the lock is still the user's."""
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").write_text("12345\n")
    assert prepare_run_directory(RunDirectory(run), resume=False, overwrite=False) is False
    (run / "thesis.tex").write_text("\\documentclass{article}\n")
    with pytest.raises(FileExistsError, match="is not empty and holds no purehr run"):
        prepare_run_directory(RunDirectory(run), resume=False, overwrite=False)


def test_a_resume_keeps_the_no_render_its_run_was_started_with(tmp_path, capsys, monkeypatch):
    """Issue 63 F10: ``--no-render`` is recorded in the manifest's run_config; a ``--resume``
    without it rendered anyway. It renders nothing, and says how to render."""
    import purehr.viz.render as render

    run = write_run(tmp_path / "run", status="finished")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["run_config"] = {"path": None, "sha256": None, "values": {"no_render": True, "tasks": ["hrv"]}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    rendered = []
    monkeypatch.setattr(render, "render_run", lambda *args, **kwargs: rendered.append(args))
    import purehr.cli.train

    script = train_all_seeds_script()
    # the command's code (the script wraps it)
    monkeypatch.setattr(purehr.cli.train, "report", lambda run_dir, console=False: None)
    assert script.main(["--run-dir", str(run), "--resume"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert rendered == [], err
    assert f"--resume: {run} was started with --no-render: rendering nothing" in err
    assert f"scripts/render.py --run-dir {run} renders its figures" in err


def test_a_resume_whose_factory_module_does_not_import_names_the_file_the_run_recorded(tmp_path):
    """Issue 63 F6: "module ... does not import" said nothing of where the run found it; the
    manifest's ``sources`` recorded the file, so the error names it and the PYTHONPATH to give."""
    from purehr.run.store.record import task_record

    file = tmp_path / "pkg" / "gone_env.py"
    manifest = {"sources": {"pkg.gone_env:make_env": {"suite": "factory", "file": str(file)}}}
    with pytest.raises(ValueError) as refused:
        task_record(manifest, "pkg.gone_env:make_env")
    message = str(refused.value)
    assert "module 'pkg.gone_env' does not import" in message
    assert f"The run recorded it from {file}: give PYTHONPATH={tmp_path} (or run from {tmp_path})" in message


def test_a_full_disk_names_the_file_and_the_option_that_chose_its_directory(tmp_path, capsys, monkeypatch):
    """Issue 63 W15: "[Errno 28] No space left on device" named no file and no option. A write
    that fails says which file, and the command line says which option chose the directory."""
    import errno

    from purehr.run.store import files

    def full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        train_all_seeds_script().main(["--run-dir", str(run), "--tasks", "hrv", "--seeds", "0", *TINY])
    err = " ".join(capsys.readouterr().err.split())
    assert stopped.value.code == 2, err
    assert f"[Errno 28] No space left on device: '{run / 'RESUME.txt'}'" in err
    assert f"(the run directory, chosen by --run-dir {run}: free space there, or choose another --run-dir)" in err


def test_render_of_a_run_directory_it_cannot_write_says_so_before_any_work(tmp_path, capsys, monkeypatch):
    """Issue 63 W17: scripts/render.py on a read-only run directory ended in a traceback from
    deep in matplotlib. It is refused first, naming the folder and the way out (a read-only
    mount is simulated: root writes through permission bits)."""
    import tempfile

    import purehr.viz.render as render

    run = write_run(tmp_path / "run", status="finished")

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Read-only file system", str(run / ".purehr-write-probe-x"))

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", read_only)
    monkeypatch.setattr(render, "render_run", lambda *args, **kwargs: pytest.fail("rendered into a read-only run"))
    spec = importlib.util.spec_from_file_location("render_script", ROOT / "scripts" / "render.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--run-dir", str(run)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"render: the figures go into {run / 'figures'}, which cannot be written" in err, err
    assert f"copy the run somewhere you can write (cp -r {run} DIR) and render the copy" in err
