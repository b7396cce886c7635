"""train_all_seeds end to end: files, checkpoint steps, restore, kill-and-resume, refusals,
corruption, rendering, what a run prints. One compiled program serves every in-process run here."""

import contextlib
import dataclasses
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import imageio_ffmpeg
import jax
import numpy as np
import pytest
from conftest import PROTOCOL_CLI, PROTOCOL_SEEDS, PROTOCOL_TASKS, KilledRun, protocol_configs, started_at_the_compile

from purehr.run import restore
from purehr.run.planning.preparation import RunDirectoryInUse
from purehr.run.protocol import train_all_seeds
from purehr.run.store.checkpoints import CorruptCheckpointError, tree_digest
from purehr.run.store.columns import UPDATE_COLUMNS
from purehr.run.store.files import read_csv
from purehr.viz.render import render_trained_run

ROOT = Path(__file__).resolve().parents[1]
SEEDS = PROTOCOL_SEEDS
TASKS = PROTOCOL_TASKS
CLI = PROTOCOL_CLI + ["--seeds", "0", "1", "--no-render", "--no-progress"]
LOGGED = importlib.util.find_spec("wandb") is not None and importlib.util.find_spec("tensorboardX") is not None
# the killed run also logs to both dashboards (when installed): its resume must hold every step once there
# batch 512: targets 0, 3000, ..., 15000 are first reached at 0, 3072, 6144, ...; the last update saves too
EXPECTED_TARGETS = [0, 3000, 6000, 9000, 12000, 15000, 16384]
EXPECTED_ACTUAL = [0, 3072, 6144, 9216, 12288, 15360, 16384]
# every second target (0, 6000, 12000) and the last get the full evaluation and a showcase
EXPECTED_FULL = [0, 6144, 12288, 16384]


def params_equal(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, request):
    """The session's reference run (in process), rendered here into a copy, and, at the same time
    on the other core, a subprocess run of the same protocol that is SIGKILLed after its third
    checkpoint."""
    base = tmp_path_factory.mktemp("runs")
    killed_dir = base / "killed"
    child = KilledRun(
        killed_dir,
        CLI + (["--log", "tensorboard", "wandb"] if LOGGED else []),
        "swing/seed_1/checkpoints.csv",
        start=False,
    )
    with started_at_the_compile(child.start):
        trained = request.getfixturevalue("protocol_reference")  # trained now, unless an earlier file did
    reference = dataclasses.replace(trained["summary"], run_dir=base / "reference")
    shutil.copytree(trained["summary"].run_dir, reference.run_dir)
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("always")
        render_trained_run(reference.run_dir)  # as scripts/train_all_seeds.py does after training
    output = child.wait()
    return {
        "reference": reference,
        "warnings": trained["warnings"] + [str(w.message) for w in caught],
        "messages": trained["messages"],  # the banner, the progress line and the notes
        "killed_dir": killed_dir,
        "killed": {"rows": child.rows},
        "child_output": output,
        "child_returncode": child.returncode,
    }


def test_run_directory_has_every_file(runs):
    root = runs["reference"].run_dir
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["wall_time_s"] > 0
    for key in ("versions", "git_revision", "platform", "devices", "configs", "protocol", "baselines"):
        assert key in manifest, key
    assert manifest["versions"]["jax"] == jax.__version__
    assert manifest["baselines"]["swing"]["metrics"]["success_rate"] >= 0.95  # the structured controller
    for task in TASKS:
        assert manifest["configs"][task]["total_timesteps"] == 16384
        for seed in SEEDS:
            seed_dir = root / task / f"seed_{seed}"
            updates = read_csv(seed_dir / "updates.csv")
            assert [int(r["update"]) for r in updates] == list(range(1, 33))
            for column in UPDATE_COLUMNS:
                assert column in updates[0]
            diagnostic = {"swing": "min_tension", "hrv": "mean_distance"}.get(task)
            assert diagnostic is None or diagnostic in updates[0]
            rows = read_csv(seed_dir / "checkpoints.csv")
            for row in rows:
                assert (root / row["checkpoint_path"]).is_dir()
                full = int(row["actual_steps"]) in EXPECTED_FULL
                assert int(row["eval_episodes"]) == (4 if full else 2)
                if not full:
                    assert row["showcase_path"] == ""
                    continue
                showcase = np.load(root / row["showcase_path"], allow_pickle=False)
                assert showcase["reward"].ndim == 1 and len(showcase["reward"]) > 0
    for name in (
        "swing_learning.png",
        "swing_learning.pdf",
        "hrv_learning.png",
        "hrv_learning.pdf",
        "replay.mp4",
        "replay_poster.png",
        "replay.html",
    ):
        assert (root / "figures" / name).stat().st_size > 5_000, name
    assert (root / "figures" / "replay_timeline.json").stat().st_size > 200
    assert len(read_csv(root / "final_metrics.csv")) == len(TASKS) * len(SEEDS)


