"""What a run prints while it starts and trains: the start banner, the rounding notice, the
progress line and its time estimate, and the notes on falls. Pure functions fed synthetic
numbers, and the progress object fed synthetic callbacks on a fake clock: nothing compiles."""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import PROTOCOL_SMALL

from purehr.ppo.config import PPOConfig
from purehr.run.messages import budget_notice, start_banner
from purehr.run.progress import (
    FallWatch,
    Progress,
    TaskPlan,
    Timings,
    format_duration,
    format_line,
    format_steps,
    format_task,
    remaining_seconds,
)
from purehr.tasks import HRV_DEFAULTS

# tests/test_run.py's protocol: batch 4 x 128 = 512, targets every 3,000 steps, 16,384 steps
SMALL = PPOConfig(**PROTOCOL_SMALL)


# ------------------------------------------------------------------ start banner and rounding


def test_a_budget_rounded_to_whole_updates_is_named_with_both_numbers():
    notice = budget_notice("hrv", HRV_DEFAULTS.replace(total_timesteps=1000))  # one update is 64 x 32
    assert notice == (
        "note: hrv: a budget of 1,000 steps per seed is rounded up to 2,048 = 1 whole update "
        "of 2,048 steps (64 envs x 32)"
    )
    small = budget_notice("swing", SMALL.replace(total_timesteps=1000))
    assert "1,000" in small and "rounded up to 1,024 = 2 whole updates of 512 steps (4 envs x 128)" in small
    assert budget_notice("swing", SMALL) is None  # 16,384 = 32 x 512


def test_the_start_banner_names_tasks_seeds_steps_per_task_and_the_run_directory():
    configs = {"swing": SMALL, "hrv": HRV_DEFAULTS.replace(total_timesteps=5000)}
    banner = start_banner("/runs/quick", ["swing", "hrv"], [0, 1], configs)
    lines = banner.splitlines()
    assert lines[0] == "new run in /runs/quick: swing, hrv x seeds 0, 1 (4 trainings in one compiled program)"
    assert lines[1] == (
        "  swing      16,384 steps per seed: 32 updates of 4 envs x 128 steps, held-out checkpoints every 3,000"
    )
    assert lines[2].startswith("  hrv         6,144 steps per seed: 3 updates of 64 envs x 32 steps")
    assert lines[3:] == [
        "note: hrv: a budget of 5,000 steps per seed is rounded up to 6,144 = 3 whole updates "
        "of 2,048 steps (64 envs x 32)"
    ]
    assert start_banner("/runs/quick", ["hrv"], [3], configs, resume=True).startswith(
        "continuing the run in /runs/quick: hrv x seeds 3 (1 training"
    )


# ------------------------------------------------------------------ formatting


@pytest.mark.parametrize(
    "steps, text",
    [
        (0, "0"),
        (2048, "2,048"),
        (12_345, "12.3k"),
        (300_000, "300k"),
        (301_056, "301k"),
        (1_230_000, "1.23M"),
        (10_002_432, "10M"),
        (25_500_000, "25.5M"),
    ],
)
def test_steps_are_short_and_exact_where_small(steps, text):
    assert format_steps(steps) == text


@pytest.mark.parametrize("seconds, text", [(0.4, "0 s"), (45.4, "45 s"), (485, "8:05"), (3723, "1:02:03")])
def test_durations(seconds, text):
    assert format_duration(seconds) == text


def test_a_value_that_does_not_exist_yet_is_left_out_not_shown_as_nan():
    assert format_task("swing", 4096, 10_002_432, None, float("nan")) == "swing 4,096/10M"
    assert (
        format_task("swing", 1_228_800, 10_002_432, 0.85, 12.345)
        == "swing 1.23M/10M, held-out success 0.85, return 12.3"
    )
    assert format_task("hrv", 301_056, 301_056, 1.0, -3.0) == "hrv done (301k), held-out success 1.00"
    assert format_line(["hrv done (301k)"], 65, None) == "hrv done (301k) | 1:05 elapsed"
    assert format_line(["a", "b"], 65, 485) == "a | b | 1:05 elapsed, about 8:05 left"
    assert format_line(["a"], 65, 485, settled=False) == "a | 1:05 elapsed, up to 8:05 left"


# ------------------------------------------------------------------ plan and time left


def test_the_plan_has_the_checkpoints_of_the_runner():
    # the first updates at or beyond 3,000, 6,000, ...: 6 (3,072), 12 (6,144), ..., 30 (15,360) and the
    # last (32); every second target (6,000, 12,000) and the last get the full evaluation
    plan = TaskPlan.from_config(SMALL)
    assert (plan.batch_size, plan.num_updates, plan.total_steps) == (512, 32, 16384)
    assert plan.full_checkpoints == (12, 24, 32) and plan.quick_checkpoints == (6, 18, 30)
    assert plan.checkpoints_after(12) == (2, 2) and plan.checkpoints_after(32) == (0, 0)


