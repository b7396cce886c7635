"""The committed record (results/protocol) as a user restores it: a policy that takes one
observation or a batch, and scripts/evaluate.py naming the checkpoint it evaluated. No
training program is compiled."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from purehr.algorithms.ppo.config import PPOConfig
from purehr.protocol_settings import ProtocolSettings, split_settings
from purehr.run import Restored, restore
from purehr.run.store.record import (
    population_columns,
    recorded_algorithm,
    recorded_config,
    recorded_precision,
    recorded_profile,
    recorded_protocol,
    saved_algorithm,
)

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "results" / "protocol"


def load(name: str):
    """Import scripts/<name>.py (registered in sys.modules: its dataclasses need that)."""
    module_name = f"_purehr_script_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, REPO / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


@pytest.fixture(scope="module")
def restored():
    return restore(RECORD, task="hrv", seed=0, step="latest")


def test_restored_policy_takes_one_observation_or_a_batch(restored):
    env, params = restored.env, restored.env_params
    batch, _ = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(1), 5), params)
    actions = np.asarray(restored.policy(batch))
    assert actions.shape == (5, 10)
    one_by_one = [np.asarray(restored.policy(jax.tree.map(lambda leaf: leaf[i], batch))) for i in range(5)]
    np.testing.assert_array_equal(actions, np.stack(one_by_one))
    with pytest.raises(ValueError, match=r"\(3 values\): expected one observation of 53 values or a batch"):
        restored.policy({"current_hrv": np.zeros(3)})


def test_evaluate_names_the_checkpoint_step_it_evaluated(capsys):
    evaluate = load("evaluate")
    argv = ["--checkpoint", str(RECORD), "--task", "hrv", "--seed", "0", "--num-episodes", "2"]
    assert evaluate.main(argv + ["--json"]) == 0
    output = json.loads(capsys.readouterr().out)
    assert output["checkpoint"] == {"run_dir": str(RECORD), "seed": 0, "actual_steps": 301_056, "target_steps": 300_000}
    assert 0.0 <= output["success_rate"] <= 1.0


def test_evaluate_text_output_names_the_step():
    evaluate = load("evaluate")
    args = evaluate.build_parser().parse_args(["--checkpoint", "runs/x", "--task", "swing", "--seed", "3"])
    checkpoint = {
        "run_dir": "runs/x",
        "seed": 3,
        "actual_steps": 10_002_432,
        "target_steps": 10_000_000,
        "requested_step": "latest",
    }
    assert evaluate.describe_policy(args, checkpoint) == (
        "PPO checkpoint of runs/x, seed 3, step 10,002,432, the latest (saved for target 10,000,000)"
    )
    assert evaluate.describe_policy(args, dict(checkpoint, requested_step=10_000_000)) == (
        "PPO checkpoint of runs/x, seed 3, step 10,002,432 (saved for target 10,000,000)"
    )


def test_a_manifest_with_a_retired_config_field_still_loads():
    """Records written when PPOConfig had ``progress_interval`` (the record before commit
    15650e0 did) and the protocol's settings among its fields (every record before issue 47)
    still load: reading drops the retired field, keeps the protocol's settings apart and every
    other value. Built from the shipped record's config and protocol settings, as it was then."""
    manifest = json.loads((RECORD / "manifest.json").read_text())
    protocol = manifest["protocol_settings"]["swing"]  # those that were config fields then: the legacy four
    legacy = ("checkpoint_interval", "eval_episodes", "full_eval_interval", "quick_eval_episodes")
    recorded = dict(manifest["configs"]["swing"], **{k: v for k, v in protocol.items() if k in legacy})
    older = {"configs": {"swing": dict(recorded, progress_interval=10)}}  # no protocol_settings then
    config = recorded_config(older, "swing")
    recorded, protocol = split_settings(recorded)  # the protocol's settings were config fields then
    assert recorded_protocol(older, "swing") == ProtocolSettings.from_dict(protocol) and protocol  # kept apart
    kept = {k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items()}
    assert {k: v for k, v in config.to_dict().items() if k in kept} == kept
    assert "progress_interval" not in config.to_dict()
    newer = set(config.to_dict()) - set(recorded)  # fields added since the record: their defaults
    assert all(getattr(config, k) == getattr(PPOConfig(), k) for k in newer)