def test_a_rendered_run_forks_no_python_process(runs):
    """JAX warns at every os.fork of its multithreaded process (imageio-ffmpeg's preexec_fn did
    it for every video); training, checkpoints and rendering must start no such fork."""
    assert [message for message in runs["warnings"] if "fork" in message] == []


@pytest.mark.slow
def test_a_run_says_what_it_will_do_before_compiling_and_shows_progress_per_task(runs):
    text = runs["messages"]
    assert f"{', '.join(TASKS)} x seeds 0, 1 ({len(TASKS) * 2} trainings in one compiled program)" in text
    for task in TASKS:  # one line per task, the names in one column
        assert re.search(
            rf"\n  {re.escape(task)} +16,384 steps per seed: 32 updates of 4 envs x 128 steps, held-out checkpoints "
            "every 3,000",
            text,
        ), task
    assert "rounded up" not in text  # 16,384 is 32 whole updates of 512
    assert (
        text.index("new run in ")
        < text.index("evaluating the baselines")
        < text.index("compiling the training")
        < text.index("compiled in")
        < text.index("elapsed")
    )
    # steps per seed and per task (not 2 x 2 x 16,384 summed), the last held-out success, no nan
    assert "swing done (16.4k), held-out success" in text and "hrv done (16.4k), held-out success" in text
    assert "gymnax:CartPole-v1 done (16.4k) |" in text  # no success where the environment defines none
    assert "gymnax:CartPole-v1 at 16.4k steps: held-out return " in text  # by its return, seed by seed
    assert "swing at 16.4k steps: held-out success" in text and "(seeds " in text
    assert "nan" not in text.lower()
    # the command line prints its plan at once too (the run killed after its third checkpoint)
    output = runs["child_output"]
    assert output.index("new run in ") < output.index("compiling the training") < output.index("compiled in")


def test_the_command_line_summary_names_wall_time_results_figures_and_next_commands(runs, capsys):
    spec = importlib.util.spec_from_file_location("train_all_seeds_cli", ROOT / "scripts" / "train_all_seeds.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    root = runs["reference"].run_dir
    cli.report(root)
    out = capsys.readouterr().out
    assert f"finished {root} in " in out and "wall time, including rendering (of which compilation" in out
    assert "| swing | PPO, 2 seeds, 16,384 steps |" in out and "| hrv | oracle |" in out
    assert f"  {root / 'figures' / 'swing_learning.png'}" in out and f"  {root / 'figures' / 'replay.html'}" in out
    assert f"analyze_run.py --run-dir {root}" in out and f"evaluate.py --checkpoint {root} --task swing" in out
    assert f"restore({str(root)!r}, task='swing', seed=0, step='latest')" in out


def test_checkpoints_are_the_first_updates_at_or_beyond_each_target(runs):
    for task in TASKS:
        rows = read_csv(runs["reference"].run_dir / task / "seed_0" / "checkpoints.csv")
        assert [int(r["target_steps"]) for r in rows] == EXPECTED_TARGETS
        assert [int(r["actual_steps"]) for r in rows] == EXPECTED_ACTUAL


def test_rendered_replay_has_one_stop_and_one_video_segment_per_recorded_checkpoint(runs):
    figures = runs["reference"].run_dir / "figures"
    timeline = json.loads((figures / "replay_timeline.json").read_text())
    entries = timeline["checkpoints"] if isinstance(timeline, dict) else timeline
    assert [e["actual_steps"] for e in entries] == EXPECTED_FULL  # the checkpoints with a showcase
    frames, _ = imageio_ffmpeg.count_frames_and_secs(str(figures / "replay.mp4"))
    assert frames == sum(e["num_frames"] for e in entries) and frames > 4 * 10
    html = (figures / "replay.html").read_text()
    assert "data:video/mp4;base64," in html
    assert html.count("<option") == len(EXPECTED_FULL)


@pytest.mark.slow
def test_restore_in_a_fresh_process_returns_the_saved_parameters(runs):
    root = runs["reference"].run_dir
    script = (
        "import sys, jax, numpy as np\n"
        "from purehr.run import restore\n"
        "from purehr.run.store.checkpoints import tree_digest\n"
        f"r = restore({str(root)!r}, task='swing', seed=1, step=6000)\n"
        "print(r.steps, tree_digest(r.runner))\n"
        f"latest = restore({str(root)!r}, task='hrv', seed=1, step='latest')\n"
        "np.savez(sys.argv[1], *[np.asarray(x) for x in jax.tree.leaves(latest.params)])\n"
        "obs, _ = latest.env.reset(jax.random.PRNGKey(0), latest.env_params)\n"
        "print(np.asarray(latest.policy(obs)).tolist())\n"
    )
    saved = root.parent / "restored_params.npz"
    completed = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script, str(saved)], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    steps, digest = completed.stdout.splitlines()[0].split()
    row = [r for r in read_csv(root / "swing" / "seed_1" / "checkpoints.csv") if r["target_steps"] == "6000"][0]
    assert int(steps) == 6144 and digest == row["state_digest"]
    restored = np.load(saved, allow_pickle=False)
    final = runs["reference"].final_runners["hrv"].params
    for index, leaf in enumerate(jax.tree.leaves(final)):
        assert np.array_equal(restored[f"arr_{index}"], np.asarray(leaf)[1])
    action = json.loads(completed.stdout.splitlines()[1])
    assert len(action) == 10 and all(0 <= a <= 4 for a in action)


