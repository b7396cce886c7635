"""Every protocol guarantee for every algorithm of the matrix (tests/algorithm_matrix.py): one
uninterrupted reference run per algorithm (shared with conftest's where the row says so) feeds
every check, and each algorithm is killed (SIGKILL, a subprocess on the other core) and
interrupted (Ctrl-C, in process) once:

    checkpoints at every target, held-out evaluation at each, the baselines' numbers recorded
    SIGKILL then resume: every checkpoint digest equal to the uninterrupted run's
    Ctrl-C then resume: the same, and the final states equal leaf for leaf
    dashboards: the killed, resumed run's TensorBoard holds every step once
    divergence guard: a non-finite-forcing hyperparameter for seed 0 freezes it, records it in
    the manifest and leaves seed 1 as it was
    PBT: members copy their parents' population fields and explore the algorithm's own
    hyperparameters, inside the compiled call
    restore, evaluate, render, publish: from the reference's files

PPO's own, deeper tests of each (tests/test_run.py, test_interrupt.py, test_pbt_run.py, ...) stay,
and where one gives a check's guarantee the PPO row names it (``AlgorithmRow.covered_by``) and the
check is skipped for PPO, naming it: the same guarantee is not trained twice. This file is what
another algorithm must pass by adding its row."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import json
import shutil
import signal
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from algorithm_matrix import CHECKS, MATRIX, POPULATION, SEEDS, AlgorithmRow
from conftest import KilledProcess, ctrl_c_from_a_callback, started_at_the_compile

from purehr.algorithms.registry import ALGORITHMS, make_algorithm
from purehr.population import PBTSettings
from purehr.run import restore
from purehr.run.compiled.train_all import checkpoint_schedule, population_updates
from purehr.run.host.recorder import RunRecorder
from purehr.run.outcome import RunDiverged, RunInterrupted
from purehr.run.protocol import train_all_seeds
from purehr.run.store.files import read_csv, write_csv
from purehr.tasks import get_task

CHILD = Path(__file__).resolve().parent / "matrix_child.py"
LOGGED = importlib.util.find_spec("tensorboardX") is not None and importlib.util.find_spec("tensorboard") is not None
INTERRUPT_AT = 7  # the watched task's update at which Ctrl-C comes


def digests(run: Path, task: str, seed: int) -> list[str]:
    return [row["state_digest"] for row in read_csv(run / task / f"seed_{seed}" / "checkpoints.csv")]


def leaves_equal(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_every_registered_algorithm_has_a_row():
    assert sorted(MATRIX) == sorted(ALGORITHMS)
    for name, row in MATRIX.items():
        assert row.name == name and row.tasks and row.diverging[0] in ALGORITHMS[name].hyperparameter_names()


def test_a_check_left_to_a_deeper_test_names_a_test_that_exists():
    """``covered_by`` may only name a matrix check and an existing test function of its file."""
    root = Path(__file__).resolve().parents[1]
    for row in MATRIX.values():
        for check, test in row.covered_by.items():
            assert check in CHECKS, (row.name, check)
            path, name = test.split("::")
            assert f"def {name}(" in (root / path).read_text(), (row.name, test)


def skip_if_covered(row: AlgorithmRow, check: str) -> None:
    if not row.runs(check):
        pytest.skip(f"{row.name}: given by {row.covered_by[check]}")


def killed_child(row: AlgorithmRow, run_dir: Path) -> KilledProcess:
    """``matrix_child.py`` for ``row``, SIGKILLed once the watched task's seed 1 has 3 checkpoint
    rows (it trains on the other core while this process trains the reference); started by
    ``started_at_the_compile`` once the reference compiles."""
    log = ["--log", "tensorboard"] if LOGGED else []
    command = [sys.executable, "-W", "ignore", str(CHILD), row.name, str(run_dir), *log]
    return KilledProcess(command, run_dir / row.watched / "seed_1" / "checkpoints.csv", start=False, wait_s=900)


def interrupted_run(row: AlgorithmRow, run_dir: Path) -> RunInterrupted | None:
    """The row's run in process (the reference's compiled program), sent one SIGINT, as a
    terminal's Ctrl-C reaches it, at the watched task's update ``INTERRUPT_AT``."""
    logged, sent = RunRecorder.on_update, {}

    def interrupting(self, task, metrics):
        if task == row.watched and int(np.asarray(metrics["update"])[0]) == INTERRUPT_AT and not sent:
            ctrl_c_from_a_callback(self)
            sent["at"] = True
        return logged(self, task, metrics)

    handler = signal.getsignal(signal.SIGINT)
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(io.StringIO()):
        patch.setattr(RunRecorder, "on_update", interrupting)
        try:
            train_all_seeds(run_dir, seeds=SEEDS, progress=False, **row.run_arguments())
        except RunInterrupted as stopped:
            return stopped
        finally:
            signal.signal(signal.SIGINT, handler)
    return None


@pytest.fixture(scope="module", params=list(MATRIX), ids=list(MATRIX))
def matrix(request, tmp_path_factory):
    """Per algorithm: the uninterrupted reference (conftest's where shared), a Ctrl-C'd run and
    its resume in process, and a SIGKILLed child resumed here."""
    row = MATRIX[request.param]
    base = tmp_path_factory.mktemp(f"matrix-{row.name}")
    killing = row.runs("sigkill") or row.runs("dashboards")
    child = killed_child(row, base / "killed") if killing else None
    with started_at_the_compile(child.start if child is not None else lambda: None):
        if row.shared_reference:
            reference = request.getfixturevalue(row.shared_reference)["summary"]
        else:
            with contextlib.redirect_stderr(io.StringIO()):
                reference = train_all_seeds(base / "reference", seeds=SEEDS, progress=False, **row.run_arguments())
    interrupted = interrupted_resume = killed = None
    if row.runs("ctrl_c"):
        interrupted = interrupted_run(row, base / "interrupted")
        with contextlib.redirect_stderr(io.StringIO()):
            interrupted_resume = train_all_seeds(base / "interrupted", resume=True, progress=False)
    if child is not None:
        output = child.wait()
        killed = {"rows": child.rows, "returncode": child.returncode, "output": output}
    if child is not None and child.returncode == -signal.SIGKILL:
        with contextlib.redirect_stderr(io.StringIO()):
            train_all_seeds(base / "killed", resume=True, progress=False)
    return {
        "row": row,
        "base": base,
        "reference": reference,
        "interrupted": interrupted,
        "interrupted_resume": interrupted_resume,
        "killed": killed,
    }


def test_checkpoints_at_every_target_with_heldout_evaluation_and_baselines(matrix):
    row, root = matrix["row"], matrix["reference"].run_dir
    skip_if_covered(row, "checkpoints")
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["status"] == "finished"
    assert manifest.get("algorithms", {task: "ppo" for task in row.tasks}) == {task: row.name for task in row.tasks}
    for task, config in row.configs().items():
        protocol = get_protocol(manifest, task)
        updates, full = checkpoint_schedule(config, protocol)
        baselines = manifest["baselines"][task]  # the floors' held-out numbers, the reference policy's where it has one
        numbers = [*baselines["floors"].values(), *([baselines["metrics"]] if baselines["metrics"] else [])]
        assert numbers and all(np.isfinite(float(metrics["return_mean"])) for metrics in numbers), task
        for seed in SEEDS:
            rows = read_csv(root / task / f"seed_{seed}" / "checkpoints.csv")
            assert [int(r["update"]) for r in rows] == updates.tolist(), (task, seed)
            for checkpoint, is_full in zip(rows, full):
                assert int(checkpoint["eval_episodes"]) == (
                    protocol.eval_episodes if is_full else protocol.quick_eval_episodes
                )
                assert np.isfinite(float(checkpoint["eval_return_mean"])), (task, seed, checkpoint["update"])
                assert (root / checkpoint["checkpoint_path"]).is_dir()


def get_protocol(manifest: dict, task: str):
    from purehr.protocol_settings import ProtocolSettings

    recorded = manifest["protocol_settings"][task]
    return ProtocolSettings(
        **{
            name: recorded[name]
            for name in ("checkpoint_interval", "eval_episodes", "full_eval_interval", "quick_eval_episodes")
        }
    )


def test_sigkill_then_resume_is_bit_identical(matrix):
    row, killed = matrix["row"], matrix["killed"]
    skip_if_covered(row, "sigkill")
    assert killed["returncode"] == -signal.SIGKILL and killed["rows"] >= 3, killed["output"][-2000:]
    for task in row.tasks:
        for seed in SEEDS:
            assert digests(matrix["base"] / "killed", task, seed) == digests(matrix["reference"].run_dir, task, seed)


def test_ctrl_c_then_resume_is_bit_identical(matrix):
    row, stopped = matrix["row"], matrix["interrupted"]
    skip_if_covered(row, "ctrl_c")
    assert stopped is not None, "the run was not interrupted"
    resumed, reference = matrix["interrupted_resume"], matrix["reference"]
    for task in row.tasks:
        for seed in SEEDS:
            assert digests(matrix["base"] / "interrupted", task, seed) == digests(reference.run_dir, task, seed)
        assert leaves_equal(resumed.final_runners[task], reference.final_runners[task]), task


@pytest.mark.skipif(not LOGGED, reason="tensorboardX is not installed")
def test_the_resumed_runs_dashboards_hold_every_step_once(matrix):
    from dashboard_checks import assert_tensorboard_exact

    row = matrix["row"]
    skip_if_covered(row, "dashboards")
    names = ALGORITHMS[row.name].metric_names()
    columns = (names.rollout[0], *names.learning)  # the rollout's and every learning metric
    for task in row.tasks:
        for seed in SEEDS:
            killed, reference = matrix["base"] / "killed", matrix["reference"].run_dir
            assert_tensorboard_exact(killed, reference, task, seed, pieces=2, columns=columns)


def resumable_at(run: Path, update: int) -> None:
    """The run as if killed after its checkpoint at ``update``: index rows up to it, "running"."""
    for seed_dir in sorted(run.glob("*/seed_*")):
        for name in ("checkpoints.csv", "updates.csv"):
            rows = read_csv(seed_dir / name)
            write_csv(seed_dir / name, list(rows[0]), [r for r in rows if int(r["update"]) <= update])
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(dict(manifest, status="running")))


def test_a_diverging_hyperparameter_freezes_the_seed_and_records_it(matrix, tmp_path, monkeypatch):
    """The reference's program again (hyperparameters are data in the state): resumed after its
    second checkpoint with seed 0's ``diverging`` hyperparameter set, seed 0 diverges in the next
    update, stays frozen, and the manifest names it; seed 1 ends as in the reference."""
    import purehr.run.protocol as protocol

    row, reference = matrix["row"], matrix["reference"]
    skip_if_covered(row, "divergence")
    name, value = row.diverging
    run = tmp_path / "run"
    shutil.copytree(reference.run_dir, run)
    task = row.watched
    resumed_at = int(read_csv(run / task / "seed_0" / "checkpoints.csv")[2]["update"])
    resumable_at(run, resumed_at)
    original = protocol.restore_task

    def diverging_seed_0(*args, **kwargs):
        resumed = original(*args, **kwargs)
        hparams = resumed.runner.hparams
        values = np.array(getattr(hparams, name))
        values[0] = value
        return dataclasses.replace(resumed, runner=resumed.runner.replace(hparams=hparams.replace(**{name: values})))

    monkeypatch.setattr(protocol, "restore_task", diverging_seed_0)
    with pytest.raises(RunDiverged) as raised, contextlib.redirect_stderr(io.StringIO()):
        train_all_seeds(run, resume=True, progress=False)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "diverged"
    for task in row.tasks:
        saved = [int(r["update"]) for r in read_csv(run / task / "seed_0" / "checkpoints.csv")]
        healthy = max(update for update in saved if update <= resumed_at)  # where it resumed
        assert list(raised.value.diverged[task]) == ["0"], task
        assert raised.value.diverged[task]["0"]["update"] == healthy + 1, task
        assert digests(run, task, 1) == digests(reference.run_dir, task, 1), task  # seed 1 untouched
        steps = {int(r["update"]): int(r["actual_steps"]) for r in read_csv(run / task / "seed_0" / "checkpoints.csv")}
        last_healthy, latest = restore(run, task, 0, steps[healthy]), restore(run, task, 0, "latest")
        assert latest.steps > last_healthy.steps
        assert leaves_equal(latest.params, last_healthy.params), task  # frozen: no update after the non-finite one


def test_pbt_copies_population_fields_and_explores_inside_the_call(matrix, tmp_path):
    row = matrix["row"]
    skip_if_covered(row, "pbt")
    task = row.pbt_task
    settings = PBTSettings.checked(explore=list(row.explore))
    arguments = row.run_arguments([task])
    with contextlib.redirect_stderr(io.StringIO()):
        summary = train_all_seeds(tmp_path / "pbt", seeds=POPULATION, progress=False, pbt=settings, **arguments)
    run = summary.run_dir
    config = arguments["configs"][task]
    protocol = get_protocol(json.loads((run / "manifest.json").read_text()), task)
    fired = population_updates(config, protocol, settings.interval)
    assert fired
    fields = make_algorithm(config, get_task(task).make_env()).population_fields
    rows = {
        seed: {int(r["update"]): r for r in read_csv(run / task / f"seed_{seed}" / "checkpoints.csv")}
        for seed in POPULATION
    }
    copies = 0
    for update in fired:
        for child in POPULATION:
            parent = int(rows[child][update]["pbt_parent"])
            if parent == child:
                continue
            copies += 1
            steps = int(rows[child][update]["actual_steps"])
            saved_child, saved_parent = restore(run, task, child, steps), restore(run, task, parent, steps)
            for name in fields:  # what it continues from: every population field of its parent
                assert leaves_equal(getattr(saved_child.runner, name), getattr(saved_parent.runner, name)), name
            assert leaves_equal(saved_child.params, saved_parent.params)
            for name in row.explore:
                value = float(rows[child][update][f"pbt_{name}"])
                low, high = settings.bounds_of(name)
                assert low <= value <= high and value == pytest.approx(float(getattr(saved_child.runner.hparams, name)))
    assert copies == len(fired) * settings.selected(len(POPULATION))


def test_restore_evaluate_render_and_publish(matrix, tmp_path, capsys):
    from test_record_restore import load

    from purehr.reports.publish import publish_run
    from purehr.viz.render import render_run

    row, reference = matrix["row"], matrix["reference"]
    skip_if_covered(row, "restore")
    run = tmp_path / "run"
    shutil.copytree(reference.run_dir, run)
    evaluate = load("evaluate")
    for task in row.tasks:
        restored = restore(run, task, 1)
        assert restored.config == row.configs()[task]
        keys = jax.random.split(jax.random.PRNGKey(0), 3)
        batch, _ = jax.vmap(restored.env.reset, in_axes=(0, None))(keys, restored.env_params)
        actions = restored.policy(batch)  # a batch acts as its observations one by one
        one = restored.policy(jax.tree.map(lambda leaf: leaf[1], batch))
        # float32 rounding may differ between a batched and a single matrix product (XLA picks
        # other kernels): the same action to a few ulps, not always bit for bit (SAC's differ).
        np.testing.assert_allclose(
            np.asarray(jax.tree.leaves(actions)[0])[1], np.asarray(jax.tree.leaves(one)[0]), rtol=1e-5, atol=1e-6
        )
        capsys.readouterr()
        argv = ["--checkpoint", str(run), "--task", task, "--seed", "1", "--num-episodes", "2", "--json"]
        assert evaluate.main(argv) == 0
        output = json.loads(capsys.readouterr().out)
        assert output["checkpoint"]["actual_steps"] == restored.steps and np.isfinite(output["return_mean"])
    with contextlib.redirect_stderr(io.StringIO()):
        figures = render_run(run, replay=False)
    assert figures and all(path.stat().st_size > 1000 for path in figures if path.suffix == ".png")
    written = publish_run(run, tmp_path / "published")
    assert written and json.loads((tmp_path / "published" / "manifest.json").read_text())["status"] == "finished"
