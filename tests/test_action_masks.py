"""Legal-action masks (issue 52, item 1): an environment whose observation is a ``spaces.Dict``
with an ``"action_mask"`` entry (docs/environments.md, "Legal actions"). PPO's categorical
policy never samples, picks or gives probability to an illegal action (rollout and
evaluation), the random floor draws uniformly among the legal ones, and the shipped example
(examples/masked_game.py) trains through the command line past that floor on every seed.

A Ctrl-C and a resume are bit-identical for every task: the protocol tests
(tests/test_interrupt.py, tests/test_resume_multitask.py) check it on tasks of every action
space (swing's Box, hrv's MultiDiscrete, CartPole's Discrete); the example's learning test
adds one on a masked Dict observation, at the example's tiny budget."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ctrl_c_from_a_callback

from purehr.engine.distributions import action_mask_reader, make_distribution
from purehr.envs import spaces
from purehr.envs.rollout import random_policy
from purehr.run.protocol import train_all_seeds

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "masked_game.py"
TASK = "masked_game:make_env"
MARGIN = 0.25
"""Held-out return over the random-among-legal floor (3 picks of 5 open prizes uniform on
[0, 1): the floor is 1.5 on average, the best three 2.0; measured at 16,384 steps: 1.849 and
1.860 against the floor's 1.485, 200 episodes)."""

SPACES = [
    # (action space, actor output [outputs], mask [outputs])
    (spaces.Discrete(4), [5.0, 0.0, 1.0, 4.0], [False, True, True, False]),
    (spaces.MultiDiscrete((2, 3)), [3.0, 0.0, 2.0, 0.0, 9.0], [False, True, True, True, False]),
]


@pytest.mark.parametrize("space, logits, mask", SPACES)
def test_a_masked_categorical_gives_illegal_actions_no_probability(space, logits, mask):
    """Sampling, the mode, log-prob and entropy are those of the legal actions alone, even
    where an illegal action has the largest logit."""
    logits, mask = jnp.asarray(logits), jnp.asarray(mask)
    masked = make_distribution(space, logits, None, action_mask=mask)
    samples = jax.vmap(masked.sample)(jax.random.split(jax.random.PRNGKey(0), 2000))
    modes = masked.mode()
    if isinstance(space, spaces.Discrete):
        legal = np.flatnonzero(np.asarray(mask))
        assert set(np.asarray(samples).tolist()) == set(legal.tolist()) and int(modes) == 2
        probabilities = np.exp([float(masked.log_prob(jnp.int32(a))) for a in range(space.n)])
        np.testing.assert_allclose(probabilities[legal].sum(), 1.0, rtol=1e-6)
        expected = jax.nn.softmax(logits[legal])
        np.testing.assert_allclose(float(masked.entropy()), float(-(expected * jnp.log(expected)).sum()), rtol=1e-5)
    else:  # component 0 may only be 1; component 1 only 0 or 1
        assert set(np.asarray(samples[:, 0]).tolist()) == {1} and set(np.asarray(samples[:, 1]).tolist()) == {0, 1}
        assert np.asarray(modes).tolist() == [1, 0]
        assert float(masked.log_prob(jnp.array([1, 0]))) + float(masked.log_prob(jnp.array([1, 1]))) < 0.0
        both = jnp.exp(masked.log_prob(jnp.array([1, 0]))) + jnp.exp(masked.log_prob(jnp.array([1, 1])))
        np.testing.assert_allclose(float(both), 1.0, rtol=1e-6)
        expected = jax.nn.softmax(jnp.array([2.0, 0.0]))
        np.testing.assert_allclose(float(masked.entropy()), float(-(expected * jnp.log(expected)).sum()), rtol=1e-5)
    assert np.isfinite(float(masked.entropy()))


def test_without_a_mask_the_distribution_is_the_unmasked_one():
    logits = jnp.asarray([5.0, 0.0, 1.0, 4.0])
    plain = make_distribution(spaces.Discrete(4), logits, None)
    unmasked = make_distribution(spaces.Discrete(4), logits, None, action_mask=None)
    assert float(plain.entropy()) == float(unmasked.entropy()) and int(plain.mode()) == 0


@pytest.mark.parametrize(
    "space, mask", [(spaces.Discrete(5), [0, 1, 0, 1, 1]), (spaces.MultiDiscrete((2, 3)), [1, 0, 0, 1, 1])]
)
def test_the_random_floor_draws_uniformly_among_the_legal_actions(space, mask):
    width = space.n if isinstance(space, spaces.Discrete) else sum(space.nvec)
    observation_space = spaces.Dict({"action_mask": spaces.Box(0.0, 1.0, (width,)), "x": spaces.Box(0.0, 1.0, (1,))})
    policy = random_policy(space, observation_space)
    observation = {"action_mask": jnp.asarray(mask, jnp.float32), "x": jnp.zeros((1,))}
    draws = np.asarray(jax.vmap(lambda key: policy(observation, 0, key))(jax.random.split(jax.random.PRNGKey(1), 6000)))
    if isinstance(space, spaces.Discrete):
        counts = np.bincount(draws, minlength=5)
        assert counts[[0, 2]].sum() == 0 and np.all(np.abs(counts[[1, 3, 4]] / 6000 - 1 / 3) < 0.03), counts
    else:
        assert set(draws[:, 0].tolist()) == {0}
        counts = np.bincount(draws[:, 1], minlength=3)
        assert counts[0] == 0 and np.all(np.abs(counts[1:] / 6000 - 0.5) < 0.03), counts


def test_a_mask_of_the_wrong_width_is_refused_before_anything_is_traced(tmp_path, monkeypatch):
    """A mask that is not one 0/1 entry per action (a component's choice) is named in one line."""
    from purehr.algorithms.ppo.algorithm import make_ppo
    from purehr.algorithms.ppo.config import PPOConfig

    shutil.copy(EXAMPLE, tmp_path / "masked_game_wrong.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    import masked_game_wrong

    env = masked_game_wrong.make_env()
    monkeypatch.setattr(env, "action_space", lambda params=None: spaces.Discrete(4))
    with pytest.raises(TypeError, match=r"'action_mask' has shape \(9,\); expected \(4,\)"):
        make_ppo(PPOConfig(total_timesteps=64, num_envs=2, num_steps=32, minibatch_size=32), env)


def test_a_mask_beside_a_continuous_action_is_refused():
    observation_space = spaces.Dict({"action_mask": spaces.Box(0.0, 1.0, (2,))})
    with pytest.raises(TypeError, match=r"'action_mask' beside the continuous action space Box\("):
        action_mask_reader(observation_space, spaces.Box(-1.0, 1.0, (2,)))


def test_the_ppo_evaluation_policy_only_picks_legal_cells(tmp_path, monkeypatch):
    """Untrained weights put logits on every cell; the deterministic and the sampling policy
    pick open cells only, on 256 fresh boards."""
    from purehr.algorithms.ppo.algorithm import make_ppo

    shutil.copy(EXAMPLE, tmp_path / "masked_game_policy.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    import masked_game_policy

    env = masked_game_policy.make_env()
    ppo = make_ppo(masked_game_policy.PPO_CONFIG, env)
    params = ppo.network_params(ppo.init(jax.random.PRNGKey(3)))
    keys = jax.random.split(jax.random.PRNGKey(4), 256)
    observations, _ = jax.vmap(env.reset, in_axes=(0, None))(keys, env.default_params)
    for deterministic in (True, False):
        act = jax.vmap(ppo.policy(params, deterministic), in_axes=(0, None, 0))
        actions = np.asarray(jax.jit(act)(observations, 0, keys))
        legal = np.asarray(observations["action_mask"])[np.arange(256), actions]
        assert legal.all(), deterministic


def load_script(path: Path):
    import importlib.util
    import sys

    name = f"_purehr_script_{path.stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def test_a_recurrent_policy_respects_the_mask_in_its_rollout_loss_and_evaluation(tmp_path, monkeypatch):
    """The GRU's paths (its ``apply`` over sequences, its ``RecurrentPolicy``): one update of
    untrained weights makes no illegal move, its loss sees the masked policy that acted, and
    evaluation picks open cells only."""
    from purehr.algorithms.ppo.algorithm import make_ppo

    shutil.copy(EXAMPLE, tmp_path / "masked_game_gru.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    import masked_game_gru

    env = masked_game_gru.make_env()
    config = masked_game_gru.PPO_CONFIG.replace(
        policy="gru", recurrent_width=16, total_timesteps=512, num_envs=8, num_steps=16, minibatch_size=64
    )
    ppo = make_ppo(config, env)
    runner, metrics = jax.jit(ppo.update)(ppo.init(jax.random.PRNGKey(5)))
    assert int(metrics["invalid_actions"]) == 0 and np.isfinite(float(metrics["loss"])), metrics
    # the loss's entropy is over the open cells (5, 4, then 3 of 9: about 1.37 near uniform), not all 9 (2.2)
    assert float(metrics["entropy"]) < 1.6 and float(metrics["approx_kl"]) < 0.05, metrics
    observation, _ = env.reset(jax.random.PRNGKey(6), env.default_params)
    policy = ppo.policy(ppo.network_params(runner), deterministic=False)
    step = jax.jit(jax.vmap(policy.step, in_axes=(None, None, None, 0)))
    actions, _ = step(policy.initial_state, observation, 0, jax.random.split(jax.random.PRNGKey(7), 256))
    assert np.asarray(observation["action_mask"])[np.asarray(actions)].all()


@pytest.mark.slow
def test_the_masked_game_trains_through_the_cli_and_beats_the_random_among_legal_floor(tmp_path, monkeypatch):
    """In-process ``train_all_seeds.py`` on the example: no illegal move in any rollout
    (updates.csv's invalid_actions), and every seed's last held-out return beats the floor;
    then a Ctrl-C and a resume end bit-identical to it (the protocol tests check that for every
    action space; this is the Dict observation with a mask). About 40 s on 2 cores."""
    shutil.copy(EXAMPLE, tmp_path / "masked_game.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    flags = ["--tasks", TASK, "--steps", "16384", "--seeds", "0", "1", "--run-dir", "run", "--no-render"]
    assert load_script(REPO / "scripts" / "train_all_seeds.py").main([*flags, "--no-progress"]) == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    floor = manifest["baselines"][TASK]["floors"]["random"]["return_mean"]
    assert 1.3 < floor < 1.7, floor  # random-among-legal: never the -1 of a closed cell
    for seed in (0, 1):
        seed_dir = tmp_path / "run" / TASK / f"seed_{seed}"
        with open(seed_dir / "updates.csv") as file:
            updates = list(csv.DictReader(file))
        assert updates and all(float(row["invalid_actions"]) == 0 for row in updates)
        with open(seed_dir / "checkpoints.csv") as file:
            last = list(csv.DictReader(file))[-1]
        assert float(last["eval_return_mean"]) >= floor + MARGIN, (seed, last, floor)
    # Ctrl-C at update 9 of 32, then --resume: the same checkpoints, bit for bit
    interrupted = interrupt_at_update(load_script(REPO / "scripts" / "train_all_seeds.py"), flags, 9)
    assert interrupted == 130
    train_all_seeds(tmp_path / "interrupted", resume=True, progress=False)
    for seed in (0, 1):
        resumed = digests(tmp_path / "interrupted", seed)
        assert resumed == digests(tmp_path / "run", seed) and len(resumed) == 5 and all(resumed), seed


def interrupt_at_update(script, flags: list[str], update: int) -> int:
    """``script.main`` on ``{cwd}/interrupted``, sent a SIGINT (a terminal's Ctrl-C) at ``update``."""
    import signal

    from purehr.run.host.recorder import RunRecorder

    logged, handler = RunRecorder.on_update, signal.getsignal(signal.SIGINT)

    def interrupting(self, task, metrics):
        if int(np.asarray(metrics["update"])[0]) == update:
            ctrl_c_from_a_callback(self)
        return logged(self, task, metrics)

    argv = [*flags[: flags.index("--run-dir")], "--run-dir", "interrupted", "--no-render", "--no-progress"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunRecorder, "on_update", interrupting)
        try:
            return script.main(argv)
        finally:
            signal.signal(signal.SIGINT, handler)  # the script ignores SIGINT once it has stopped


def digests(run: Path, seed: int) -> list[str]:
    with open(run / TASK / f"seed_{seed}" / "checkpoints.csv") as file:
        return [row["state_digest"] for row in csv.DictReader(file)]


WRONG_WIDTH = '''
from masked_game_widths import PickBestPrizes
from purehr.envs import spaces
import jax.numpy as jnp


class MaskOfItsOwnWidth(PickBestPrizes):
    """The example game whose mask has ``mask_cells`` entries (a wrong one unless it is ``cells``)."""

    def __init__(self, mask_cells=9, **kwargs):
        super().__init__(**kwargs)
        self.mask_cells = mask_cells

    def _observation(self, state):
        return {"action_mask": state.open.astype(jnp.float32)[: self.mask_cells], "prizes": state.prizes}

    def observation_space(self, params=None):
        cells = (self._params if params is None else params).cells
        mask = spaces.Box(0.0, 1.0, (self.mask_cells,))
        return spaces.Dict({"action_mask": mask, "prizes": spaces.Box(0.0, 1.0, (cells,))})


def make_env(**kwargs):
    return MaskOfItsOwnWidth(**kwargs)
'''


def test_a_mask_of_the_wrong_width_from_environment_arguments_names_the_task(tmp_path, monkeypatch):
    """Issue 63 W8: the task's default environment is checked when the task is built; one built
    with ``--env-arg`` is checked by the plan, which names the task and its arguments."""
    from purehr.run.planning.run_plan import RunRequest, new_run_plan

    shutil.copy(EXAMPLE, tmp_path / "masked_game_widths.py")
    (tmp_path / "mask_widths.py").write_text(WRONG_WIDTH)
    monkeypatch.syspath_prepend(str(tmp_path))
    request = RunRequest.checked(["mask_widths:make_env"], [0], env_kwargs={"mask_widths:make_env": {"mask_cells": 4}})
    with pytest.raises(ValueError) as raised:
        new_run_plan(tmp_path / "run", request)
    assert str(raised.value).startswith(
        "task 'mask_widths:make_env' with environment arguments {'mask_cells': 4}: observation entry 'action_mask' "
        "has shape (4,); expected (9,)"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("space", [spaces.Discrete(3), spaces.MultiDiscrete((3, 2))])
def test_a_choice_with_no_legal_action_counts_all_its_actions_legal(space):
    """A state whose mask marks a whole choice illegal (a terminal position with no legal move):
    that choice's actions all count legal, as PQN's branches do, so every draw is a real action
    (a MultiDiscrete component's choices never tie with the padding of a wider one) and the
    log-probs of the real actions sum to one."""
    observation_space = spaces.Dict({"board": spaces.Box(0.0, 1.0, (2,)), "action_mask": spaces.Box(0.0, 1.0, (5,))})
    if isinstance(space, spaces.Discrete):
        observation_space = spaces.Dict(
            {"board": spaces.Box(0.0, 1.0, (2,)), "action_mask": spaces.Box(0.0, 1.0, (3,))}
        )
        flat = jnp.array([0.0, 0.0, 0.0, 0.3, 0.7])  # action_mask first (sorted keys), all illegal
        expected = [True, True, True]
    else:  # component 0: only 1 legal; component 1 (2 choices beside component 0's 3): none legal
        flat = jnp.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.3, 0.7])
        expected = [False, True, False, True, True]
    mask = action_mask_reader(observation_space, space)(flat)
    assert np.asarray(mask).tolist() == expected
    logits = jnp.array([0.5, -1.0, 2.0, 0.0, 1.0][: len(expected)])
    policy = make_distribution(space, logits, None, action_mask=mask)
    samples = np.asarray(jax.vmap(policy.sample)(jax.random.split(jax.random.PRNGKey(1), 4000)))
    if isinstance(space, spaces.Discrete):
        assert set(samples.tolist()) == {0, 1, 2}
        total = sum(float(jnp.exp(policy.log_prob(jnp.int32(a)))) for a in range(3))
    else:
        assert set(samples[:, 0].tolist()) == {1} and set(samples[:, 1].tolist()) == {0, 1}
        total = sum(float(jnp.exp(policy.log_prob(jnp.array([1, b])))) for b in range(2))
    np.testing.assert_allclose(total, 1.0, rtol=1e-6)
