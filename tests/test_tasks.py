"""The task registry: lookups by name and by environment, and the one task-setup builder."""

from __future__ import annotations

import jax
import pytest
from conftest import HRV_TINY as TINY

from purehr.envs.base import freeze_after_done
from purehr.envs.hrv import Curriculum, HRWritingEnv
from purehr.envs.swing import SwingEnv
from purehr.envs.wrappers import training_wrappers
from purehr.run.compiled.task_setup import build_task_setup
from purehr.tasks import TASK_NAMES, TASKS, get_task, task_of_env, task_of_env_class


def test_unknown_task_is_named_with_the_known_ones():
    known = r"\['hrv', 'hrv-flicker', 'hrv-hidden-audience', 'swing', 'swing-angles'\]"
    with pytest.raises(ValueError, match=rf"unknown task 'cartpole'; expected one of {known}"):
        get_task("cartpole")
    assert TASK_NAMES == ("swing", "hrv")  # the default run; the partially observed variants are asked for by name
    assert tuple(TASKS)[:5] == ("swing", "hrv", "swing-angles", "hrv-hidden-audience", "hrv-flicker")


def test_an_environment_finds_its_task_through_wrappers():
    assert task_of_env(SwingEnv()).name == "swing"
    assert task_of_env(training_wrappers(HRWritingEnv(4))).name == "hrv"
    assert task_of_env(object()) is None
    assert task_of_env_class("HRWritingEnv").name == "hrv" and task_of_env_class("CartPole") is None


def test_every_baseline_is_found_by_its_flag_and_an_unknown_flag_names_the_choices():
    for task in TASKS.values():
        assert [task.baseline_by_flag(b.flag) for b in task.baselines] == list(task.baselines)
    with pytest.raises(ValueError, match="'oracle' is not a swing policy; choose from structured, zero, random"):
        get_task("swing").baseline_by_flag("oracle")


def test_task_setup_trains_on_the_schedule_and_is_judged_on_the_final_stage():
    plain = build_task_setup("hrv", TINY)
    staged = build_task_setup(get_task("hrv"), TINY, Curriculum())
    assert float(plain.eval_env_params.difficulty) == pytest.approx(0.9)
    assert float(staged.eval_env_params.target_precision) == pytest.approx(0.02)
    stages = [float(staged.algorithm.env_params_at(u, TINY.hyperparams()).difficulty) for u in (0, 1, 2, 5, 6, 9)]
    assert stages == pytest.approx([0.3, 0.3, 0.6, 0.6, 0.9, 0.9])  # starts (0, 2, 6) of 10 updates
    recorded = build_task_setup("hrv", TINY, manifest={"environments": {"hrv": {"hrv_dim": 3}}})
    assert recorded.env.hrv_dim == 3 and build_task_setup("swing").config == get_task("swing").default_config


def test_freeze_after_done_keeps_the_ended_episodes_leaves():
    before = {"x": jax.numpy.array([1.0, 2.0]), "t": jax.numpy.array([1, 2])}
    after = {"x": jax.numpy.array([5.0, 6.0]), "t": jax.numpy.array([3, 4])}
    frozen = freeze_after_done(jax.numpy.array([True, False]), before, after)
    assert frozen["x"].tolist() == [1.0, 6.0] and frozen["t"].tolist() == [1, 4]
