"""The off-policy peers' published settings map key by key to purehr's config fields
(benchmarks/_rejax_offpolicy_peer.py: peers.py's rejax-pqn and rejax-sac pairings). No training."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# rejax configs/gymnax/cartpole.yaml, pqn section (commit 4954fbf of keraJLi/rejax), typed here
REJAX_PQN_CARTPOLE = {
    "env": "CartPole-v1",
    "num_envs": 16,
    "num_steps": 128,
    "num_minibatches": 16,
    "max_grad_norm": 10,
    "learning_rate": 0.0003,
    "num_epochs": 5,
    "total_timesteps": 524288,
    "eval_freq": 16384,
    "eps_start": 1,
    "eps_end": 0.05,
    "exploration_fraction": 0.5,
    "gamma": 0.99,
    "td_lambda": 0.9,
    "normalize_observations": False,
}
# rejax configs/gymnax/pendulum.yaml, sac section (commit b33bab4), typed here
REJAX_SAC_PENDULUM = {
    "env": "Pendulum-v1",
    "agent_kwargs": {"activation": "swish"},
    "num_envs": 1,
    "buffer_size": 10_000,
    "fill_buffer": 256,
    "batch_size": 256,
    "learning_rate": 0.01,
    "num_epochs": 1,
    "total_timesteps": 10_000,
    "eval_freq": 100,
    "gamma": 0.99,
    "polyak": 0.98,
    "target_entropy_ratio": None,
    "normalize_observations": True,
}


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.spec_from_file_location(
        "_rejax_offpolicy_peer", ROOT / "benchmarks" / "_rejax_offpolicy_peer.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_runs_the_published_configs(peer):
    assert peer.PQN_CONFIGS["CartPole-v1"] == REJAX_PQN_CARTPOLE
    assert peer.SAC_CONFIGS["Pendulum-v1"] == REJAX_SAC_PENDULUM


def test_rejax_pqn_cartpole_maps_key_by_key(peer):
    """Each rejax key's value lands in its PQNConfig field: 2,048-step updates (16 x 128), 256 of
    them, minibatches of 2,048 / 16 = 128; and what rejax fixes in its code (64 x 64, LayerNorm,
    ReLU, no reward scale, a constant learning rate)."""
    c = peer.rejax_pqn_as_purehr(dict(REJAX_PQN_CARTPOLE))
    assert (c.total_timesteps, c.num_updates, c.num_envs, c.num_steps) == (524288, 256, 16, 128)
    assert (c.num_epochs, c.minibatch_size, c.learning_rate, c.max_grad_norm) == (5, 128, 0.0003, 10.0)
    assert (c.gamma, c.q_lambda) == (0.99, 0.9)
    assert (c.epsilon_start, c.epsilon_finish, c.epsilon_decay_fraction) == (1.0, 0.05, 0.5)
    assert (c.hidden, c.activation, c.layer_norm, c.reward_scaling) == ((64, 64), "relu", True, 1.0)
    assert c.anneal_lr is False and c.normalize_observations is False
    assert set(REJAX_PQN_CARTPOLE) <= set(peer.PQN_FIELDS) | set(peer.SWITCHED_OFF)


def test_rejax_sac_pendulum_maps_key_by_key(peer):
    """One environment x one step per update (rejax's iteration), one gradient step of 256
    samples, tau = 1 - polyak = 0.02, the one learning rate on all three optimisers."""
    c = peer.rejax_sac_as_purehr(dict(REJAX_SAC_PENDULUM))
    assert (c.total_timesteps, c.num_updates, c.num_envs, c.num_steps) == (10_000, 10_000, 1, 1)
    assert (c.gradient_steps, c.sample_size, c.buffer_size, c.learning_starts) == (1, 256, 10_000, 256)
    assert c.warmup_updates == 256  # rejax: no gradient step while global_step <= fill_buffer
    assert (c.actor_learning_rate, c.critic_learning_rate, c.temperature_learning_rate) == (0.01, 0.01, 0.01)
    assert (c.gamma, c.tau, c.initial_temperature, c.target_entropy_per_dimension) == (0.99, 0.02, 1.0, -1.0)
    assert (c.actor_hidden, c.critic_hidden, c.activation) == ((64, 64), (64, 64), "swish")
    assert set(REJAX_SAC_PENDULUM) <= set(peer.SAC_FIELDS) | set(peer.SWITCHED_OFF)


@pytest.mark.parametrize(
    "algorithm, change, named",
    [
        ("pqn", {"dueling": True}, "['dueling']"),
        ("pqn", {"total_timesteps": 100_000}, "total_timesteps=100000"),
        ("sac", {"target_entropy_ratio": 0.7}, "target_entropy_ratio=0.7"),
        ("sac", {"hidden_layer_sizes": [32]}, "['hidden_layer_sizes']"),
    ],
)
def test_rejax_setting_without_a_purehr_counterpart_is_refused_by_name(peer, algorithm, change, named):
    base, convert = {
        "pqn": (REJAX_PQN_CARTPOLE, peer.rejax_pqn_as_purehr),
        "sac": (REJAX_SAC_PENDULUM, peer.rejax_sac_as_purehr),
    }[algorithm]
    with pytest.raises(ValueError, match=re.escape(named)):
        convert({**base, **change})


# Brax's notebooks/training.ipynb train_fn for hopper: sac.train's published settings
BRAX_HOPPER_SAC = {
    "num_timesteps": 6_553_600,
    "num_evals": 20,
    "reward_scaling": 30,
    "episode_length": 1000,
    "normalize_observations": True,
    "action_repeat": 1,
    "discounting": 0.997,
    "learning_rate": 6e-4,
    "num_envs": 128,
    "batch_size": 512,
    "grad_updates_per_step": 64,
    "max_devices_per_host": 1,
    "max_replay_size": 1048576,
    "min_replay_size": 8192,
    "seed": 1,
}


@pytest.fixture(scope="module")
def brax_sac_peer():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # it imports brax_peer, as peers.py runs it
    try:
        spec = importlib.util.spec_from_file_location("_brax_sac_peer", ROOT / "benchmarks" / "_brax_sac_peer.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_brax_sac_runs_hoppers_published_settings_but_budget_and_evaluations(brax_sac_peer):
    published = {k: v for k, v in BRAX_HOPPER_SAC.items() if k not in ("num_timesteps", "seed", "num_evals")}
    ours = {k: v for k, v in brax_sac_peer.BRAX_SAC_SETTINGS.items() if k != "num_evals"}
    assert ours == published
    # the cut budget: its 8,192-step prefill, then 4 epochs of 16 actor steps of 128 environments
    assert brax_sac_peer.STEPS == 8192 + 4 * 16 * 128


def test_brax_sac_maps_key_by_key(brax_sac_peer):
    """Brax's keys and what sac.train fixes in its code (tau 0.005, alpha's Adam at 3e-4, target
    entropy -0.5 per action dimension, log alpha 0, 256 x 256 ReLU) land in their SACConfig fields."""
    c = brax_sac_peer.brax_sac_as_purehr(brax_sac_peer.BRAX_SAC_SETTINGS, 16_384)
    assert (c.total_timesteps, c.num_envs, c.num_steps, c.num_updates) == (16_384, 128, 1, 128)
    assert (c.gradient_steps, c.sample_size, c.learning_starts, c.warmup_updates) == (64, 512, 8192, 64)
    assert (c.actor_learning_rate, c.critic_learning_rate, c.temperature_learning_rate) == (6e-4, 6e-4, 3e-4)
    assert (c.gamma, c.tau, c.target_entropy_per_dimension, c.initial_temperature) == (0.997, 0.005, -0.5, 1.0)
    assert (c.actor_hidden, c.critic_hidden, c.activation, c.buffer_size) == ((256, 256), (256, 256), "relu", 16_384)
    assert set(brax_sac_peer.BRAX_SAC_SETTINGS) <= set(brax_sac_peer.SAC_FIELDS)
    with pytest.raises(ValueError, match=re.escape("['use_her']")):
        brax_sac_peer.brax_sac_as_purehr({**brax_sac_peer.BRAX_SAC_SETTINGS, "use_her": True}, 16_384)
