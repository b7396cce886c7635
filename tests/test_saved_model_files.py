"""Every file of a saved model is covered by a digest, model.json included (issue 27, defect 7),
and saving never replaces a file it did not write unless told to (defect 8). The refusals are
rows of tests/test_bad_inputs_edges.py; here are the paths that load, save or warn. Nothing
trains: the model holds its initial parameters."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

from purehr.algorithms.ppo.algorithm import make_ppo
from purehr.envs.hrv import HRWritingEnv
from purehr.model.facade import PPOModel
from purehr.model.saved import MODEL_FILES, DamagedModelError, description_digest
from purehr.tasks import HRV_DEFAULTS

TINY = HRV_DEFAULTS.replace(num_envs=8, num_steps=16, minibatch_size=64, actor_hidden=(16,), critic_hidden=(16,))


@pytest.fixture(scope="module")
def model() -> PPOModel:
    env = HRWritingEnv(hrv_dim=4)
    params = make_ppo(TINY, env, env.default_params).init(jax.random.PRNGKey(0)).params
    return PPOModel(env, env.default_params, TINY, params, {"loss": np.arange(2, dtype=np.float32)}, seed=3)


def description(path: Path) -> dict:
    return json.loads((path / "model.json").read_text())


def same_params(a: PPOModel, b: PPOModel) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)))


def test_model_json_records_the_sha256_of_its_own_content(model, tmp_path):
    path = model.save(tmp_path / "m")
    saved = description(path)
    assert saved["model_json_sha256"] == description_digest(saved)
    assert set(saved["digests"]) == set(MODEL_FILES)


def test_an_edited_value_in_model_json_is_refused_as_damaged(model, tmp_path):
    """The audit's case: an activation edited in model.json loaded and changed every predicted action."""
    path = model.save(tmp_path / "m")
    text = (path / "model.json").read_text()
    assert '"activation": "relu"' in text
    (path / "model.json").write_text(text.replace('"activation": "relu"', '"activation": "tanh"'))
    with pytest.raises(DamagedModelError, match=r"model.json has changed since the model was saved"):
        PPOModel.load(path)


def test_model_json_written_out_again_in_another_layout_still_loads(model, tmp_path):
    """The digest is of the content (sorted keys, compact), not of the bytes' layout."""
    path = model.save(tmp_path / "m")
    (path / "model.json").write_text(json.dumps(description(path), indent=7, sort_keys=True))
    assert same_params(model, PPOModel.load(path))


def test_a_model_saved_with_file_digests_only_loads_with_a_warning(model, tmp_path):
    """Saved by the purehr between file digests and model.json's own: its files are still checked."""
    path = model.save(tmp_path / "m")
    old = description(path)
    del old["model_json_sha256"]
    (path / "model.json").write_text(json.dumps(old, indent=2))
    with pytest.warns(UserWarning, match="without a digest of model.json itself"):
        loaded = PPOModel.load(path)
    assert same_params(model, loaded)
    (path / "metrics.npz").write_bytes((path / "metrics.npz").read_bytes() + b"\0")
    with pytest.warns(UserWarning), pytest.raises(DamagedModelError, match="metrics.npz does not match"):
        PPOModel.load(path)


def test_overwrite_replaces_a_saved_model_and_keeps_the_users_other_files(model, tmp_path):
    path = model.save(tmp_path / "m")
    (path / "notes.txt").write_text("mine")
    other = PPOModel(model.env, model.env_params, model.config, model.params, model.metrics, seed=9)
    with pytest.raises(FileExistsError, match="already holds a saved model; pass overwrite=True"):
        other.save(path)
    assert PPOModel.load(path).seed == 3
    other.save(path, overwrite=True)
    assert PPOModel.load(path).seed == 9
    assert (path / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in path.iterdir()) == sorted(["model.json", "notes.txt", *MODEL_FILES])


def test_a_folder_holding_a_users_files_is_saved_into_only_with_overwrite(model, tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "params.msgpack").write_text("mine")
    with pytest.raises(FileExistsError, match=r"holds \['params.msgpack'\], which is not a saved model"):
        model.save(tmp_path / "m")
    assert (tmp_path / "m" / "params.msgpack").read_text() == "mine"
    model.save(tmp_path / "m", overwrite=True)  # told to: the folder now holds the model
    assert same_params(model, PPOModel.load(tmp_path / "m"))


def test_an_empty_folder_is_saved_into(model, tmp_path):
    (tmp_path / "m").mkdir()
    assert same_params(model, PPOModel.load(model.save(tmp_path / "m")))