def test_time_left_adds_each_task_updates_and_checkpoints_at_their_own_cost():
    plans = {
        "swing": TaskPlan.from_config(SMALL),
        "hrv": TaskPlan.from_config(HRV_DEFAULTS.replace(total_timesteps=4096, checkpoint_interval=2048)),
    }  # 2 updates, both checkpoint
    swing, hrv = Timings(), Timings()
    swing.updates.extend([5.0, 1.0, 2.0])  # the first (warm-up) is left out: 1.5 s per update
    swing.checkpoints[True].append(4.0)  # no quick one timed yet: it borrows the full cost
    assert remaining_seconds(plans, {"swing": 10, "hrv": 0}, {"swing": swing, "hrv": hrv}) is None  # hrv untimed
    hrv.updates.append(0.5)
    hrv.checkpoints[True].append(3.0)
    # swing: 22 updates x 1.5 + 3 full (12, 24, 32) x 4 + 2 quick (18, 30) x 4 = 53; hrv: 1 x 0.5 + 1 x 3
    assert remaining_seconds(plans, {"swing": 10, "hrv": 1}, {"swing": swing, "hrv": hrv}) == pytest.approx(56.5)
    swing.checkpoints[False].append(1.0)  # now timed: 33 + 12 + 2 x 1; hrv has finished
    assert remaining_seconds(plans, {"swing": 10, "hrv": 2}, {"swing": swing, "hrv": hrv}) == pytest.approx(47.0)
    swing.checkpoints[True] += [2.0, 3.0]  # the first (warm-up) left out again: 2.5 s per full one
    assert remaining_seconds(plans, {"swing": 10, "hrv": 2}, {"swing": swing, "hrv": hrv}) == pytest.approx(42.5)
    untimed = Timings()
    untimed.updates.append(1.0)
    untimed.initial_checkpoint = 7.0  # only the step-0 checkpoint: it stands in for both kinds
    # after update 29: 3 updates, the quick checkpoint at 30 and the full one at 32
    assert remaining_seconds({"hrv": plans["swing"]}, {"hrv": 29}, {"hrv": untimed}) == pytest.approx(3 + 7 + 7)


# ------------------------------------------------------------------ falls


def test_a_return_that_gives_back_half_its_gain_is_noted_once_until_a_new_best():
    watch = FallWatch("swing training return", window=2)
    notes = [watch.add(value, steps) for steps, value in enumerate([0, 0, 5, 10, 10, 8, 6, 4, 2, 2], start=1)]
    # means of two: 0, 2.5, 7.5, 10 (best at step 5), 9, 7, 5 (lost 5 = half the gain of 10), 3, 2
    assert [n is not None for n in notes] == [False] * 7 + [True, False, False]
    assert notes[7] == "note: swing training return fell from 10 at 5 steps to 5 at 8 (mean of the last 2)"
    assert watch.add(float("nan"), 11) is None
    assert [watch.add(v, 12 + i) for i, v in enumerate([20, 20, 1, 1])][-1] is not None  # re-armed by 20


def test_a_success_rate_that_drops_a_quarter_is_noted():
    watch = FallWatch("hrv held-out success", window=1, fraction=0.0, min_drop=0.25)
    assert [watch.add(v, s) for v, s in [(0.0, 0), (0.9, 50_000), (0.7, 100_000)]] == [None, None, None]
    assert watch.add(0.6, 150_000) == "note: hrv held-out success fell from 0.9 at 50k steps to 0.6 at 150k"


# ------------------------------------------------------------------ the progress object


def test_progress_counts_steps_per_task_and_seed_and_estimates_from_measured_costs():
    clock = [100.0]
    out = io.StringIO()
    plans = {"swing": TaskPlan.from_config(SMALL), "hrv": TaskPlan.from_config(SMALL)}
    progress = Progress(plans, num_seeds=2, file=out, clock=lambda: clock[0])
    no_return = {"mean_episode_return": np.array([np.nan, np.nan])}
    progress.start()
    for task in plans:  # the step-0 checkpoints: start-up, not timed
        clock[0] += 10.0
        progress.on_checkpoint(task, None, {"success_rate": np.zeros(2), "return_mean": np.zeros(2)}, {})
    for update in range(1, 7):
        for task, seconds in (("swing", 2.0), ("hrv", 1.0)):
            clock[0] += seconds
            progress.on_update(task, no_return if update < 6 else {"mean_episode_return": np.array([np.nan, 4.0])})
    clock[0] += 5.0  # update 6 crossed 3,000: a quick checkpoint
    progress.on_checkpoint("hrv", None, {"success_rate": np.array([0.5, 1.0]), "return_mean": np.ones(2)}, None)
    # 6 updates of 512 steps per seed: 3,072 (not x 2 seeds, not summed with the other task)
    assert progress.line() == (
        "swing 3,072/16.4k, held-out success 0.00, return 4 | hrv 3,072/16.4k, held-out "
        "success 0.75, return 4 | 43 s elapsed, up to 2:33 left"
    )  # swing: step 0 only
    # swing: 26 updates x 2 s + 5 checkpoints, none timed but the step-0 one (10 s, an upper bound) = 102;
    # hrv: 26 x 1 s + 5 checkpoints x 5 s (the quick cost stands in for the untimed full one) = 51
    assert progress.remaining_s() == pytest.approx(102.0 + 51.0)
    clock[0] += 2.0
    progress.on_update("swing", no_return)
    clock[0] += 4.0
    progress.on_checkpoint("swing", None, {"success_rate": np.ones(2), "return_mean": np.ones(2)}, None)
    # swing has timed a checkpoint: 25 updates x 2 s + 5 checkpoints (12, 18, 24, 30, 32) x 4 s = 70; hrv 51
    assert progress.line().endswith("49 s elapsed, about 2:01 left")
    progress.close()
    text = out.getvalue()
    assert "nan" not in text.lower() and "3,072/16.4k" in text
    assert "at 3,072 steps" not in text  # quick checkpoints write no line, full ones do
    assert text.count("at 0 steps: held-out success 0.00 (seeds 0.00 0.00)") == 2
