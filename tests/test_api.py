"""The seed API exactly as the mission states it, and its model object."""

import warnings

import jax
import numpy as np
import pytest

from purehr import HRWritingEnv, PPOModel, train_hr_ppo
from purehr.tasks import HRV_DEFAULTS


@pytest.fixture(scope="module")
def env():
    return HRWritingEnv(hrv_dim=8)


@pytest.fixture(scope="module")
def trained(env):
    """The mission's call, and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = train_hr_ppo(HRWritingEnv(hrv_dim=8), timesteps=5000)
    return model, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


@pytest.fixture(scope="module")
def model(trained):
    return trained[0]


def test_a_budget_too_small_to_finish_an_episode_says_so(trained):
    """5,000 steps: 3 updates of 64 envs x 32 steps, 96 steps per environment, and an HRV
    episode runs up to 100: every training return is NaN, which is named, not left silent."""
    model, said = trained
    assert np.isnan(model.metrics["mean_episode_return"]).all()
    assert len(said) == 1, said
    assert (
        "no episode ended in 3 updates of 64 envs x 32 steps (timesteps=5000, 96 steps per environment; "
        "an episode lasts up to 100 steps)" in said[0]
    )


def test_seed_api_trains_the_requested_budget(model):
    # 2,048 steps per update (the HRV default batch): 3 updates are the first to reach 5,000
    assert HRV_DEFAULTS.batch_size == 2048
    assert list(model.metrics["env_steps"]) == [2048, 4096, 6144]
    assert model.config == HRV_DEFAULTS.replace(total_timesteps=5000)  # every other default is the task's
    assert np.all(np.isfinite(model.metrics["loss"]))


def test_predict_one_observation_and_a_batch(model, env):
    observation, _ = env.reset(jax.random.PRNGKey(3), env.default_params)
    action = model.predict(observation)
    assert action.shape == (10,) and action[0] in range(5) and np.all((action[1:] >= 0) & (action[1:] <= 2))
    assert np.array_equal(action, model.predict(observation))  # deterministic
    batch, _ = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(4), 6), env.default_params)
    actions = model.predict(batch)
    assert actions.shape == (6, 10)
    first = jax.tree.map(lambda x: x[0], batch)
    assert np.array_equal(actions[0], model.predict(first))


@pytest.fixture(scope="module")
def heldout_metrics(model):
    return model.evaluate(num_episodes=20)


def test_evaluate_reports_the_heldout_metrics(heldout_metrics):
    metrics = heldout_metrics
    assert set(metrics) >= {"success_rate", "return_mean", "final_distance", "alignment", "episode_length"}
    assert 0.0 <= metrics["success_rate"] <= 1.0 and 1 <= metrics["episode_length"] <= 100


def test_save_and_load_round_trip(model, env, tmp_path):
    path = model.save(tmp_path / "model")
    loaded = PPOModel.load(path)
    for a, b in zip(jax.tree.leaves(model.params), jax.tree.leaves(loaded.params)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    observation, _ = env.reset(jax.random.PRNGKey(5), env.default_params)
    assert np.array_equal(model.predict(observation), loaded.predict(observation))
    assert np.array_equal(model.metrics["loss"], loaded.metrics["loss"])
    assert loaded.config == model.config
    with pytest.raises(FileExistsError, match="already holds a saved model"):
        model.save(path)
    with pytest.raises(FileNotFoundError, match="holds no saved model"):
        PPOModel.load(tmp_path / "nothing")


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(batch_size=100), "minibatch_size=100"),
        (dict(timesteps=0), "total_timesteps=0"),
        (dict(learning_rate=-1.0), "learning_rate=-1.0"),
        (dict(seed=-2), "seed=-2"),
    ],
)
def test_bad_arguments_are_refused_before_compiling(env, arguments, message):
    arguments = dict(dict(timesteps=5000), **arguments)
    with pytest.raises(ValueError, match=message):
        train_hr_ppo(env, **arguments)


@pytest.mark.parametrize("field, argument", [("minibatch_size", "batch_size"), ("total_timesteps", "timesteps")])
def test_config_names_of_the_seed_api_arguments_point_to_them(env, field, argument):
    with pytest.raises(TypeError, match=f"got {field}=.*pass {argument}="):
        train_hr_ppo(env, timesteps=5000, **{field: 1024})


def test_bad_hrv_dimension_is_refused():
    with pytest.raises(ValueError, match="hrv_dim"):
        HRWritingEnv(hrv_dim=0)


def test_a_loaded_model_evaluates_like_the_saved_one(model, heldout_metrics, tmp_path):
    """Loading gives back jax arrays where the model had them (the environment indexes its
    params with a traced action inside jit; NumPy arrays there fail)."""
    loaded = PPOModel.load(model.save(tmp_path / "model"))
    for original, restored in zip(jax.tree.leaves(model.env_params), jax.tree.leaves(loaded.env_params)):
        assert type(restored) is type(original)
        assert getattr(restored, "dtype", None) == getattr(original, "dtype", None)
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(loaded.params))
    assert loaded.evaluate(num_episodes=20) == heldout_metrics
