"""Everything after training for a task that is neither swing nor hrv (issue 22): a suite's task
(gymnax:CartPole-v1) has no reference policy, only floors, and defines no success (NaN), and its
name holds a colon. The session's small protocol run (swing, hrv and gymnax:CartPole-v1, two
seeds: tests/conftest.py), copied and rendered once for the module, is read by the end-of-run
table and summary, the figures, the analysis, ``scripts/evaluate.py``, ``restore`` in a fresh
process and the seed API's save/load."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import PROTOCOL_SEEDS, PROTOCOL_TASKS

from purehr.algorithms.ppo.config import CONTINUOUS_DEFAULTS
from purehr.envs.gymnax_adapter import GymnaxEnv
from purehr.model.facade import PPOModel, train_hr_ppo
from purehr.model.saved import SELF_DIGEST, description_digest
from purehr.reports.analysis import analyze_run
from purehr.reports.results_table import floor_comparisons, goals_met, results_table
from purehr.reports.summary import final_summary
from purehr.run import restore
from purehr.tasks import get_task
from purehr.viz.learning_curves import learning_figure
from purehr.viz.render import expected_figures, missing_figures, render_run
from purehr.viz.run_data import load_run

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = "gymnax:CartPole-v1"
SEEDS = PROTOCOL_SEEDS


@pytest.fixture(scope="module")
def run(protocol_reference, tmp_path_factory) -> Path:
    """The session's protocol run (conftest.py: swing, hrv and gymnax:CartPole-v1 x seeds 0 and 1,
    16,384 steps, trained once for every protocol test), copied (never changed) and rendered
    without the swing's replay video: no other compilation for this module."""
    copy = tmp_path_factory.mktemp("any_task") / "mixed"
    shutil.copytree(protocol_reference["summary"].run_dir, copy)
    render_run(copy, replay=False)
    return copy


