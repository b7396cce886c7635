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
from purehr.algorithms.pqn.network import ILLEGAL_Q, QMLP, Branches, QNetwork
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


def test_a_branch_with_no_legal_action_counts_all_its_actions_legal():
    """Issue 63: a state whose mask is all false in a branch (no legal move) gives that branch
    its real Q values, as PPO's policy draws among all actions then: its greedy value is the max
    over its actions (not ILLEGAL_Q), the greedy choice their argmax, a random draw one of its
    own (never a padding slot); the other branch keeps its mask."""
    branches = Branches.of(spaces.MultiDiscrete((3, 2)))
    q = jnp.asarray([0.1, 0.7, 0.2, -1.0, -0.5])
    mask = jnp.asarray([1, 0, 1, 0, 0], bool)  # branch 0: choices 0 and 2; branch 1: none
    view = np.asarray(branches.view(q, mask))
    np.testing.assert_array_equal(view[1], [-1.0, -0.5, ILLEGAL_Q])  # its actions, the padding still out
    np.testing.assert_array_equal(np.asarray(branches.greedy(jnp.asarray(view))), [2, 1])
    np.testing.assert_allclose(float(Branches.value(jnp.asarray(view))), (0.2 - 0.5) / 2, rtol=1e-6)
    noise = jax.random.gumbel(jax.random.PRNGKey(0), (512, 2, 3))
    draws = np.asarray(branches.random(noise, branches.legal((512,), jnp.broadcast_to(mask, (512, 5)))))
    assert set(draws[:, 0]) == {0, 2} and set(draws[:, 1]) == {0, 1}


@pytest.fixture(scope="module")
def stuck_game(masked_game):
    """The masked game with 2 open cells and 3 picks: the third pick's state, not terminal, has
    no legal move (its mask is all false); any pick there pays -1."""

    class StuckGame(type(masked_game)):
        def __init__(self):
            self._params = masked_game.default_params.replace(legal=2, picks=3)

    return StuckGame()


def test_states_without_a_legal_move_give_finite_targets_of_the_rewards_size(stuck_game):
    """Issue 63: every third state of the stuck game has an all-false mask. Its greedy value
    used to be ILLEGAL_Q = -1e9, bootstrapped into the previous step's target: the loss reached
    about 1e17. Now the targets stay of the rewards' size (|r| <= 1, x 0.1, discounted) and the
    loss with them."""
    config = PQNConfig(total_timesteps=2048, num_envs=16, num_steps=32, num_epochs=1, minibatch_size=256, hidden=(16,))
    result = make_train(config, stuck_game)(keys_for_seeds([0]))
    metrics = {name: np.asarray(result.metrics[name]) for name in ("loss", "target_mean", "diverged_at_update")}
    assert (metrics["diverged_at_update"] == 0).all()
    assert np.abs(metrics["target_mean"]).max() < 1.0, metrics["target_mean"]
    assert metrics["loss"].max() < 1.0, metrics["loss"]


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
        (
            dict(checkpoint_interval=20_480),
            r"PQNConfig\(checkpoint_interval=20480\): .* expected it in the task module's PROTOCOL = Protocol",
        ),
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
    torso = QMLP((32,), "relu", 6, conv_channels=(16,), image_shape=(10, 10, 4))
    network = QNetwork(torso, 6, whole=True, input_scale=0.5)
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


def test_every_config_class_imports_from_purehr_and_from_its_algorithm_package():
    """``from purehr import PQNConfig`` and ``from purehr.algorithms.pqn import PQNConfig`` (SAC's
    and PPO's alike) name the registry's class; the packages load them lazily, so importing a
    package (the registry reads its metric names) does not import JAX."""
    import subprocess
    import sys

    import purehr
    from purehr.algorithms import ppo, pqn, sac

    for name, package, config_class in (
        ("pqn", pqn, "PQNConfig"),
        ("sac", sac, "SACConfig"),
        ("ppo", ppo, "PPOConfig"),
    ):
        assert getattr(purehr, config_class) is getattr(package, config_class) is get_algorithm(name).config_class()
    assert pqn.make_pqn is make_pqn
    with pytest.raises(AttributeError, match="PQNConfg"):
        pqn.PQNConfg  # noqa: B018
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, purehr.algorithms.pqn, purehr.algorithms.sac, purehr.algorithms.ppo; "
            "print('jax' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "False"


def test_an_extension_is_refused_where_epsilon_or_the_learning_rate_decays_over_the_budget():
    """Issue 63: PQN's epsilon decays over epsilon_decay_fraction x the budget's updates, so with
    --anneal-lr false a run of 8,192 steps is still not the beginning of one of 16,384 (its epsilon
    at update 1 differs: hand-computed below) and its extension is refused, as an annealed rate's
    is, through the one ``budget_dependence`` every config has; a constant epsilon extends, and
    SAC, with no schedule over the budget, does."""
    from purehr.algorithms.pqn.returns import epsilon_at
    from purehr.algorithms.sac.config import SACConfig
    from purehr.run.planning.resume import extension_hint, extension_problem

    short = PQNConfig(total_timesteps=8_192, anneal_lr=False, epsilon_decay_fraction=0.5)  # 4 updates of 2,048
    long = short.replace(total_timesteps=16_384)
    first = [float(epsilon_at(jnp.int32(1), config.num_updates, config.hyperparams())) for config in (short, long)]
    np.testing.assert_allclose(first, [1.0 - 0.8 * 1 / 2, 1.0 - 0.8 * 1 / 4], rtol=1e-6)  # 0.6 against 0.8
    problem = extension_problem("hrv@pqn", short, None, 8_192, 16_384)
    assert problem.startswith("--resume --steps 16,384: cannot extend hrv@pqn from 8,192 to 16,384 steps: "), problem
    assert "its exploration epsilon decays from 1 to 0.2 over the first epsilon_decay_fraction=0.5" in problem
    annealed = extension_problem("hrv@pqn", short.replace(anneal_lr=True), None, 8_192, 16_384)
    assert "anneal_lr=True; train a run you mean to extend with --anneal-lr false" in annealed
    assert extension_problem("hrv@pqn", short.replace(epsilon_start=0.2), None, 8_192, 16_384) is None
    assert extension_problem("swing@sac", SACConfig(total_timesteps=8_192), None, 8_192, 16_384) is None
    extends = "a larger --steps extends it, docs/protocol.md"  # what a finished run's last lines say
    for config, hint in ((short, ""), (short.replace(epsilon_start=0.2), extends)):
        manifest = {"tasks": ["hrv@pqn"], "algorithms": {"hrv@pqn": "pqn"}, "configs": {"hrv@pqn": config.to_dict()}}
        assert extension_hint(manifest) == hint