@pytest.fixture(scope="module")
def resumed(runs):
    """The killed run resumed here, once (with the dashboards its manifest records)."""
    assert runs["killed"].get("rows", 0) >= 3, runs["child_output"][-2000:]
    assert runs["child_returncode"] == -signal.SIGKILL
    assert json.loads((runs["killed_dir"] / "manifest.json").read_text())["status"] == "running"
    with contextlib.redirect_stderr(io.StringIO()):
        return train_all_seeds(runs["killed_dir"], tasks=TASKS, seeds=SEEDS, resume=True, progress=False)


@pytest.mark.slow
def test_killed_run_resumes_to_bit_identical_parameters(runs, resumed):
    killed_dir = runs["killed_dir"]
    assert resumed.resumed_from["swing"] >= 3072
    for task in TASKS:
        assert params_equal(resumed.final_runners[task], runs["reference"].final_runners[task]), task
        for seed in SEEDS:
            rows = read_csv(killed_dir / task / f"seed_{seed}" / "checkpoints.csv")
            reference_rows = read_csv(runs["reference"].run_dir / task / f"seed_{seed}" / "checkpoints.csv")
            assert [r["state_digest"] for r in rows] == [r["state_digest"] for r in reference_rows]
            updates = read_csv(killed_dir / task / f"seed_{seed}" / "updates.csv")
            assert [int(r["update"]) for r in updates] == list(range(1, 33))
    # the resume's manifest says which compilation cache it used (conftest's, for the whole suite)
    cache = json.loads((killed_dir / "manifest.json").read_text())["compile_cache"]
    assert cache["directory"] == os.environ["JAX_COMPILATION_CACHE_DIR"]
    assert 0 <= cache["hits"] <= cache["requests"] and cache["seconds_saved"] >= 0


@pytest.mark.slow
@pytest.mark.skipif(not LOGGED, reason="the tracking extra (tensorboardX, wandb) is not installed")
def test_the_killed_run_holds_every_step_once_on_both_dashboards(runs, resumed):
    """SIGKILLed after its third checkpoint and resumed: TensorBoard's event files and the W&B
    run, read back with their own readers, hold every step once, in order, equal to updates.csv,
    checkpoints.csv and the uninterrupted run's."""
    from dashboard_checks import assert_tensorboard_exact, assert_wandb_exact

    killed_dir, reference = runs["killed_dir"], runs["reference"].run_dir
    tracking = json.loads((killed_dir / "manifest.json").read_text())["tracking"]
    assert tracking["backends"] == ["tensorboard", "wandb"]
    run_ids = [tracking["run_ids"][task][str(seed)] for task in TASKS for seed in SEEDS]
    assert len(set(run_ids)) == len(TASKS) * len(SEEDS)  # one W&B run per task x seed, kept for the resume
    for task in TASKS:
        for seed in SEEDS:
            assert_tensorboard_exact(killed_dir, reference, task, seed, pieces=2)  # killed, resumed
            assert_wandb_exact(killed_dir, reference, task, seed, tracking["run_ids"][task][str(seed)], pieces=2)


