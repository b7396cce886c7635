"""``purehr.train(env, algorithm=...)``: the seed API for any registered algorithm. PPO through it
is ``train_hr_ppo`` bit for bit; the saved model records its algorithm and loads back through
the registry, acting as it did."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

import purehr
from purehr import train_hr_ppo
from purehr.algorithms.registry import ALGORITHMS
from purehr.tasks import get_task

TINY = dict(num_envs=4, num_steps=16, minibatch_size=32, num_epochs=1, actor_hidden=(8,), critic_hidden=(8,))


@pytest.fixture(scope="module")
def models():
    env = get_task("gymnax:CartPole-v1").make_env()
    general = purehr.train(env, "ppo", timesteps=128, learning_rate=1e-3, **TINY)
    seed_api_names = {("batch_size" if name == "minibatch_size" else name): value for name, value in TINY.items()}
    seed_api = train_hr_ppo(env, timesteps=128, learning_rate=1e-3, **seed_api_names)
    return env, general, seed_api


def test_ppo_through_train_is_train_hr_ppo_bit_for_bit(models):
    _, general, seed_api = models
    assert general.algorithm == "ppo" and general.config == seed_api.config
    assert general.config.learning_rate == 1e-3 and general.config.total_timesteps == 128
    for a, b in zip(jax.tree.leaves(general.params), jax.tree.leaves(seed_api.params)):
        np.testing.assert_array_equal(a, b)


def test_a_saved_model_records_its_algorithm_and_loads_through_the_registry(models, tmp_path):
    env, general, _ = models
    general.save(tmp_path / "model")
    description = json.loads((tmp_path / "model" / "model.json").read_text())
    assert description["algorithm"] == "ppo"
    loaded = purehr.Model.load(tmp_path / "model")
    assert loaded.algorithm == "ppo" and loaded.config == general.config
    keys = jax.random.split(jax.random.PRNGKey(5), 16)
    observations, _ = jax.vmap(env.reset, in_axes=(0, None))(keys, env.default_params)
    np.testing.assert_array_equal(loaded.predict(observations), general.predict(observations))


def test_an_unknown_algorithm_is_refused_naming_the_known_ones(models, tmp_path):
    env, general, _ = models
    with pytest.raises(ValueError, match=r"algorithm='nope': expected one of " + ", ".join(sorted(ALGORITHMS))):
        purehr.train(env, "nope", timesteps=128)
    general.save(tmp_path / "model")
    description = json.loads((tmp_path / "model" / "model.json").read_text())
    description["algorithm"] = "nope"
    from purehr.model.saved import SELF_DIGEST, description_digest

    description[SELF_DIGEST] = description_digest(description)
    (tmp_path / "model" / "model.json").write_text(json.dumps(description))
    with pytest.raises(ValueError, match=r"model.json: algorithm='nope': expected one of"):
        purehr.Model.load(tmp_path / "model")
