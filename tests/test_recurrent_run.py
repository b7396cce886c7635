"""A recurrent policy through the whole protocol: both partially observed variants train in one
compiled call with a GRU, a run SIGKILLed after its third checkpoint resumes to the
uninterrupted run's final state bit for bit (the memory carried in the checkpoint included),
and a restored checkpoint acts and evaluates with its memory as training judged it. The
algorithm's own tests are tests/test_recurrent.py."""

from __future__ import annotations

import contextlib
import io
import json
import signal

import jax
import numpy as np
import pytest
from conftest import PROTOCOL_CLI, PROTOCOL_SMALL, KilledRun, started_at_the_compile

from purehr.envs.policies import RecurrentPolicy
from purehr.model.facade import PPOModel
from purehr.run import restore
from purehr.run.protocol import train_all_seeds
from purehr.run.store.files import read_csv
from purehr.tasks import get_task

TASKS = ["swing-angles", "hrv-hidden-audience"]
SEEDS = [0, 1]
GRU = dict(policy="gru", recurrent_width=8)
FLAGS = PROTOCOL_CLI[PROTOCOL_CLI.index("--steps") :]  # PROTOCOL_SMALL without its task list
CLI = ["--tasks", *TASKS, "--seeds", "0", "1", *FLAGS, "--policy", "gru", "--recurrent-width", "8"]
CLI += ["--no-render", "--no-progress"]


def leaves_equal(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.fixture(scope="module")
def gru_runs(tmp_path_factory):
    """The uninterrupted run in process and, on the other core from its compilation on, the same
    run from the command line, SIGKILLed after its third swing-angles checkpoint and then resumed
    here."""
    base = tmp_path_factory.mktemp("gru")
    killed_dir = base / "killed"
    child = KilledRun(killed_dir, CLI, "swing-angles/seed_1/checkpoints.csv", start=False)
    configs = {task: get_task(task).default_config.replace(**PROTOCOL_SMALL, **GRU) for task in TASKS}
    with contextlib.redirect_stderr(io.StringIO()), started_at_the_compile(child.start):
        reference = train_all_seeds(base / "reference", tasks=TASKS, seeds=SEEDS, configs=configs, progress=False)
    output = child.wait()
    assert child.rows >= 3 and child.returncode == -signal.SIGKILL, output[-2000:]
    with contextlib.redirect_stderr(io.StringIO()):
        resumed = train_all_seeds(killed_dir, resume=True, progress=False)
    return {"reference": reference, "resumed": resumed, "killed_dir": killed_dir}


@pytest.mark.slow
def test_a_killed_recurrent_run_resumes_bit_for_bit_memory_included(gru_runs):
    reference, resumed = gru_runs["reference"], gru_runs["resumed"]
    assert 0 < resumed.resumed_from["swing-angles"] < 16384
    for task in TASKS:
        final, expected = resumed.final_runners[task], reference.final_runners[task]
        hidden, start = final.policy_state
        assert hidden.shape == (len(SEEDS), 4, 8) and start.shape == (len(SEEDS), 4)  # [seeds, envs, width]
        assert np.any(hidden)  # a memory that moved, carried through the kill
        assert leaves_equal(final, expected), task
        for seed in SEEDS:
            rows = read_csv(gru_runs["killed_dir"] / task / f"seed_{seed}" / "checkpoints.csv")
            reference_rows = read_csv(reference.run_dir / task / f"seed_{seed}" / "checkpoints.csv")
            assert [r["state_digest"] for r in rows] == [r["state_digest"] for r in reference_rows]
    manifest = json.loads((gru_runs["killed_dir"] / "manifest.json").read_text())
    assert {manifest["configs"][task]["policy"] for task in TASKS} == {"gru"}


@pytest.mark.slow
def test_a_restored_recurrent_policy_acts_and_evaluates_with_its_memory(gru_runs):
    run_dir = gru_runs["reference"].run_dir
    restored = restore(run_dir, "hrv-hidden-audience", 1)
    assert isinstance(restored.pure_policy, RecurrentPolicy)
    np.testing.assert_array_equal(
        restored.runner.policy_state[0], gru_runs["reference"].final_runners["hrv-hidden-audience"].policy_state[0][1]
    )
    # the held-out evaluation of the restored memory policy is the one training recorded
    metrics = get_task("hrv-hidden-audience").heldout_evaluation(
        restored.env,
        restored.env_params,
        restored.pure_policy,
        num_episodes=int(restored.checkpoint_row["eval_episodes"]),
    )
    assert float(metrics["return_mean"]) == pytest.approx(restored.checkpoint_row["eval_return_mean"], rel=1e-5)
    # acting outside jit: the state goes in and comes out; None starts an episode
    observation, _ = restored.env.reset(jax.random.PRNGKey(5), restored.env_params)
    first, state = restored.policy(observation)
    again, state_again = restored.policy(observation, 0, None)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(state, state_again)
    expected, expected_state = restored.pure_policy.step(
        restored.pure_policy.initial_state, observation, 0, jax.random.PRNGKey(0)
    )
    np.testing.assert_array_equal(first, expected)
    second, _ = restored.policy(observation, 1, state)
    expected_second, _ = restored.pure_policy.step(expected_state, observation, 1, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(second, expected_second)
    # a batch: one memory per observation
    batch = jax.tree.map(lambda x: np.stack([x, x, x]), observation)
    actions, states = restored.policy(batch)
    assert states.shape == (3, 8)
    np.testing.assert_array_equal(actions[0], first)
    with pytest.raises(ValueError, match="expected a leading axis of 3"):
        restored.policy(batch, 0, state)
    # the seed API's model: predict carries the same memory
    model = PPOModel(restored.env, restored.env_params, restored.config, restored.params, {}, 1)
    predicted, predicted_state = model.predict(observation)
    np.testing.assert_array_equal(predicted, first)
    np.testing.assert_array_equal(model.predict(observation, state=predicted_state)[0], second)
    swing = restore(run_dir, "swing-angles", 0)
    assert swing.env.observation_space(swing.env_params).shape == (6,)
