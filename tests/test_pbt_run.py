"""Population-based training through the protocol: one compiled call trains both tasks'
populations, the checkpoints record every member's fitness, parent and hyperparameters, and a
run SIGKILLed after its third checkpoint resumes to the final parameters, hyperparameters and
lineage of an uninterrupted run, bit for bit. hrv's population trains a user's torso (a file
outside the package, named in a config file's ``[task.hrv]`` for the command line), swing's the
shipped MLP: a copy carries the user network's weights as it does the MLP's. The step's
arithmetic is tests/test_pbt.py."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import signal
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import PROTOCOL_CLI, PROTOCOL_SMALL, KilledRun, started_at_the_compile

from purehr.population import PBTSettings
from purehr.run import restore
from purehr.run.protocol import train_all_seeds
from purehr.run.store.files import read_csv
from purehr.tasks import get_task
from purehr.viz.pbt_figures import render_pbt_figures

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["swing", "hrv"]
POPULATION = [0, 1, 2, 3]
EXPLORE = ["learning_rate", "ent_coef", "clip_range"]
FLAGS = PROTOCOL_CLI[PROTOCOL_CLI.index("--steps") :]  # PROTOCOL_SMALL without its task list
CLI = [
    "--tasks",
    *TASKS,
    *FLAGS,
    "--pbt",
    "--population",
    "4",
    "--pbt-explore",
    *EXPLORE,
    "--no-render",
    "--no-progress",
]
USER_TORSO = """
import flax.linen as nn
import jax
import jax.numpy as jnp


def torso(observation_space, action_space):
    class Torso(nn.Module):
        @nn.compact
        def __call__(self, observation):
            fields = [leaf.reshape(leaf.shape[0], -1) for leaf in jax.tree.leaves(observation)]  # hrv's dict
            return nn.tanh(nn.Dense(16)(jnp.concatenate(fields, axis=-1)))

    return Torso()
"""
"""hrv's network: a torso (PPO adds its heads) from a file outside the package."""
# batch 512, targets every 3,000 steps: checkpoints after updates 0, 6, 12, 18, 24, 30 and 32;
# the step fires at 6 ... 30 (never at the initial state or the last update)
FIRED_AT_STEPS = [3072, 6144, 9216, 12288, 15360]


