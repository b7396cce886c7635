"""A new user's first minutes with the seed API (issue 27, user path 3): the snippet of
docs/how-to/python.md, "The seed API" (the README's until issue 52,
then the usage page's until issue 64), runs as written, and
``progress=True`` shows the protocol's progress bar beside the user's callback. (A budget too
small to finish an episode warns: tests/test_api.py.)"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import HRV_TINY

from purehr import HRWritingEnv, PPOModel, train_hr_ppo

ROOT = Path(__file__).resolve().parents[1]
TINY_OPTIONS = {
    name: getattr(HRV_TINY, name) for name in ("num_envs", "num_steps", "num_epochs", "actor_hidden", "critic_hidden")
}


def readme_seed_api_snippet() -> str:
    usage = (ROOT / "docs" / "how-to" / "python.md").read_text()
    section = usage.split("## The seed API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_the_readme_seed_api_snippet_runs_as_written(tmp_path, monkeypatch):
    """About 25 s on 2 cores (one compile of the default network, 50k steps, 100 evaluation
    episodes): the first code a user copies must run, and run without a warning."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        exec(compile(readme_seed_api_snippet(), "docs/how-to/python.md (the seed API)", "exec"), namespace)
    model = namespace["model"]
    assert isinstance(model, PPOModel) and (tmp_path / "my_model" / "model.json").is_file()
    assert np.isfinite(model.metrics["mean_episode_return"]).any()


def tiny_training(**options):
    return train_hr_ppo(HRWritingEnv(hrv_dim=2), HRV_TINY.total_timesteps, batch_size=64, **TINY_OPTIONS, **options)


def test_progress_shows_the_bar_and_keeps_the_users_callback(capsys):
    """One compile of a tiny program. The bar is a host callback like the user's, and a host
    callback leaves what is trained as it was (tests/test_curriculum.py compares a run stopped
    by a callback with one of that length without it)."""
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 80 steps per environment: no episode ends
        model = tiny_training(progress=True, callback=lambda metrics: seen.append(metrics["update"]))
    err = capsys.readouterr().err
    assert "hrv 0/1,280" in err and "hrv done (1,280)" in err and "elapsed" in err, err
    assert seen == list(range(1, 11)) and model.metrics["update"].tolist() == seen


def test_progress_must_be_a_boolean():
    with pytest.raises(TypeError, match="progress='yes': expected True, False or None"):
        tiny_training(progress="yes")


def test_a_model_of_an_environment_of_no_task_saves_and_loads_with_its_environment(tmp_path, monkeypatch):
    """Issue 63 F3: ``purehr.train(make_env())`` trained, then ``save`` refused the environment
    ("belongs to no task"), after the training. It saves its class, module and spaces; ``load``
    takes the environment (refused without one, or with another), and acts as the saved model."""
    import json

    import jax

    from purehr import Model
    from purehr.algorithms.ppo.config import PPOConfig
    from purehr.algorithms.registry import make_algorithm
    from purehr.tasks import task_of_env

    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    import my_env

    env = my_env.make_env()
    assert task_of_env(env) is None
    config = PPOConfig(num_envs=4, num_steps=8, minibatch_size=16, actor_hidden=(8,), critic_hidden=(8,))
    algorithm = make_algorithm(config, env, env.default_params)
    params = algorithm.network_params(algorithm.init(jax.random.PRNGKey(3)))
    model = Model(env, env.default_params, config, params, {"update": np.arange(1, 3)}, 0)
    path = model.save(tmp_path / "model")
    recorded = json.loads((path / "model.json").read_text())["env"]
    assert recorded["task"] is None and recorded["module"] == "my_env" and recorded["class"] == "PointReach"
    assert recorded["observation_space"] == "Box(shape=(4,), dtype=float32)", recorded
    with pytest.raises(ValueError, match=r"saved from a my_env.PointReach of no task.*pass it, Model.load\("):
        Model.load(path)
    with pytest.raises(ValueError, match=r"env=purehr.envs.hrv.*HRWritingEnv\(...\): .* from a my_env.PointReach"):
        Model.load(path, env=HRWritingEnv(hrv_dim=2))
    loaded = Model.load(path, env=my_env.make_env())
    observations = jax.vmap(lambda key: env.reset(key, env.default_params)[0])(
        jax.random.split(jax.random.PRNGKey(0), 5)
    )
    np.testing.assert_array_equal(loaded.predict(observations), model.predict(observations))
    hrv = HRWritingEnv(hrv_dim=2)  # a model of a task takes no env: load rebuilds it
    algorithm = make_algorithm(config, hrv, hrv.default_params)
    params = algorithm.network_params(algorithm.init(jax.random.PRNGKey(3)))
    Model(hrv, hrv.default_params, config, params, {"update": np.arange(1, 3)}, 0).save(tmp_path / "hrv")
    with pytest.raises(ValueError, match=r"saved from task 'hrv', which load rebuilds; env= is only for"):
        Model.load(tmp_path / "hrv", env=hrv)