def test_a_record_without_a_later_field_reads_as_it_was_trained():
    """The shipped manifest without the fields later versions added reads as the run then was
    (PPO, float32, the cpu profile); a recorded value is read as recorded. A model.json without its
    algorithm is PPO's; checkpoints.csv rows of a resume of a run from before a ``pbt_`` column
    give every row's columns, in the order they first appear."""
    manifest = json.loads((RECORD / "manifest.json").read_text())
    older = {k: v for k, v in manifest.items() if k not in ("algorithms", "precision", "run_config")}
    assert (recorded_algorithm(older, "hrv"), recorded_precision(older), recorded_profile(older)) == (
        "ppo",
        "float32",
        "cpu",
    )
    newer = dict(
        older, algorithms={"hrv": "sac"}, precision="float64", run_config={"values": {"profile": "accelerator"}}
    )
    assert (recorded_algorithm(newer, "hrv"), recorded_precision(newer), recorded_profile(newer)) == (
        "sac",
        "float64",
        "accelerator",
    )
    assert (saved_algorithm({"config": {}}), saved_algorithm({"algorithm": "pqn"})) == ("ppo", "pqn")
    rows = [{"steps": 1, "eval_return": 0.0}, {"steps": 2, "pbt_lr": 1.0, "pbt_member": 0}, {"pbt_ent": 0.1}]
    assert population_columns(rows) == ["pbt_lr", "pbt_member", "pbt_ent"]


def readme_restore_examples() -> tuple[list[str], list[str]]:
    """The python blocks that restore, and the inline restore calls on a quoted run directory
    (``restore(...).policy`` style mentions are prose, not examples), of the README and of
    docs/how-to/restore.md, where the README's restore section moved (issue 52, item 6; the usage page
    until issue 64)."""
    text = (REPO / "README.md").read_text() + (REPO / "docs" / "how-to" / "restore.md").read_text()
    blocks = [block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "restor" in block]
    inline = re.findall(r"`([^`\n]*restor\w*\(\"[^`\n]*)`", text)
    return blocks, inline


def test_the_readme_restore_examples_run_as_written(monkeypatch):
    """Issue 52, friction 5: the README said ``purehr.run.restoring(...)``, a module, which
    raised TypeError. Every restore example is executed from the repository root on the
    shipped record, so a wrong line fails here."""
    import purehr.run

    monkeypatch.chdir(REPO)
    blocks, inline = readme_restore_examples()
    assert blocks and inline
    for block in blocks:
        namespace: dict = {}
        exec(compile(block, "README.md", "exec"), namespace)
        assert isinstance(namespace["r"], Restored) and namespace["r"].task == "swing"
    for expression in inline:
        restored = eval(expression, {"purehr": purehr})
        assert isinstance(restored, Restored) and (restored.task, restored.seed) == ("swing", 0)


def test_an_unknown_step_is_refused_listing_every_accepted_value():
    """Issue 63 W10: step='best' was refused listing an integer or 'latest', not 'reported'."""
    with pytest.raises(ValueError, match="step='best': expected an integer number of environment steps, 'latest' or "):
        restore(RECORD, task="hrv", seed=0, step="best")
    with pytest.raises(ValueError, match="'reported'"):
        restore(RECORD, task="hrv", seed=0, step="best")


def test_evaluate_names_the_algorithm_of_the_checkpoint(tmp_path, monkeypatch):
    """Issue 63 W2: a PQN or SAC run's checkpoint was described as "PPO checkpoint of ..."."""
    import types

    evaluate = load("evaluate")
    run = tmp_path / "run"
    run.mkdir()
    manifest = json.loads((RECORD / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(dict(manifest, algorithms={"hrv": "pqn"})))
    fake = types.SimpleNamespace(seed=0, steps=4096, target_steps=4000, env=None, env_params=None, pure_policy=None)
    import purehr.cli.evaluate  # the command's code (scripts/evaluate.py wraps it)

    monkeypatch.setattr(purehr.cli.evaluate, "restore", lambda *args, **kwargs: fake)
    monkeypatch.setattr(purehr.cli.evaluate, "pbt_lineage", lambda *args: None)
    args = evaluate.parse_args(["--run-dir", str(run), "--task", "hrv", "--seed", "0"])
    _, _, checkpoint = evaluate.load_checkpoint(args)
    assert evaluate.describe_policy(args, checkpoint).startswith(f"PQN checkpoint of {run}, seed 0, step 4,096")


def test_a_restored_policy_can_be_jitted_and_its_pure_policy_acts_the_same(restored):
    """Issue 63 F4: ``jax.jit(r.policy)`` raised TracerArrayConversionError (it returns NumPy);
    traced, it returns the traced action. ``r.pure_policy(obs, t, key)``, the jittable one
    docs/how-to/restore.md names, gives the same deterministic actions."""
    env, params = restored.env, restored.env_params
    batch, _ = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(2), 4), params)
    expected = np.asarray(restored.policy(batch))
    np.testing.assert_array_equal(np.asarray(jax.jit(restored.policy)(batch)), expected)
    pure = jax.jit(jax.vmap(restored.pure_policy, in_axes=(0, None, None)))
    np.testing.assert_array_equal(np.asarray(pure(batch, 0, jax.random.PRNGKey(0))), expected)
    one = jax.tree.map(lambda leaf: leaf[1], batch)
    np.testing.assert_array_equal(np.asarray(jax.jit(restored.pure_policy)(one, 0, jax.random.PRNGKey(5))), expected[1])
