"""Bad inputs to the engine (issue 11, items 5, 7 and 14), one table row each: hyperparameters
and budgets refused by name before anything is compiled or written; invalid actions and
non-finite states flagged by the environments; a diverging seed frozen and reported.

Cheap by design: config rows are pure Python, environment rows one jitted step, the
divergence row one two-update ``train_hr_ppo`` on an 8-unit network (the protocol-level
divergence test is in tests/test_resume_multitask.py, on its already compiled program)."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.config_types import KINDS
from purehr.algorithms.ppo.algorithm import diverged_at_update, make_ppo
from purehr.algorithms.ppo.config import MAX_OPTIMIZER_STEPS, PPOConfig
from purehr.algorithms.pqn.config import PQNConfig
from purehr.algorithms.sac.config import SACConfig
from purehr.algorithms.trainer import host_env_steps
from purehr.engine.compile_options import training_compiler_options
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.hrv import HRWritingEnv
from purehr.envs.swing import SwingEnv
from purehr.envs.wrappers import training_wrappers
from purehr.protocol_settings import ProtocolSettings
from purehr.run.compiled.train_all import checkpoint_due, checkpoint_schedule, full_evaluation_due

ROOT = Path(__file__).resolve().parents[1]
KEY = jax.random.PRNGKey(0)

# --- item 5 / 11: hyperparameters ------------------------------------------------------------
CONFIG_ROWS = [
    # (field changes, the message must contain)
    (dict(learning_rate="3e-4"), "learning_rate='3e-4': expected a finite real number (int or float), got str"),
    (dict(anneal_lr="no"), "anneal_lr='no': expected True or False, got str"),
    (dict(anneal_lr=1), "anneal_lr=1: expected True or False, got int"),
    (dict(learning_rate=math.inf), "learning_rate=inf: expected a finite number"),
    (dict(learning_rate=-math.inf), "learning_rate=-inf: expected a finite number"),
    (dict(learning_rate=1e39), "learning_rate=1e+39: expected a finite number (|x| <= 3.403e+38"),
    (dict(ent_coef=math.inf), "ent_coef=inf: expected a finite number"),
    (dict(vf_coef=math.inf), "vf_coef=inf: expected a finite number"),
    (dict(clip_range=math.inf), "clip_range=inf: expected a finite number"),
    (dict(log_std_init=math.nan), "log_std_init=nan: expected a finite number"),
    (dict(gamma=math.nan), "gamma=nan: expected a finite number"),
    (dict(max_grad_norm=math.inf), "max_grad_norm=inf: expected a finite number"),
    (dict(gae_lambda=True), "gae_lambda=True: expected a finite real number (int or float), got bool"),
    (dict(clip_range=0.0), "clip_range=0.0: expected a finite number > 0"),
    (dict(num_envs=8.0), "num_envs=8.0: expected a positive integer, got float"),
    (dict(total_timesteps=True), "total_timesteps=True: expected a positive integer, got bool"),
    (dict(actor_hidden=(64, True)), "actor_hidden=(64, True): expected a non-empty tuple of positive ints"),
    (dict(activation=None), "activation=None: expected one of"),
    # item 7: a budget whose optimiser steps overflow the int32 counters
    (dict(total_timesteps=10**20), "total_timesteps=100,000,000,000,000,000,000: 48,828,125,000,000,000 updates"),
    # issue 63 W4: one update alone overflows it: the batch's problem, not total_timesteps'
    (
        dict(num_envs=10**20, num_steps=128, minibatch_size=128),
        f"num_envs=100,000,000,000,000,000,000: one update is 4 epochs x 100,000,000,000,000,000,000 minibatches"
        f" = 400,000,000,000,000,000,000 optimiser steps, more than the {MAX_OPTIMIZER_STEPS:,} an int32 step "
        f"counter holds; expected num_envs <= {MAX_OPTIMIZER_STEPS // 4:,}",
    ),
    # issue 27: held-out episodes all run at once on the device (10^8 ran out of memory)
    (dict(eval_episodes=10**8), "eval_episodes=100000000: expected at most 100,000 (every held-out episode"),
    (dict(quick_eval_episodes=10**8), "quick_eval_episodes=100000000: expected at most 100,000"),
    # issue 52: the rewards' scale and normalisation
    (dict(reward_scaling=0.0), "reward_scaling=0.0: expected a finite number > 0"),
    (dict(reward_scaling=-10), "reward_scaling=-10.0: expected a finite number > 0"),
    (dict(reward_scaling=math.inf), "reward_scaling=inf: expected a finite number"),
    (dict(reward_scaling=math.nan), "reward_scaling=nan: expected a finite number"),
    (dict(reward_scaling="10"), "reward_scaling='10': expected a finite real number (int or float), got str"),
    (dict(normalize_returns="yes"), "normalize_returns='yes': expected True or False, got str"),
]


@pytest.mark.parametrize(
    "changes, message",
    CONFIG_ROWS,
    ids=[", ".join(f"{k}={v!r}"[:24] for k, v in changes.items()) for changes, _ in CONFIG_ROWS],
)
def test_bad_config_is_refused_naming_field_and_value(changes, message):
    with pytest.raises(ValueError) as raised:
        PPOConfig(**changes)
    assert message in str(raised.value)


def test_every_config_field_has_a_type_check():
    """A field's check comes from its declaration: a kind the check does not know, or a string
    without its choices, would escape the checks above."""
    for config in (PPOConfig, PQNConfig, SACConfig):
        for field in dataclasses.fields(config):
            known = field.type in KINDS and (field.type != "str" or field.metadata["choices"])
            assert known, f"{config.__name__}.{field.name}: {field.type}"
    with pytest.raises(ValueError, match=r"PPOConfig.policy='lstm': expected one of \('mlp', 'gru'\)"):
        PPOConfig(policy="lstm")


def test_numbers_are_normalised_so_configs_compare_and_serialise_alike():
    config = PPOConfig(
        learning_rate=np.float32(0.5), num_envs=np.int64(8), anneal_lr=np.bool_(False), actor_hidden=[32, 32]
    )
    assert type(config.learning_rate) is float and config.learning_rate == 0.5
    assert type(config.num_envs) is int and config.anneal_lr is False and config.actor_hidden == (32, 32)
    assert config == PPOConfig(learning_rate=0.5, anneal_lr=False, actor_hidden=(32, 32))


# --- item 7: step counts ------------------------------------------------------------------------
def test_largest_budget_is_exact_and_one_more_update_is_refused():
    config = PPOConfig(num_envs=8, num_steps=256, minibatch_size=256, num_epochs=4)  # 8 x 4 = 32 per update
    most = MAX_OPTIMIZER_STEPS // 32 * 2048
    assert PPOConfig(total_timesteps=most, num_envs=8, num_steps=256, minibatch_size=256).num_updates == most // 2048
    with pytest.raises(ValueError, match=f"expected total_timesteps <= {most:,}"):
        config.replace(total_timesteps=most + 1)


def test_checkpoint_targets_are_exact_past_2_to_the_31_steps():
    """3e9 steps, 2,048 per update: target 42,950 x 50,000 = 2,147,500,000 (> 2**31) is first
    reached by update 1,048,584 (2,147,500,032 steps), not 1,048,583 (2,147,497,984)."""
    config = PPOConfig(
        total_timesteps=3_000_000_000,
        num_envs=64,
        num_steps=32,
        minibatch_size=512,
    )
    protocol = ProtocolSettings(checkpoint_interval=50_000, full_eval_interval=10, quick_eval_episodes=20)
    assert config.num_updates == 1_464_844  # ceil(3e9 / 2048)
    updates, full = checkpoint_schedule(config, protocol)
    assert len(updates) == 60_000 + 1  # targets 50k .. 3e9 (the last update reaches 3e9) and the initial state
    assert updates[0] == 0 and updates[-1] == 1_464_844 and updates[-2] == 1_464_820  # 1,464,820 x 2048 >= 3e9 - 50k
    due = jax.jit(lambda u: (checkpoint_due(config, protocol, u), full_evaluation_due(config, protocol, u)))
    assert [bool(due(jnp.int32(u))[0]) for u in (1_048_583, 1_048_584, 1_048_585)] == [False, True, False]
    assert bool(due(jnp.int32(1_048_584))[1])  # target 42,950 is a 10th: full evaluation
    assert not bool(due(jnp.int32(updates[-2]))[1]) and bool(due(jnp.int32(1_464_844))[1])
    assert host_env_steps(np.array([[1_048_584, 0]], np.int32), config).tolist() == [[2_147_500_032, 0]]


def cli(argv, capsys):
    spec = importlib.util.spec_from_file_location("train_all_seeds_cli", ROOT / "scripts" / "train_all_seeds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as exited:
        module.main(argv)
    return exited.value.code, capsys.readouterr().err


PBT_SMALL = ["--steps", "20000", "--num-envs", "8", "--num-steps", "64", "--minibatch-size", "128"]
PBT_SMALL += ["--pbt", "--seeds", "0", "1", "2", "3"]
CHECKPOINTS = ["--checkpoint-interval", "2560"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--steps", "100000000000000000000"], "total_timesteps=100,000,000,000,000,000,000"),
        (["--learning-rate", "inf"], "learning_rate=inf: expected a finite number"),
        (["--ent-coef", "nan"], "ent_coef=nan: expected a finite number"),
        # a seed is a uint32 PRNG seed: refused before the directory and its lock exist
        (["--seeds", "0", "4294967296"], "4294967296 is above 4,294,967,295; expected seeds from 0 to 2**32 - 1"),
        (["--distributed", "--coordinator-address", "notahost"], "coordinator address 'notahost': expected HOST:PORT"),
        (["--distributed", "--coordinator-address", "10.0.0.2:99999"], "'10.0.0.2:99999': expected HOST:PORT"),
        (["--eval-episodes", "100000000"], "eval_episodes=100000000: expected at most 100,000"),
        # --pbt (docs/pbt.md): what the user gave, named with the exact numbers
        (
            [*PBT_SMALL],
            "hrv trains 20,480 steps (total_timesteps 20,000 rounded up to 40 whole updates of 512) and with a "
            "checkpoint every 50,000 steps (checkpoint_interval) no checkpoint falls between its first and last "
            "update, where the step runs; expected a checkpoint interval of at most 19,968 steps "
            "(--checkpoint-interval)",
        ),
        (
            ["--tasks", "gymnax:CartPole-v1", *PBT_SMALL, *CHECKPOINTS, "--pbt-fitness", "gymnax:CartPole-v1=success"],
            "--pbt-fitness gymnax:CartPole-v1=success: gymnax:CartPole-v1 defines no success",
        ),
        (
            [*PBT_SMALL, *CHECKPOINTS, "--pbt-explore", "learning_rate"]
            + ["--pbt-bounds", "learning_rate=1e-5:1e-2", "learning_rate=1e-4:1e-3"],
            "--pbt-bounds learning_rate given twice (learning_rate=1e-5:1e-2, learning_rate=1e-4:1e-3); "
            "expected each name once",
        ),
    ],
)
def test_cli_refuses_before_the_run_directory_exists(flags, message, tmp_path, capsys):
    run_dir = tmp_path / "run"
    code, err = cli(["--tasks", "hrv", "--seeds", "0", "--no-render", "--run-dir", str(run_dir)] + flags, capsys)
    assert code == 2 and message in err and "Traceback" not in err
    assert not run_dir.exists()


# --- item 14: environment actions and states -----------------------------------------------------
NAN, INF = math.nan, math.inf
HRV_ACTION_ROWS = [  # (style, content op, first modification; the rest keep), invalid?
    ((2, 1, 2), False),
    ((NAN, 1, 1), True),
    ((0, -INF, 1), True),
    ((0, 1, INF), True),
    ((7, 1, 1), True),  # style out of 0..4
    ((0, 3, 1), True),  # content op out of 0..2
    ((0, 1, -1), True),
    ((0, 1.5, 1), True),  # fractional
]


@pytest.fixture(scope="module")
def hrv_step():
    env = HRWritingEnv(hrv_dim=3)
    _, state = env.reset(KEY)
    return env, state, jax.jit(lambda state, action: env.step(KEY, state, action))


@pytest.mark.parametrize("head, invalid", HRV_ACTION_ROWS)
def test_hrv_invalid_actions_are_flagged_and_act_as_the_neutral_choice(hrv_step, head, invalid):
    env, state, step = hrv_step
    action = jnp.asarray(list(head) + [1, 1], jnp.float32)
    _, next_state, reward, terminated, truncated, info = step(state, action)
    assert bool(info["invalid_action"]) == invalid and not bool(info["nonfinite_state"])
    assert np.isfinite(float(reward))
    if invalid:  # the same step as the neutral action (no style, keep everything)
        _, neutral_state, neutral_reward, *_ = step(state, jnp.asarray([0, 1, 1, 1, 1], jnp.float32))
        assert float(reward) == float(neutral_reward)
        np.testing.assert_array_equal(next_state.current_hrv, neutral_state.current_hrv)


@pytest.fixture(scope="module")
def swing_step():
    env = SwingEnv()
    _, state = env.reset(KEY)
    return env, state, jax.jit(lambda state, action: env.step(KEY, state, action))


@pytest.mark.parametrize(
    "action, invalid",
    [
        ((0.3, -0.2), False),
        ((5.0, -5.0), False),  # finite values beyond the box saturate
        ((NAN, 0.0), True),
        ((0.0, -INF), True),
        ((INF, 0.5), True),
    ],
)
def test_swing_invalid_actions_are_flagged_and_act_as_zero(swing_step, action, invalid):
    env, state, step = swing_step
    _, _, reward, _, _, info = step(state, jnp.asarray(action, jnp.float32))
    assert bool(info["invalid_action"]) == invalid and not bool(info["nonfinite_state"])
    assert np.isfinite(float(reward))
    if invalid:
        zeroed = tuple(a if math.isfinite(a) else 0.0 for a in action)
        assert float(reward) == float(step(state, jnp.asarray(zeroed, jnp.float32))[2])


def _nan_swing_state(state):
    return state.replace(plant=state.plant.replace(theta_dot=jnp.float32(NAN)))


def _nan_hrv_state(state):
    return state.replace(context=state.context.at[0].set(NAN))


@pytest.mark.parametrize(
    "stepper, poison, action",
    [
        ("swing_step", _nan_swing_state, [0.0, 0.0]),
        ("hrv_step", _nan_hrv_state, [0, 1, 1, 1, 1]),
    ],
)
def test_a_state_that_is_no_longer_finite_ends_the_episode_without_a_nan(request, stepper, poison, action):
    env, state, step = request.getfixturevalue(stepper)
    action = jnp.asarray(action, jnp.float32)
    observation, _, reward, terminated, truncated, info = step(poison(state), action)
    assert bool(info["nonfinite_state"]) and bool(terminated) and not bool(truncated)
    assert float(reward) == 0.0 and not bool(info["success"])
    assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(observation))
    # through the training wrappers: the episode restarts from a finite state, the flag is kept
    wrapped = training_wrappers(env)
    _, wrapped_state = wrapped.reset(KEY)
    wrapped_state = wrapped_state.replace(env_state=poison(wrapped_state.env_state))
    next_observation, next_state, _, terminated, _, info = jax.jit(wrapped.step)(KEY, wrapped_state, action)
    assert bool(terminated) and bool(info["nonfinite_state"]) and bool(info["episode_done"])
    assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves((next_observation, next_state)))


# --- item 5: a diverging seed is frozen and reported ----------------------------------------------
TINY = PPOConfig(
    total_timesteps=4 * 32 * 4,
    num_envs=4,
    num_steps=32,
    minibatch_size=64,
    num_epochs=2,
    actor_hidden=(16,),
    critic_hidden=(16,),
)


def test_diverged_at_update_reads_the_optimiser_gap_per_seed():
    """Seeds stacked: healthy after 5 updates (5 x 4 optimiser steps), frozen at update 3
    (2 updates applied), frozen at update 1 (none applied)."""
    from types import SimpleNamespace

    import optax

    counts = jnp.asarray([20, 8, 0], jnp.int32)
    opt_state = (optax.EmptyState(), (optax.ScaleByAdamState(counts, None, None), optax.EmptyState()))
    runner = SimpleNamespace(opt_state=opt_state, update_index=jnp.full((3,), 5, jnp.int32))
    assert TINY.num_epochs * TINY.num_minibatches == 4
    assert np.asarray(diverged_at_update(runner, TINY)).tolist() == [0, 3, 1]


def test_cli_ends_a_diverged_run_with_exit_1_and_the_message(monkeypatch, tmp_path, capsys):
    import purehr.run.protocol as protocol
    from purehr.run.outcome import RunDiverged

    def diverging(*args, **kwargs):
        raise RunDiverged(
            "training diverged: hrv seed 1 at update 31 (15,872 env steps)",
            {"hrv": {"1": {"update": 31, "env_steps": 15872}}},
        )

    monkeypatch.setattr(protocol, "train_all_seeds", diverging)
    code, err = cli(["--tasks", "hrv", "--seeds", "0", "1", "--no-render", "--run-dir", str(tmp_path / "r")], capsys)
    assert code == 1 and "error: training diverged: hrv seed 1 at update 31" in err and "finished" not in err


def test_train_hr_ppo_raises_on_divergence_and_keeps_the_frozen_model():
    from purehr import TrainingDiverged, train_hr_ppo

    env = HRWritingEnv(hrv_dim=2)
    with pytest.raises(TrainingDiverged, match=r"training diverged at update 1 \(128 env steps\)") as raised:
        train_hr_ppo(
            env,
            timesteps=256,
            learning_rate=1e30,
            batch_size=64,
            num_envs=4,
            num_steps=32,
            num_epochs=1,
            actor_hidden=(8,),
            critic_hidden=(8,),
        )
    model = raised.value.model
    assert raised.value.update == 1 and model.metrics["diverged_at_update"].tolist() == [1, 1]
    assert model.metrics["env_steps"].tolist() == [128, 256]
    assert not np.all(np.isfinite(model.metrics["loss"]))
    # frozen at update 0: exactly the initial parameters of seed 0 (compiled as the training program
    # is: XLA's options round them), no NaN spread into them
    init = jax.vmap(make_ppo(model.config, env).init)
    initial = jax.jit(init, compiler_options=training_compiler_options())(keys_for_seeds([0])).params
    for leaf, expected in zip(jax.tree.leaves(model.params), jax.tree.leaves(initial)):
        assert np.array_equal(np.asarray(leaf), np.asarray(expected)[0])


# --- issue 27: the Gymnasium wrapper checks an action's shape and flags fractional ones -----------
GYMNASIUM_ACTION_ROWS = [
    # (environment, action, the ValueError's message or None, invalid_action when stepped)
    ("swing", 0.5, "action of shape (): expected shape (2,)", None),
    ("swing", [0.5, -0.5, 0.1], "action of shape (3,): expected shape (2,)", None),
    ("swing", [0.5, -0.5], None, False),
    ("hrv", [1.7, 1, 1, 1, 1], None, True),  # was truncated to 1 and taken as valid
    ("hrv", [2.0, 1, 1, 1, 1], None, False),  # a whole number in a float is a valid choice
    ("hrv", np.array([2, 1, 1, 1, 1], np.int64), None, False),
    ("hrv", [1, 1, 1], "action of shape (3,): expected shape (5,)", None),
]


@pytest.fixture(scope="module")
def gymnasium_envs():
    pytest.importorskip("gymnasium")
    from purehr.envs import to_gymnasium

    return {"swing": to_gymnasium(SwingEnv(), seed=0), "hrv": to_gymnasium(HRWritingEnv(hrv_dim=3), seed=0)}


@pytest.mark.parametrize("name, action, refused, invalid", GYMNASIUM_ACTION_ROWS)
def test_gymnasium_wrapper_checks_the_action(gymnasium_envs, name, action, refused, invalid):
    env = gymnasium_envs[name]
    env.reset(seed=1)
    if refused is not None:
        with pytest.raises(ValueError) as raised:
            env.step(action)
        assert refused in str(raised.value)
        return
    *_, info = env.step(action)
    assert info["invalid_action"] is invalid


# --- issue 27: a user callback's exception is the user's, not JaxRuntimeError: INTERNAL ---------
def test_a_callback_that_raises_stops_training_and_its_exception_is_raised():
    from purehr.algorithms.trainer import make_train

    seen = []

    def callback(metrics):
        seen.append(int(metrics["update"][0]))
        if len(seen) == 2:
            raise KeyError("my callback broke")

    train = make_train(TINY, HRWritingEnv(hrv_dim=2), callback=callback)
    with pytest.raises(KeyError, match="my callback broke") as raised:
        train(keys_for_seeds([0]))
    assert seen == [1, 2]  # the scan stopped at the update that raised
    assert "raised by make_train's callback after update 2" in "".join(getattr(raised.value, "__notes__", []))


# --- issue 48: a divergence after the environment produced non-finite values names it -------------
def test_the_run_diverged_message_names_the_environments_non_finite_values(tmp_path):
    """Counted up to the seed's divergence (updates.csv's nonfinite_states); without any, the
    learning rate stays the advice."""
    from purehr.run.outcome import diverged_error as _diverged
    from purehr.run.store.run_dir import RunDirectory

    rows = [{"update": update, "nonfinite_states": count} for update, count in ((1, 40), (2, 44), (3, 40))]
    diverged = {"mine": {"1": {"update": 2, "env_steps": 256}}}
    message = str(_diverged(RunDirectory(tmp_path), diverged, update_rows={"mine": {1: rows}}))
    assert "mine seed 1: the environment produced 84 non-finite rewards or observations by then" in message
    assert "check the environment's step for NaN or infinite values first; then start a new run" in message
    healthy = [dict(row, nonfinite_states=0) for row in rows]
    message = str(_diverged(RunDirectory(tmp_path), diverged, update_rows={"mine": {1: healthy}}))
    assert "non-finite rewards" not in message and "Start a new run with a smaller learning rate" in message