def leaves_equal(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.fixture(scope="module")
def pbt_runs(tmp_path_factory):
    """An uninterrupted PBT run in process and, on the other core from its compilation on, the
    same run from the command line, SIGKILLed after its third swing checkpoint and then resumed
    here."""
    base = tmp_path_factory.mktemp("pbt")
    killed_dir = base / "killed"
    (base / "user_torso.py").write_text(USER_TORSO)
    network = f"{base / 'user_torso.py'}:torso"
    (base / "hrv_network.toml").write_text(f'[task.hrv]\nnetwork = "{network}"\n')
    child = KilledRun(
        killed_dir, [*CLI, "--config", str(base / "hrv_network.toml")], "swing/seed_3/checkpoints.csv", start=False
    )
    configs = {task: get_task(task).default_config.replace(**PROTOCOL_SMALL) for task in TASKS}
    configs["hrv"] = configs["hrv"].replace(network=network)
    with contextlib.redirect_stderr(io.StringIO()), started_at_the_compile(child.start):
        reference = train_all_seeds(
            base / "reference",
            tasks=TASKS,
            seeds=POPULATION,
            configs=configs,
            progress=False,
            pbt=PBTSettings.checked(explore=EXPLORE),
        )
    output = child.wait()
    assert child.rows >= 3 and child.returncode == -signal.SIGKILL, output[-2000:]
    assert json.loads((killed_dir / "manifest.json").read_text())["status"] == "running"
    with contextlib.redirect_stderr(io.StringIO()):
        resumed = train_all_seeds(killed_dir, resume=True, progress=False)
    return {"reference": reference, "resumed": resumed, "killed_dir": killed_dir, "network": network}


def rows_of(run_dir: Path, task: str, seed: int) -> list[dict]:
    return read_csv(run_dir / task / f"seed_{seed}" / "checkpoints.csv")


@pytest.mark.slow
def test_a_killed_pbt_run_resumes_to_the_same_parameters_hyperparameters_and_lineage(pbt_runs):
    reference, resumed = pbt_runs["reference"], pbt_runs["resumed"]
    assert 0 < resumed.resumed_from["swing"] < 16384
    recorded = [f"pbt_{name}" for name in ["fitness", "parent", *EXPLORE]]
    for task in TASKS:
        assert leaves_equal(resumed.final_runners[task], reference.final_runners[task]), task
        np.testing.assert_array_equal(  # the explored hyperparameters are part of the state
            resumed.final_runners[task].hparams.learning_rate, reference.final_runners[task].hparams.learning_rate
        )
        for seed in POPULATION:
            rows, reference_rows = rows_of(pbt_runs["killed_dir"], task, seed), rows_of(reference.run_dir, task, seed)
            assert [r["state_digest"] for r in rows] == [r["state_digest"] for r in reference_rows]
            assert [[r[c] for c in recorded] for r in rows] == [[r[c] for c in recorded] for r in reference_rows]
    manifest = json.loads((pbt_runs["killed_dir"] / "manifest.json").read_text())
    assert manifest["pbt"]["explore"] == EXPLORE and manifest["seeds"] == POPULATION
    assert (
        manifest["configs"]["hrv"]["network"] == pbt_runs["network"] and manifest["configs"]["swing"]["network"] is None
    )


@pytest.mark.slow
def test_each_checkpoint_records_the_population_and_a_copy_carries_its_parents_weights(pbt_runs):
    run_dir = pbt_runs["reference"].run_dir
    copies = 0
    for task in TASKS:
        by_seed = {seed: rows_of(run_dir, task, seed) for seed in POPULATION}
        for index, steps in enumerate(int(r["actual_steps"]) for r in by_seed[0]):
            parents = {seed: int(by_seed[seed][index]["pbt_parent"]) for seed in POPULATION}
            copied = [seed for seed, parent in parents.items() if parent != seed]
            if steps not in FIRED_AT_STEPS:
                assert not copied, (task, steps)  # the first and the last checkpoint never copy
                continue
            assert len(copied) == 1  # floor(4 x 0.25): the worst member copies the best
            (child,) = copied
            parent = parents[child]
            fitness = {seed: float(by_seed[seed][index]["pbt_fitness"]) for seed in POPULATION}
            assert fitness[child] == min(fitness.values()) and fitness[parent] == max(fitness.values())
            saved_child = restore(run_dir, task, child, steps)
            saved_parent = restore(run_dir, task, parent, steps)
            assert leaves_equal(saved_child.params, saved_parent.params)  # what it continues from
            paths = [
                jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(saved_child.params)[0]
            ]
            assert any("['torso']" in path for path in paths) == (task == "hrv"), paths  # the user's torso
            assert leaves_equal(saved_child.runner.opt_state, saved_parent.runner.opt_state)
            for name in EXPLORE:  # perturbed from the parent's value, within the bounds
                ratio = float(by_seed[child][index][f"pbt_{name}"]) / float(by_seed[parent][index][f"pbt_{name}"])
                low, high = PBTSettings().bounds_of(name)
                assert low <= float(by_seed[child][index][f"pbt_{name}"]) <= high
                assert ratio != 1.0 or float(by_seed[child][index][f"pbt_{name}"]) in (low, high)
            copies += 1
    assert copies == 2 * len(FIRED_AT_STEPS)
    figures = render_pbt_figures(run_dir)
    assert sorted(p.name for p in figures if p.suffix == ".png") == sorted(
        f"pbt_{name}_{task}.png" for name in ("hyperparameters", "lineage", "learning") for task in TASKS
    )


def resumable_at(run: Path, steps: int) -> None:
    """The run as if killed after its checkpoint at ``steps``: index rows up to it, "running"."""
    from purehr.run.store.files import write_csv

    for seed_dir in sorted(run.glob("*/seed_*")):
        for name, column, last in (("checkpoints.csv", "actual_steps", steps), ("updates.csv", "update", steps // 512)):
            rows = read_csv(seed_dir / name)
            write_csv(seed_dir / name, list(rows[0]), [row for row in rows if int(row[column]) <= last])
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(dict(manifest, status="running")))


@pytest.mark.slow
def test_a_member_that_diverges_twice_is_recorded_each_time_and_the_run_ends_diverged(
    pbt_runs, tmp_path, monkeypatch, capsys
):
    """The reference run's program again (the learning rate is data in the state): resumed at
    update 12 with seed 0's learning rate 1e30, seed 0 diverges at update 13 and PBT gives it a
    better member's weights at 18; resumed at update 24 the same way, it diverges at 25 and is
    replaced at 30. Each divergence is warned and recorded (updates.csv, checkpoints.csv, the
    manifest, the error, the results table), and the run ends "diverged", exit 1 from the CLI,
    although every member ends healthy."""
    import dataclasses
    import shutil

    import purehr.run.protocol as protocol
    from purehr.reports.results_table import results_table
    from purehr.run.outcome import RunDiverged

    run = tmp_path / "run"
    shutil.copytree(pbt_runs["reference"].run_dir, run)
    original = protocol.restore_task

    def huge_learning_rate_for_seed_0(*args, **kwargs):
        resumed = original(*args, **kwargs)
        hparams = resumed.runner.hparams
        learning_rate = np.array(hparams.learning_rate)
        learning_rate[0] = 1e30
        return dataclasses.replace(
            resumed, runner=resumed.runner.replace(hparams=hparams.replace(learning_rate=learning_rate))
        )

    monkeypatch.setattr(protocol, "restore_task", huge_learning_rate_for_seed_0)
    for steps, diverged_at in ((6144, 13), (12288, 25)):
        resumable_at(run, steps)
        capsys.readouterr()
        with pytest.raises(RunDiverged) as raised:
            train_all_seeds(run, resume=True, progress=False)
        assert f"warning: hrv seed 0 diverged at update {diverged_at}" in capsys.readouterr().err
    for task in TASKS:
        rows = rows_of(run, task, 0)
        marked = {
            int(r["update"]): int(r["pbt_diverged_at_update"]) for r in rows if r["pbt_diverged_at_update"] != "0"
        }
        assert marked == {18: 13, 30: 25}, task  # at the step that replaced it, of the weights it had
        parents = {int(r["update"]): int(r["pbt_parent"]) for r in rows}
        assert parents[18] != 0 and parents[30] != 0
        divergences = raised.value.diverged[task]["0"]["divergences"]
        assert [(d["update"], d["replaced_at_update"], d["replaced_by_seed"]) for d in divergences] == [
            (13, 18, parents[18]),
            (25, 30, parents[30]),
        ]
        assert list(raised.value.diverged[task]) == ["0"]
        updates = [int(r["diverged_at_update"]) for r in read_csv(run / task / "seed_0" / "updates.csv")]
        assert updates == [0] * 12 + [13] * 6 + [0] * 6 + [25] * 6 + [0] * 2
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "diverged" and manifest["diverged"] == raised.value.diverged
    said = str(raised.value)
    assert f"hrv seed 0 at update 13 (6,656 env steps; PBT gave it seed {parents[18]}'s weights at update 18)" in said
    assert "hrv seed 0 at update 13" in results_table(run) and "and at update 25" in results_table(run)
    # the command line: nothing left to train, the same verdict, exit 1
    spec = importlib.util.spec_from_file_location("train_all_seeds_pbt", ROOT / "scripts" / "train_all_seeds.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with pytest.raises(SystemExit) as exited:
        script.main(["--run-dir", str(run), "--resume", "--no-render", "--no-progress"])
    assert exited.value.code == 1 and "error: training diverged: swing seed 0 at update 13" in capsys.readouterr().err
    # evaluate.py on seed 0's checkpoint after the copy says whose weights it holds
    spec = importlib.util.spec_from_file_location("evaluate_pbt", ROOT / "scripts" / "evaluate.py")
    evaluate = sys.modules["evaluate_pbt"] = importlib.util.module_from_spec(spec)  # its dataclasses need it
    spec.loader.exec_module(evaluate)
    argv = ["--run-dir", str(run), "--task", "hrv", "--seed", "0", "--step", "9216", "--num-episodes", "1", "--json"]
    assert evaluate.main(argv) == 0
    out, err = capsys.readouterr()
    assert f"note: hrv seed 0's checkpoint at 9,216 steps holds seed {parents[18]}'s weights, not its own" in err
    assert json.loads(out)["checkpoint"]["pbt_weights_of_seed"] == parents[18]
