"""purehr.envs.to_gymnasium: a Gymnasium Env that passes the official checker for both tasks."""

import warnings

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

from purehr.envs import HRWritingEnv, SwingEnv, to_gymnasium  # noqa: E402


@pytest.mark.parametrize(
    "make_env, flatten",
    [(SwingEnv, False), (lambda: HRWritingEnv(hrv_dim=8), False), (lambda: HRWritingEnv(hrv_dim=8), True)],
    ids=["swing", "hrv-dict", "hrv-flat"],
)
def test_passes_gymnasium_env_checker(make_env, flatten):
    env = to_gymnasium(make_env(), seed=0, flatten=flatten)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any checker warning fails, but
        warnings.filterwarnings("ignore", message=".*infinity.*")  # unbounded observations are fine
        check_env(env, skip_render_check=True)


def test_spaces_convert():
    swing = to_gymnasium(SwingEnv())
    assert isinstance(swing.action_space, gymnasium.spaces.Box) and swing.action_space.shape == (2,)
    assert swing.observation_space.shape == (11,) and swing.observation_space.dtype == np.float32
    hrv = to_gymnasium(HRWritingEnv(hrv_dim=8))
    assert isinstance(hrv.observation_space, gymnasium.spaces.Dict)
    assert isinstance(hrv.action_space, gymnasium.spaces.MultiDiscrete)
    assert list(hrv.action_space.nvec) == [5, 3] + [3] * 8
    flat = to_gymnasium(HRWritingEnv(hrv_dim=8), flatten=True)
    # current, target, content stats, context, episode fraction, scaled gap, context gain
    assert flat.observation_space.shape == (8 + 8 + 4 + 16 + 1 + 8 + 8,)


def test_episode_runs_to_truncation_and_is_reproducible():
    env = to_gymnasium(HRWritingEnv(hrv_dim=8), flatten=True)
    runs = []
    for _ in range(2):
        observation, _ = env.reset(seed=3)
        env.action_space.seed(3)
        total, steps, done = 0.0, 0, False
        while not done:
            observation, reward, terminated, truncated, info = env.step(env.action_space.sample())
            total, steps, done = total + reward, steps + 1, terminated or truncated
        runs.append((total, steps, observation))
        assert env.observation_space.contains(observation)
        assert set(info) >= {"success", "distance"}
    assert runs[0][1] <= 100
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    np.testing.assert_array_equal(runs[0][2], runs[1][2])
