"""PQN (purehr.algorithms.pqn): its Q(lambda) returns against an independent n-step
expansion, its action branches, its masks, one learning threshold through ``make_train``, and
its config's refusals. Learning at real budgets is measured outside the suite (the report of
issue 50)."""

from __future__ import annotations

import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.pqn.algorithm import image_shape, make_pqn
from purehr.algorithms.pqn.config import PQNConfig
from purehr.algorithms.pqn.network import ILLEGAL_Q, Branches, QNetwork
from purehr.algorithms.pqn.returns import q_lambda_returns
from purehr.algorithms.registry import get_algorithm
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.envs import spaces
from purehr.tasks import get_task

REPO = Path(__file__).resolve().parents[1]
GAMMA, LAMBDA = 0.9, 0.7


def n_step_lambda_returns(rewards, next_values, terminated, done, gamma, lam):
    """Peng's Q(lambda) return as the lambda-weighted mix of n-step returns, written out with
    plain loops: for step t of an episode segment ending at step e (its end or the rollout's),
    G^(n) = sum_{k<n} gamma^k r_{t+k} + gamma^n (1 - terminated_{t+n-1}) V'_{t+n-1}, and
    G^lambda = sum_{n<N} (1 - lam) lam^(n-1) G^(n) + lam^(N-1) G^(N), N = e - t + 1."""
    steps, envs = len(rewards), len(rewards[0])
    out = np.zeros((steps, envs))
    for env in range(envs):
        for t in range(steps):
            end = t
            while not done[end][env] and end < steps - 1:
                end += 1
            horizon = end - t + 1
            n_step = []
            for n in range(1, horizon + 1):
                last = t + n - 1
                discounted = sum(gamma**k * rewards[t + k][env] for k in range(n))
                bootstrap = 0.0 if terminated[last][env] else next_values[last][env]
                n_step.append(discounted + gamma**n * bootstrap)
            mixed = sum((1 - lam) * lam ** (n - 1) * n_step[n - 1] for n in range(1, horizon))
            out[t, env] = mixed + lam ** (horizon - 1) * n_step[-1]
    return out


def test_q_lambda_returns_match_the_n_step_expansion_with_a_termination_and_a_truncation():
    """Env 0 terminates at step 1 and continues to the rollout's end; env 1 is truncated at
    step 2 (bootstrapping from its final observation's value) and starts again at step 3."""
    rewards = [[1.0, 0.5], [2.0, -1.0], [0.0, 3.0], [1.5, 0.25]]
    next_values = [[4.0, 2.0], [9.0, 1.0], [3.0, 5.0], [-2.0, 0.5]]  # V' of what followed each step
    terminated = [[False, False], [True, False], [False, False], [False, False]]
    done = [[False, False], [True, False], [False, True], [False, False]]
    returns = np.asarray(
        q_lambda_returns(
            jnp.asarray(rewards),
            jnp.asarray(next_values),
            jnp.asarray(terminated),
            jnp.asarray(done),
            jnp.float32(GAMMA),
            jnp.float32(LAMBDA),
        )
    )
    expected = n_step_lambda_returns(rewards, next_values, terminated, done, GAMMA, LAMBDA)
    np.testing.assert_allclose(returns, expected, rtol=1e-6)
    assert returns[1, 0] == 2.0  # a terminated step's return is its reward
    np.testing.assert_allclose(returns[2, 1], 3.0 + GAMMA * 5.0, rtol=1e-6)  # truncation: r + gamma V'(final)
    np.testing.assert_allclose(returns[3], np.asarray(rewards[3]) + GAMMA * np.asarray(next_values[3]), rtol=1e-6)