@pytest.mark.slow
def test_a_directory_holding_a_run_is_refused(runs):
    root = runs["reference"].run_dir
    before = sorted(p.name for p in root.iterdir())
    with pytest.raises(RunDirectoryInUse, match="already holds a finished run"):
        train_all_seeds(root, tasks=TASKS, seeds=SEEDS, configs=protocol_configs(), progress=False)
    with pytest.raises(RunDirectoryInUse, match="holds a finished run: nothing left to train"):
        train_all_seeds(root, tasks=TASKS, seeds=SEEDS, resume=True, progress=False)
    assert sorted(p.name for p in root.iterdir()) == before
    completed = subprocess.run(
        [sys.executable, "-W", "ignore", str(ROOT / "scripts" / "train_all_seeds.py"), "--run-dir", str(root)] + CLI,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2 and "--resume" in completed.stderr and "--overwrite" in completed.stderr
    # the CLI's --resume of a finished run trains nothing, has no figure to add, reports, exits 0
    resumed = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            str(ROOT / "scripts" / "train_all_seeds.py"),
            "--run-dir",
            str(root),
            "--resume",
        ]
        + CLI,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "nothing left to train" in resumed.stderr and "rendering" not in resumed.stderr
    assert "| swing | PPO, 2 seeds, 16,384 steps |" in resumed.stdout
    assert sorted(p.name for p in root.iterdir()) == before


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(tasks=["swing", "pendulum"]), "unknown task 'pendulum'"),
        (dict(seeds=[0, -1]), r"seeds=\[0, -1\]"),
        (dict(seeds=[1, 1]), "each seed may appear once"),
    ],
)
def test_bad_requests_are_refused_before_any_work(tmp_path, changes, message):
    arguments = dict(tasks=TASKS, seeds=SEEDS, progress=False)
    arguments.update(changes)
    with pytest.raises(ValueError, match=message):
        train_all_seeds(tmp_path / "never", **arguments)
    assert not (tmp_path / "never").exists()


def test_corrupted_checkpoint_is_named_and_resume_falls_back(runs, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(runs["reference"].run_dir, copy)
    latest = copy / "hrv" / "seed_0" / "checkpoints" / "16384"
    data_files = sorted(
        (p for p in latest.rglob("*") if p.is_file() and p.stat().st_size > 64), key=lambda p: p.stat().st_size
    )
    victim = data_files[-1]
    content = bytearray(victim.read_bytes())
    content[len(content) // 2] ^= 0xFF  # one flipped byte in the largest data file
    victim.write_bytes(bytes(content))
    with pytest.raises(CorruptCheckpointError, match="16384"):
        restore(copy, task="hrv", seed=0, step="latest")
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["status"] = "running"  # as if it had been killed at the end
    (copy / "manifest.json").write_text(json.dumps(manifest))
    resumed = train_all_seeds(copy, tasks=TASKS, seeds=SEEDS, resume=True, progress=False)
    assert resumed.resumed_from["hrv"] == 15360
    assert params_equal(resumed.final_runners["hrv"], runs["reference"].final_runners["hrv"])
    assert any((copy / "hrv" / "seed_0" / "quarantine").iterdir())
    assert (
        tree_digest(restore(copy, task="hrv", seed=0, step="latest").runner)
        == read_csv(copy / "hrv" / "seed_0" / "checkpoints.csv")[-1]["state_digest"]
    )


def test_a_published_record_keeps_only_the_final_checkpoints_and_restores_them(runs, tmp_path):
    from purehr.reports.publish import publish_run

    source = runs["reference"].run_dir
    record = tmp_path / "record"
    publish_run(source, record)
    for task in TASKS:
        for seed in SEEDS:
            assert sorted(p.name for p in (record / task / f"seed_{seed}" / "checkpoints").iterdir()) == ["16384"]
            restored = restore(record, task=task, seed=seed, step="latest")
            assert restored.steps == 16384
            assert params_equal(restored.params, restore(source, task=task, seed=seed, step="latest").params)
    # the lowest seed keeps the showcases the replay plays (the full evaluations), the others none
    assert sorted(p.name for p in (record / "swing" / "seed_0" / "showcase").iterdir()) == [
        f"steps_{steps}.npz" for steps in sorted(EXPECTED_FULL, key=str)
    ]
    assert not (record / "swing" / "seed_1" / "showcase").exists()
    with pytest.raises(CorruptCheckpointError, match="missing"):
        restore(record, task="hrv", seed=0, step=3072)
    with pytest.raises(FileExistsError):
        publish_run(source, record)
