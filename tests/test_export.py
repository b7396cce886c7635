"""Exporting a trained policy (issue 66): the ONNX and jax.export programs act as the JAX policy
did on held-out observations, and the check can fail; a masked discrete policy and a GRU policy
(its carry an explicit input and output) export and agree; the model card's numbers are the run's
records; bad input is refused before anything is written."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import jax
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from purehr.algorithms.ppo.algorithm import make_ppo
from purehr.algorithms.ppo.config import PPOConfig
from purehr.cli import export as export_command
from purehr.deploy import formats
from purehr.deploy.export import export
from purehr.deploy.parity import ParityError, check_parity, heldout_samples
from purehr.deploy.program import policy_program
from purehr.model.facade import Model
from purehr.run.restoring import restore
from purehr.tasks import get_task

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "results" / "protocol"


@pytest.fixture(scope="module")
def swing_export(protocol_reference, tmp_path_factory):
    """The shared tiny run's swing seed 0, exported once (both formats)."""
    run = Path(protocol_reference["summary"].run_dir)
    out = tmp_path_factory.mktemp("export") / "swing_policy"
    return run, export(run, "swing", 0, "reported", out=out, episodes=2)


def test_an_export_agrees_with_the_jax_policy_it_came_from(swing_export):
    """The parity figures recorded, and independently: both files act as ``restore``'s policy on
    observations of the swing's space (a batch of 64 at once)."""
    run, result = swing_export
    contract = json.loads((result.out / "contract.json").read_text())
    assert [spec["name"] for spec in contract["inputs"]] == ["observation"]
    for name in ("onnx", "jax"):
        assert contract["parity"][name]["max_abs_error"] <= 1e-4 and contract["parity"][name]["action_agreement"] == 1
    assert "cpu" in contract["files"]["jax"]["platforms"] and contract["files"]["onnx"]["bytes"] < 1_000_000
    restored = restore(run, "swing", 0, "reported")
    assert contract["checkpoint"]["state_digest"] == restored.checkpoint_row["state_digest"]
    observations = np.random.default_rng(0).normal(size=(64, contract["inputs"][0]["shape"][1])).astype(np.float32)
    expected = restored.policy(observations)
    onnx_action = formats.onnx_runner((result.out / "policy.onnx").read_bytes(), ["observation"])([observations])[0]
    jax_action = formats.jax_export_runner((result.out / "policy.jax_export").read_bytes())([observations])[0]
    np.testing.assert_allclose(onnx_action, expected, atol=1e-5)
    np.testing.assert_allclose(jax_action, expected, atol=1e-5)


def test_the_parity_check_refuses_a_perturbed_export_and_writes_nothing(swing_export, tmp_path, monkeypatch):
    """The ONNX model with its largest weight matrix scaled by 1.05: refused, naming both numbers."""
    run, _ = swing_export
    convert = formats.to_onnx

    def perturbed(program):
        model = onnx.load_from_string(convert(program))
        weights = max(model.graph.initializer, key=lambda tensor: np.prod(tensor.dims))
        weights.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weights) * 1.05, weights.name))
        return model.SerializeToString()

    monkeypatch.setattr(formats, "to_onnx", perturbed)
    out = tmp_path / "perturbed"
    pattern = r"onnx: maximum absolute error [\d.e+-]+ \(tolerance 0.0001\), action agreement [\d.]+ over \d+ held-out"
    with pytest.raises(ParityError, match=pattern) as refused:
        export(run, "swing", 0, "reported", out=out, episodes=1)
    assert "jax:" not in str(refused.value)  # the jax.export program, unperturbed, passed
    assert not out.exists() and list(tmp_path.iterdir()) == []