def test_multidiscrete_branches_lay_out_one_q_head_per_component():
    branches = Branches.of(spaces.MultiDiscrete((3, 2, 4)))
    q = jnp.asarray([0.1, 0.7, 0.2, -1.0, -0.5, 0.0, 2.0, 0.3, 1.0])  # 3 + 2 + 4 outputs
    view = np.asarray(branches.view(q))
    assert branches.size == 9 and view.shape == (3, 4)
    assert (view[0, 3], view[1, 2], view[1, 3]) == (ILLEGAL_Q,) * 3  # padding never wins
    np.testing.assert_array_equal(np.asarray(branches.greedy(jnp.asarray(view))), [1, 1, 1])
    np.testing.assert_allclose(float(Branches.value(jnp.asarray(view))), (0.7 - 0.5 + 2.0) / 3, rtol=1e-6)
    mask = jnp.asarray([1, 0, 1, 1, 1, 1, 0, 1, 1], bool)  # the best of branches 0 and 2 illegal
    np.testing.assert_array_equal(np.asarray(branches.greedy(branches.view(q, mask))), [2, 1, 3])
    chosen = branches.chosen(jnp.asarray(view), jnp.asarray([2, 0, 3]))
    np.testing.assert_allclose(np.asarray(chosen), [0.2, -1.0, 1.0], rtol=1e-6)


def test_the_hrv_policy_takes_each_branch_argmax_of_the_q_network():
    """hrv's MultiDiscrete action: the network has sum(nvec) outputs, and the greedy policy's
    action is each component's argmax of its own slice of them."""
    env = get_task("hrv").make_env()
    nvec = env.action_space(env.default_params).nvec
    pqn = make_pqn(PQNConfig(total_timesteps=64, num_envs=2, num_steps=32, minibatch_size=32, hidden=(16,)), env)
    params = pqn.network.init(jax.random.PRNGKey(0), jnp.zeros((spaces.flat_dim(env.observation_space()),)))
    observation, _ = env.reset(jax.random.PRNGKey(1), env.default_params)
    q = np.asarray(pqn.network.apply(params, spaces.flatten_observation(observation)))
    assert q.shape == (sum(nvec),)
    bounds = np.cumsum((0, *nvec))
    expected = [int(np.argmax(q[lo:hi])) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    action = np.asarray(pqn.policy(params)(observation, 0, jax.random.PRNGKey(2)))
    np.testing.assert_array_equal(action, expected)


@pytest.fixture(scope="module")
def masked_game(tmp_path_factory):
    import importlib.util
    import sys

    folder = tmp_path_factory.mktemp("masked")
    shutil.copy(REPO / "examples" / "masked_game.py", folder / "masked_game_pqn.py")
    spec = importlib.util.spec_from_file_location("masked_game_pqn", folder / "masked_game_pqn.py")
    module = sys.modules["masked_game_pqn"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_env()


def test_exploration_and_greedy_actions_only_pick_legal_cells(masked_game):
    """epsilon = 1 throughout (every training action a random draw) makes no illegal move in
    16 x 32 x 4 steps (one update a rollout) on the masked game, where a uniform draw over all 9 cells would be
    illegal about half the time; the greedy and the epsilon evaluation policies pick open
    cells on 256 fresh boards."""
    config = PQNConfig(
        total_timesteps=2048,
        num_envs=16,
        num_steps=32,
        num_epochs=1,
        minibatch_size=512,
        hidden=(16,),
        epsilon_finish=1.0,
    )
    trainer = make_train(config, masked_game)
    result = trainer(keys_for_seeds([0]))
    assert int(np.asarray(result.metrics["episodes_completed"]).sum()) > 0
    assert int(np.asarray(result.metrics["invalid_actions"]).sum()) == 0
    pqn = trainer.algorithm
    params = pqn.network_params(jax.tree.map(lambda x: x[0], result.runner))
    keys = jax.random.split(jax.random.PRNGKey(4), 256)
    observations, _ = jax.vmap(masked_game.reset, in_axes=(0, None))(keys, masked_game.default_params)
    for deterministic in (True, False):
        act = jax.vmap(pqn.policy(params, deterministic), in_axes=(0, None, 0))
        actions = np.asarray(jax.jit(act)(observations, 0, keys))
        assert np.asarray(observations["action_mask"])[np.arange(256), actions].all(), deterministic


def test_pqn_learns_cartpole_through_make_train():
    """gymnax CartPole-v1, 2 seeds x 40,960 steps (a tenth of purejaxql's budget, a smaller
    network): the greedy policy's held-out return is at least 150 on every seed (a random
    policy's is about 22; 500 is the cap)."""
    task = get_task("gymnax:CartPole-v1")
    env = task.make_env()
    config = PQNConfig(
        total_timesteps=40_960, num_envs=16, num_steps=32, minibatch_size=128, hidden=(64, 64), learning_rate=1e-3
    )
    trainer = make_train(config, env)
    result = trainer(keys_for_seeds([0, 1]))
    assert (np.asarray(result.metrics["diverged_at_update"])[:, -1] == 0).all()
    pqn = trainer.algorithm
    evaluate = jax.jit(
        jax.vmap(lambda params: task.heldout_evaluation(env, env.default_params, pqn.policy(params), num_episodes=32))
    )
    returns = np.asarray(evaluate(pqn.network_params(result.runner))["return_mean"])
    assert (returns >= 150).all(), returns


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(minibatch_size=100), r"PQNConfig.minibatch_size=100 does not divide the batch .* = 2048"),
        (dict(q_lambda=1.5), r"PQNConfig.q_lambda=1.5: expected in \[0, 1\]"),
        (dict(epsilon_finish=-0.1), r"PQNConfig.epsilon_finish=-0.1: expected in \[0, 1\]"),
        (dict(learning_rate=0.0), r"PQNConfig.learning_rate=0.0: expected a finite number > 0"),
        (dict(num_envs=True), r"PQNConfig.num_envs=True: expected a positive integer, got bool"),
        (dict(hidden=(64, 0)), r"PQNConfig.hidden=\(64, 0\): expected a non-empty tuple of positive ints"),
        (dict(conv_channels=(16, 0)), r"PQNConfig.conv_channels=\(16, 0\): expected a tuple of positive ints \(empty"),
        (dict(conv_channels=16), r"PQNConfig.conv_channels=16: expected a tuple of positive ints"),
        (dict(conv_channels=(True,)), r"PQNConfig.conv_channels=\(True,\): expected a tuple of positive ints"),
        (dict(activation="gelu"), r"PQNConfig.activation='gelu': expected one of"),
        (dict(layer_norm="yes"), r"PQNConfig.layer_norm='yes': expected True or False"),
    ],
)
def test_a_bad_config_is_refused_naming_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        PQNConfig(**fields)


