"""Issue 49's measurements: the sequential loop iterations of a run's checkpoints (counted from
the traced program), the accelerator check's issue-49 goals, and the check itself run small."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from benchmarks._evaluation_steps import evaluation_steps, sequential_iterations

ROOT = Path(__file__).resolve().parents[1]


def test_sequential_iterations_multiply_when_nested_and_add_in_sequence():
    """scan(7){scan(3)} then scan(5), then a cond whose branches hold scans of 4 and 2, under a
    vmap (width, not length): 7 x 3 + 5 + 4 = 30 when the predicate is the same for the whole
    batch (a real branch, the longest counted); 7 x 3 + 5 + 4 + 2 = 32 when it varies over
    the batch (vmap turns the cond into a select that runs both branches)."""

    def inner(c, _):
        return jax.lax.scan(lambda d, _: (d + 1.0, None), c, None, length=3)[0], None

    def program(x, flag):
        x = jax.lax.scan(inner, x, None, length=7)[0]
        x = jax.lax.scan(lambda c, _: (c * 2.0, None), x, None, length=5)[0]
        four = lambda c: jax.lax.scan(lambda d, _: (d - 1.0, None), c, None, length=4)[0]  # noqa: E731
        two = lambda c: jax.lax.scan(lambda d, _: (d + 2.0, None), c, None, length=2)[0]  # noqa: E731
        return jax.lax.cond(flag > 0, four, two, x)

    x = jnp.ones((3, 2))
    shared = jax.make_jaxpr(jax.vmap(program, in_axes=(0, None)))(x, 1.0)
    assert sequential_iterations(shared) == 30
    per_row = jax.make_jaxpr(jax.vmap(program))(x, jnp.ones(3))
    assert sequential_iterations(per_row) == 32


def test_hrv_checkpoints_count_the_horizon_per_evaluation_and_showcase():
    """hrv's defaults: 300k steps at a 50k interval -> 7 checkpoints, every one full; its
    evaluation and its showcase each one scan over the 100-step episode limit (the env's)."""
    from purehr.run.compiled.task_setup import build_task_setup

    setup = build_task_setup("hrv")
    horizon = setup.env.max_episode_steps(setup.eval_env_params)
    assert horizon == 100
    counts = evaluation_steps(setup, num_seeds=2)
    assert (counts["checkpoints"], counts["full_checkpoints"], counts["quick_checkpoints"]) == (7, 7, 0)
    assert counts["full_evaluation"] == counts["showcase"] == horizon
    assert counts["run_total"] == 7 * 2 * horizon
    assert counts["updates"] == setup.algorithm.num_updates


def _summary_module():
    spec = importlib.util.spec_from_file_location("accelerator_summary", ROOT / "benchmarks" / "accelerator_summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _peers(seeds, steps_ratio, compile_ratio, no_worse=True):
    record = {"config": "purejaxrl:CartPole-v1", "seeds": seeds, "purehr_returns_no_worse": no_worse}
    record["ratio_purehr_over_peer"] = {"steps_per_s": steps_ratio, "compile_s": compile_ratio}
    return {"records": [record]}


def test_issue49_goals_by_hand():
    goals49 = _summary_module().issue49_goals
    met = {"swing": {"met": True}, "hrv": {"met": True}}
    cost = {"ratio_sparse_over_default": {"training_s": 0.5, "program_s": 0.92}}  # the program's time counts
    peers = {"narrow": _peers(5, 1.3, 0.9), "wide": _peers(256, 1.25, 1.0)}
    goals = goals49({"wall_time_s": 19.5, "compile_s": 9.0}, {"wall_time_s": 12.0}, met, cost, peers)
    assert goals["main_job_at_most_20s_with_goals"] is True
    assert goals["checkpoint_share_of_training"] == 0.08
    assert goals["purehr_1.2x_purejaxrl_at_5_and_256"] is True
    assert goals["first_call_no_slower_returns_no_worse"] is True
    slow = goals49({"wall_time_s": 20.5}, None, met, None, {"narrow": _peers(5, 1.1, 0.9), "wide": None})
    assert slow["main_job_at_most_20s_with_goals"] is False  # 20.5 s > 20 s
    assert slow["purehr_1.2x_purejaxrl_at_5_and_256"] is None  # 256 seeds not measured
    unmet = goals49({"wall_time_s": 15.0}, None, {"swing": {"met": False}}, None, {})
    assert unmet["main_job_at_most_20s_with_goals"] is False and unmet["checkpoint_share_of_training"] is None


@pytest.mark.device_script
def test_accelerator_check_quick_runs_every_step_and_writes_one_json(tmp_path):
    """``accelerator_check.sh --quick`` on this CPU: every issue-49 step exits 0 and the one JSON
    holds the main job (cold and warm), the checkpoint-cost pair and the iteration count."""
    out = tmp_path / "check"
    env = dict(os.environ, PYTHON=sys.executable)
    completed = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "accelerator_check.sh"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,
        env=env,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    steps = json.loads((out / "steps.json").read_text())
    expected = {"device", "evaluation_steps", "evaluation_steps_accelerator", "main_cold", "main_warm"}
    assert set(steps) == expected | {"main_cpu_profile", "checkpoint_cost"}
    assert all(step["exit"] == 0 for step in steps.values()), steps
    summary = json.loads((out / "accelerator_check.json").read_text())
    goals = summary["issue49"]
    assert goals["main_job_cold_wall_s"] > 0 and goals["main_job_warm_wall_s"] > 0
    assert set(goals["goals_met"]) == {"hrv"}  # judged on the cold run's last checkpoints
    assert goals["checkpoint_share_of_training"] < 1.0
    assert summary["evaluation_steps"]["tasks"]["hrv"]["full_evaluation"] == 100
    profiles = {
        run: json.loads((out / run / "manifest.json").read_text())["run_config"]["values"]["profile"]
        for run in ("main_cold", "main_cpu_profile")
    }
    assert profiles == {"main_cold": "cpu", "main_cpu_profile": "cpu"}  # auto is cpu on this CPU