def manifest_of(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def last_rows(run: Path, task: str) -> list[dict[str, str]]:
    """Each seed's last checkpoints.csv row, read by hand (not through purehr's reader)."""
    rows = []
    for seed in SEEDS:
        with (run / task / f"seed_{seed}" / "checkpoints.csv").open(newline="") as handle:
            rows.append(list(csv.DictReader(handle))[-1])
    return rows


def load_script(name: str, folder: str = "scripts"):
    module_name = f"_any_task_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, ROOT / folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


# --- the end-of-run table and summary --------------------------------------------------------


@pytest.mark.slow
def test_the_table_gives_ppo_and_the_floors_and_no_reference(run):
    table = results_table(run)
    floor = manifest_of(run)["baselines"][CARTPOLE]["floors"]["random"]
    assert manifest_of(run)["baselines"][CARTPOLE]["metrics"] is None
    # the floor's row holds the manifest's numbers; success is "-": CartPole defines none
    assert (
        f"| {CARTPOLE} | random | - | episode length (steps): {floor['episode_length']:.1f} | "
        f"{floor['return_mean']:.2f} | |" in table.splitlines()
    )
    returns = [float(row["eval_return_mean"]) for row in last_rows(run, CARTPOLE)]
    steps = f"{int(last_rows(run, CARTPOLE)[0]['actual_steps']):,}"
    ppo = next(line for line in table.splitlines() if line.startswith(f"| {CARTPOLE} | PPO, 2 seeds, {steps} steps |"))
    cells = [cell.strip() for cell in ppo.split("|")[1:-1]]
    assert cells[2] == "-" and cells[4].startswith(f"{np.mean(returns):.2f} [")
    assert cells[5] == "returns " + ", ".join(f"{value:.2f}" for value in returns)
    assert [line.split("|")[2].strip() for line in table.splitlines() if line.startswith(f"| {CARTPOLE} |")] == [
        f"PPO, 2 seeds, {steps} steps",
        "random",
    ]  # no reference row
    assert "| hrv | oracle | 1.00 |" in table  # the built-in task keeps its reference
    assert f"no reference policy for {CARTPOLE}: PPO against the floors only" in table
    assert f"success -: {CARTPOLE} defines no success" in table


@pytest.mark.slow
def test_the_summary_compares_ppo_with_the_best_floor_and_claims_no_goal(run):
    comparison = floor_comparisons(run)[CARTPOLE]
    returns = [float(row["eval_return_mean"]) for row in last_rows(run, CARTPOLE)]
    floor = manifest_of(run)["baselines"][CARTPOLE]["floors"]["random"]["return_mean"]
    above = sum(value > floor for value in returns)
    assert comparison["best_floor"] == "random" and comparison["seeds_above_best_floor"] == above
    assert comparison["reference"] is None and math.isnan(comparison["reference_value"])
    assert CARTPOLE not in goals_met(run) and "hrv" in goals_met(run)  # the protocol's goals are swing's and hrv's
    text = final_summary(run, scripts_dir=ROOT / "scripts", cwd=run.parent)
    assert (
        f"{CARTPOLE} (no reference policy, no protocol goal): PPO held-out return {np.mean(returns):.4g} "
        f"(mean of 2 seeds); best floor random {floor:.4g}: PPO above it on {above} of 2 seeds" in text
    )
    assert f"{CARTPOLE} goal" not in text and "baseline (where the task has one)" in text
    assert f"  mixed/figures/{CARTPOLE}_learning.png" in text.splitlines()


# --- figures ---------------------------------------------------------------------------------


def _panels(figure):
    return [ax for ax in figure.axes if ax.get_ylabel()]


@pytest.mark.slow
def test_every_task_has_its_figures_and_cartpole_draws_return_and_its_floor(run):
    assert missing_figures(run) == ["replay.html"]  # drawn without the swing's replay; every task's figures
    assert f"{CARTPOLE}_learning.png" in expected_figures(PROTOCOL_TASKS)
    assert "replay.html" not in expected_figures(["hrv", CARTPOLE])  # the replay is the swing's only
    loaded = load_run(run)
    cartpole = _panels(learning_figure(loaded, CARTPOLE))
    assert [ax.get_ylabel() for ax in cartpole] == ["held-out mean return"]  # no all-NaN success panel
    floor = manifest_of(run)["baselines"][CARTPOLE]["floors"]["random"]["return_mean"]
    labels = {line.get_label(): line for line in cartpole[0].get_lines()}
    (floor_label,) = [label for label in labels if label.startswith("floor: random")]
    np.testing.assert_allclose(labels[floor_label].get_ydata(), floor)
    assert not any(label.startswith("baseline") for label in labels)  # no reference line
    hrv = [ax.get_ylabel() for ax in _panels(learning_figure(loaded, "hrv"))]
    assert hrv[:2] == ["held-out success rate", "held-out mean return"]


# --- analysis --------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_analysis_reads_cartpole_by_its_return(run, capsys):
    analysis = analyze_run(run)["tasks"]
    cartpole, hrv = analysis[CARTPOLE], analysis["hrv"]
    assert not cartpole["defines_success"] and hrv["defines_success"]
    for name in ("training_success_rate", "heldout_success_rate", "generalisation"):
        assert name in cartpole["not_measured"] and name not in hrv["not_measured"]
        assert all(math.isnan(metrics[name]) for metrics in cartpole["seeds"].values())
    returns = [float(row["eval_return_mean"]) for row in last_rows(run, CARTPOLE)]
    assert [cartpole["seeds"][seed]["heldout_return_mean"] for seed in SEEDS] == pytest.approx(returns)
    assert load_script("analyze_run").main(["--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"{CARTPOLE} defines no success" in out and "hrv defines no success" not in out


# --- evaluate.py and restore -----------------------------------------------------------------


@pytest.mark.slow
def test_evaluate_repeats_the_checkpoint_row_and_the_manifest_floor(run, capsys):
    evaluate = load_script("evaluate")
    row = last_rows(run, CARTPOLE)[0]
    argv = ["--run-dir", str(run), "--task", CARTPOLE, "--seed", "0", "--num-episodes", row["eval_episodes"], "--json"]
    assert evaluate.main(argv) == 0
    output = json.loads(capsys.readouterr().out)
    assert output["checkpoint"]["actual_steps"] == int(row["actual_steps"]) and output["success_rate"] is None
    for name in ("return_mean", "return_std", "return_min", "episode_length"):  # the same held-out episodes
        assert output[name] == pytest.approx(float(row[f"eval_{name}"]), rel=1e-5, abs=1e-5), name
    floor = manifest_of(run)["baselines"][CARTPOLE]["floors"]["random"]
    assert evaluate.main([*argv[:4], "--policy", "random", "--num-episodes", row["eval_episodes"], "--json"]) == 0
    output = json.loads(capsys.readouterr().out)
    assert output["return_mean"] == pytest.approx(floor["return_mean"], rel=1e-6)
    assert output["environment_of"] == str(run)


@pytest.mark.slow
def test_restore_in_a_fresh_process_acts_as_here(run, tmp_path):
    observation = [0.01, -0.02, 0.03, 0.04]
    here = restore(run, CARTPOLE, 1)
    code = (
        "import json, sys, numpy as np; from purehr.run import restore; "
        f"r = restore(sys.argv[1], {CARTPOLE!r}, 1); "
        f"print(json.dumps([r.steps, type(r.env).__name__, int(r.policy(np.asarray({observation}, np.float32)))]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(run)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    expected = [here.steps, "GymnaxEnv", int(here.policy(np.asarray(observation, np.float32)))]
    assert json.loads(done.stdout.splitlines()[-1]) == expected


def test_every_script_takes_any_task_name_and_names_the_choices(capsys):
    parsers = {
        "evaluate": (load_script("evaluate"), ["--policy", "random"]),
        "sweep": (load_script("sweep"), ["--out", "x"]),
        "ablation": (load_script("ablation", "studies/scripts"), ["--out", "x"]),
        "example_analysis": (load_script("example_analysis"), ["--run-dir", "x"]),
    }
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        parsers["host_loop_ppo"] = (load_script("host_loop_ppo", "benchmarks"), [])
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    for name, (script, rest) in parsers.items():
        assert script.build_parser().parse_args(["--task", CARTPOLE, *rest]).task == CARTPOLE, name
        with pytest.raises(SystemExit) as exited:
            script.build_parser().parse_args(["--task", "gymnax:CartPol", *rest])
        assert exited.value.code == 2
        assert "argument --task: unknown gymnax environment 'CartPol' (closest: ['CartPole-v1'])" in (
            capsys.readouterr().err
        ), name
    with pytest.raises(SystemExit) as exited:
        load_script("ablation", "studies/scripts").main(["--task", CARTPOLE, "--out", "x"])
    assert exited.value.code == 2 and "no ablation is defined for it" in capsys.readouterr().err


# --- the seed API ----------------------------------------------------------------------------


def _same(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(
        (math.isnan(a) and math.isnan(b)) or a == b for a, b in ((first[k], second[k]) for k in first)
    )


def test_the_seed_api_trains_an_environment_with_its_task_defaults():
    """``train_hr_ppo(env)`` starts from the env's task's config (CartPole: PureJaxRL's), an
    environment of no task from the defaults for its action space; hrv keeps HRV_DEFAULTS."""
    from purehr.model.facade import default_config_of
    from purehr.tasks import HRV_DEFAULTS

    assert default_config_of(get_task(CARTPOLE).make_env()) is get_task(CARTPOLE).default_config
    assert default_config_of(GymnaxEnv("Pendulum-v1")) == CONTINUOUS_DEFAULTS  # built by no task: by its actions
    assert default_config_of(get_task("hrv").make_env()) is HRV_DEFAULTS
    with pytest.raises(ValueError, match="minibatch_size=100"):  # the task's defaults, then the arguments' checks
        train_hr_ppo(get_task(CARTPOLE).make_env(), timesteps=512, batch_size=100)


@pytest.mark.slow
def test_a_cartpole_model_saves_and_loads_by_its_task_name(run, tmp_path):
    restored = restore(run, CARTPOLE, 0)  # its environment built by the task, as get_task(...).make_env() builds one
    model = PPOModel(restored.env, restored.env_params, restored.config, restored.params, {"loss": np.zeros(2)}, 0)
    episodes = int(restored.checkpoint_row["eval_episodes"])
    metrics = model.evaluate(num_episodes=episodes)
    assert math.isnan(metrics["success_rate"])
    assert metrics["return_mean"] == pytest.approx(restored.checkpoint_row["eval_return_mean"], rel=1e-5)
    path = model.save(tmp_path / "cartpole")
    assert json.loads((path / "model.json").read_text())["env"] == {
        "class": "GymnaxEnv",
        "kwargs": {},
        "task": CARTPOLE,
    }
    loaded = PPOModel.load(path)
    assert _same(loaded.evaluate(num_episodes=episodes), metrics)
    observation = np.asarray([0.01, -0.02, 0.03, 0.04], np.float32)
    assert model.predict(observation) == loaded.predict(observation)
    # an adapter built directly belongs to its suite's task (its task_name): it saves and loads alike
    direct = PPOModel(GymnaxEnv("CartPole-v1"), model.env_params, model.config, model.params, model.metrics, 0)
    direct.save(tmp_path / "direct")
    assert _same(PPOModel.load(tmp_path / "direct").evaluate(num_episodes=episodes), metrics)
    # an environment of no task: the generic held-out evaluation; it saves, and loads given back (issue 63)
    orphan = GymnaxEnv("CartPole-v1")
    orphan.task_name = None
    untasked = PPOModel(orphan, model.env_params, model.config, model.params, model.metrics, 0)
    assert _same(untasked.evaluate(num_episodes=episodes), metrics)
    untasked.save(tmp_path / "untasked")
    with pytest.raises(ValueError, match="GymnaxEnv of no task, which load cannot rebuild"):
        PPOModel.load(tmp_path / "untasked")
    assert _same(PPOModel.load(tmp_path / "untasked", env=orphan).evaluate(num_episodes=episodes), metrics)
    _drop_task(path)
    with pytest.raises(ValueError, match="names environment class 'GymnaxEnv' and no task"):
        PPOModel.load(path)


def _drop_task(path: Path) -> None:
    """model.json as a purehr before the task was recorded wrote it (its own digest redone)."""
    description = json.loads((path / "model.json").read_text())
    del description["env"]["task"]
    description[SELF_DIGEST] = description_digest(description)
    (path / "model.json").write_text(json.dumps(description))


@pytest.mark.slow
def test_an_hrv_model_saved_before_tasks_were_recorded_still_loads(run, tmp_path):
    restored = restore(run, "hrv", 0)
    metrics = {"loss": np.zeros(2, np.float32)}
    model = PPOModel(restored.env, restored.env_params, restored.config, restored.params, metrics, 0)
    path = model.save(tmp_path / "hrv")
    assert json.loads((path / "model.json").read_text())["env"]["task"] == "hrv"
    _drop_task(path)
    loaded = PPOModel.load(path)
    assert type(loaded.env).__name__ == "HRWritingEnv" and loaded.env.hrv_dim == restored.env.hrv_dim
    for saved, back in zip(jax.tree.leaves(model.params), jax.tree.leaves(loaded.params)):
        np.testing.assert_array_equal(np.asarray(saved), np.asarray(back))