def test_the_registry_builds_pqn_and_round_trips_its_config():
    entry = get_algorithm("pqn")
    config = PQNConfig(hidden=(32, 16), q_lambda=0.5)
    assert entry.config_from_dict(config.to_dict() | {"hidden": [32, 16]}) == config
    assert PQNConfig(conv_channels=[np.int64(16)]).conv_channels == (16,)  # a TOML list, a NumPy int
    assert PQNConfig(conv_channels=[]).conv_channels == ()  # empty: no convolution
    assert config.batch_size == config.num_envs * config.num_steps
    assert set(entry.hyperparameter_names()) <= set(config.to_dict())
    with pytest.raises(TypeError, match="Discrete or MultiDiscrete"):
        Branches.of(spaces.Box(-1.0, 1.0, (2,)))


def test_a_convolutional_torso_reads_the_flat_observation_as_its_image():
    """conv_channels: 3 x 3 VALID convolutions over [H, W, C], so a 10 x 10 x 4 observation gives
    8 x 8 x 16 features into the hidden layer; the flat observation and the image give the same
    Q values; a non-image observation is refused by name."""
    network = QNetwork((32,), "relu", 6, conv_channels=(16,), image_shape=(10, 10, 4), input_scale=0.5)
    image = jax.random.uniform(jax.random.PRNGKey(0), (3, 10, 10, 4))
    params = network.init(jax.random.PRNGKey(1), image.reshape(3, -1))
    assert params["params"]["Conv_0"]["kernel"].shape == (3, 3, 4, 16)
    assert params["params"]["Dense_0"]["kernel"].shape == (8 * 8 * 16, 32)
    q = network.apply(params, image.reshape(3, -1))
    assert q.shape == (3, 6)
    one = network.apply(params, image[1].reshape(-1))  # unbatched, as the evaluation acts
    np.testing.assert_allclose(one, q[1], rtol=1e-5, atol=1e-6)
    assert image_shape(spaces.Box(0.0, 1.0, (10, 10, 4)), (16,)) == (10, 10, 4)
    with pytest.raises(ValueError, match=r"conv_channels=\(16,\)"):
        image_shape(spaces.Box(0.0, 1.0, (4,)), (16,))