def _masked_game(tmp_path, monkeypatch):
    shutil.copy(REPO / "examples" / "masked_game.py", tmp_path / "masked_game_export.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    import masked_game_export

    return masked_game_export


def test_a_masked_discrete_policy_exports_with_its_mask_as_an_input_and_agrees(tmp_path, monkeypatch):
    game = _masked_game(tmp_path, monkeypatch)
    env = game.make_env()
    ppo = make_ppo(game.PPO_CONFIG, env)
    params = ppo.network_params(ppo.init(jax.random.PRNGKey(3)))
    policy = ppo.policy(params)
    program = policy_program(policy, env.observation_space(env.default_params), env.action_space(env.default_params))
    assert "action_mask" in [spec.name for spec in program.inputs]
    samples = heldout_samples(env, env.default_params, policy, program, episodes=8)
    names = [spec.name for spec in program.inputs]
    runners = {
        "onnx": formats.onnx_runner(formats.to_onnx(program), names),
        "jax": formats.jax_export_runner(formats.to_jax_export(program)[0]),
    }
    figures = check_parity(samples, runners, program)
    assert figures["onnx"]["action_agreement"] == 1.0 and figures["jax"]["max_abs_error"] == 0
    # the exported policy reads the mask: with one legal cell only, it picks that cell
    inputs = list(samples.inputs)
    mask = inputs[names.index("action_mask")]
    only = np.zeros_like(mask)
    only[np.arange(len(mask)), np.argmin(mask + np.arange(mask.shape[1]) * 1e-3, axis=1)] = 1
    inputs[names.index("action_mask")] = only
    np.testing.assert_array_equal(runners["onnx"](inputs)[0], np.argmax(only, axis=1))


def test_a_gru_policy_exports_from_a_saved_model_with_its_carry_and_agrees(tmp_path):
    task = get_task("hrv")  # MultiDiscrete actions, through a GRU
    env = task.make_env()
    config = PPOConfig(
        policy="gru",
        recurrent_width=8,
        actor_hidden=(8,),
        critic_hidden=(8,),
        num_envs=2,
        num_steps=8,
        minibatch_size=8,
    )
    ppo = make_ppo(config, env)
    params = ppo.network_params(ppo.init(jax.random.PRNGKey(0)))
    saved = Model(env, env.default_params, config, params, {}, 0).save(tmp_path / "model")
    result = export(saved, out=tmp_path / "policy", episodes=2)
    contract = result.contract
    fields = sorted(env.observation_space(env.default_params).spaces)  # a dict observation: one input per field
    assert [spec["name"] for spec in contract["inputs"]] == [*fields, "carry"]
    assert [spec["name"] for spec in contract["outputs"]] == ["action", "carry_out"]
    assert contract["inputs"][-1]["shape"] == ["batch", 8] and contract["carry"]["shapes"] == [[8]]
    for name in ("onnx", "jax"):  # actions and the next carry within the tolerance, at every step of the episode
        assert contract["parity"][name]["max_abs_error"] <= 1e-4 and contract["parity"][name]["action_agreement"] == 1
    card = (result.out / "README.md").read_text()
    assert contract["action"]["kind"] == "multi_discrete" and ", `carry` float32[8]" in card and "## Licence" in card


def _cells(card: str, label: str) -> list[str]:
    line = next(line for line in card.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.parametrize("task, seed", [("swing", 0), ("hrv", 3)])
def test_the_shipped_model_cards_show_the_records_numbers(task, seed):
    """results/protocol/exports' cards: this seed's reported checkpoint (reported.csv) and the mean
    over the seeds, the reference and the floors of manifest.json, as the records hold them."""
    card = (RECORD / "exports" / f"{task}_seed_{seed}" / "README.md").read_text()
    manifest = json.loads((RECORD / "manifest.json").read_text())
    rows = [_reported(task, s) for s in manifest["seeds"]]
    metric, label = {
        "swing": ("time_to_rotation", "time to rotation (s)"),
        "hrv": ("episode_length", "episode length (steps)"),
    }[task]
    digits = 2 if task == "swing" else 1
    for column, name, d in (("eval_success_rate", "held-out success rate", 2), (f"eval_{metric}", label, digits)):
        cells = _cells(card, name)
        values = [float(row[column]) for row in rows]
        assert float(cells[1]) == round(values[manifest["seeds"].index(seed)], d)
        assert float(re.match(r"[\d.]+", cells[2]).group()) == round(float(np.mean(values)), d)
        reference = manifest["baselines"][task]["metrics"][column[len("eval_") :]]
        assert float(cells[3]) == round(reference, d)
    contract = json.loads((RECORD / "exports" / f"{task}_seed_{seed}" / "contract.json").read_text())
    assert contract["checkpoint"]["state_digest"] == _reported(task, seed)["state_digest"]


def _reported(task: str, seed: int) -> dict:
    folder = RECORD / task / f"seed_{seed}"
    path = folder / "reported.csv" if (folder / "reported.csv").exists() else folder / "checkpoints.csv"
    with path.open() as handle:
        return list(csv.DictReader(handle))[-1]


def test_bad_input_is_refused_before_anything_is_written(swing_export, tmp_path, monkeypatch):
    run, _ = swing_export
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"no checkpoint at step 123 .*targets available"):
        export(run, "swing", 0, 123, out=out)
    assert not out.exists()
    diverged = tmp_path / "diverged"
    diverged.mkdir()
    manifest = json.loads((run / "manifest.json").read_text())
    (diverged / "manifest.json").write_text(json.dumps(manifest | {"diverged": {"swing": {"1": {"update": 3}}}}))
    with pytest.raises(ValueError, match="swing seed 1 of .* diverged in training"):
        export(diverged, "swing", 1, out=out)
    assert not out.exists()
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"holds files an export did not write \(notes.txt\)"):
        export(run, "swing", 0, out=out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and (out / "notes.txt").read_text() == "mine"
    real = formats.importlib.util.find_spec
    monkeypatch.setattr(formats.importlib.util, "find_spec", lambda name: None if name == "jax2onnx" else real(name))
    with pytest.raises(
        ImportError,
        match=re.escape("format 'onnx' needs jax2onnx, which is not installed: pip install 'purehr[export]'"),
    ):
        export(run, "swing", 0, out=tmp_path / "other", formats=["onnx"])
    assert not (tmp_path / "other").exists()
    with pytest.raises(SystemExit) as stopped:  # the command: the same refusals, exit status 2
        export_command.main([str(tmp_path / "nothing"), "--out", str(tmp_path / "o")])
    assert stopped.value.code == 2 and not (tmp_path / "o").exists()
