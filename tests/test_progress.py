"""What a run prints while it starts and trains: the start banner, the rounding notice, the
progress line and its time estimate, and the notes on falls. Pure functions fed synthetic
numbers, and the progress object fed synthetic callbacks on a fake clock: nothing compiles."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from conftest import PROTOCOL_SMALL

from purehr.algorithms.ppo.config import PPOConfig
from purehr.population.settings import PBTSettings
from purehr.protocol_settings import ProtocolSettings, split_settings
from purehr.run.host.estimate import RunEstimate
from purehr.run.host.progress import (
    FallWatch,
    LineWriter,
    Progress,
    TaskPlan,
    TaskStatus,
    fit_line,
    format_duration,
    format_steps,
    format_task,
    format_timing,
    progress_bar,
)
from purehr.run.planning.messages import budget_notice, start_banner
from purehr.tasks import HRV_DEFAULTS

# tests/test_run.py's protocol: batch 4 x 128 = 512, targets every 3,000 steps, 16,384 steps
SMALL = PPOConfig(**split_settings(PROTOCOL_SMALL)[0])
SMALL_PROTOCOL = ProtocolSettings.from_dict(split_settings(PROTOCOL_SMALL)[1])


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
    protocols = {"swing": SMALL_PROTOCOL, "hrv": ProtocolSettings()}
    banner = start_banner("/runs/quick", ["swing", "hrv"], [0, 1], configs, protocols)
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
    assert start_banner("/runs/quick", ["hrv"], [3], configs, protocols, resume=True).startswith(
        "continuing the run in /runs/quick: hrv x seeds 3 (1 training"
    )


def test_the_start_banner_of_a_pbt_run_says_the_seeds_are_one_population():
    configs, protocols = {"swing": SMALL}, {"swing": SMALL_PROTOCOL}
    assert "PBT" not in start_banner("/runs/quick", ["swing"], [0, 1, 2, 3], configs, protocols)
    pbt = PBTSettings(explore=("learning_rate",), interval=2)
    banner = start_banner("/runs/quick", ["swing"], [0, 1, 2, 3], configs, protocols, pbt=pbt)
    assert banner.splitlines()[1] == (
        "  population-based training (PBT): the 4 seeds of each task are one population of 4 members, not "
        "independent seeds; exploit and explore (learning_rate) at every 2nd checkpoint target"
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
    assert format_task(TaskStatus("swing", 4096, 10_002_432, None, float("nan"))) == "swing 4,096/10M"
    assert (
        format_task(TaskStatus("swing", 1_228_800, 10_002_432, 0.85, 12.345))
        == "swing 1.23M/10M, held-out success 0.85, return 12.3"
    )
    assert format_task(TaskStatus("hrv", 301_056, 301_056, 1.0, -3.0)) == "hrv done (301k), held-out success 1.00"
    assert format_timing(65, None) == "1:05 elapsed"
    assert format_timing(65, 485) == "1:05 elapsed, about 8:05 left"
    assert format_timing(65, 485, settled=False) == "1:05 elapsed, up to 8:05 left"
    assert format_timing(65, None, elapsed=False) == "1:05 elapsed"  # without an estimate the elapsed time stays
    assert progress_bar(0.5, unicode=False) == "|######      |" and progress_bar(0.99) == "|███████████▉|"


TWO_TASKS = [TaskStatus("swing", 3_700_000, 5_001_216, 0.85, 12.345), TaskStatus("hrv", 301_056, 301_056, 1.0, -3.0)]


@pytest.mark.parametrize(
    "width, line",
    [
        (
            None,
            " 42%|█████       | swing 3.7M/5M, held-out success 0.85, return 12.3 | hrv done (301k), held-out "
            "success 1.00 | 1:05 elapsed, about 8:05 left",
        ),  # fmt: skip
        (
            140,
            " 42% | swing 3.7M/5M, held-out success 0.85, return 12.3 | hrv done (301k), held-out success 1.00 | "
            "1:05 elapsed, about 8:05 left",
        ),  # fmt: skip
        (
            120,
            " 42% | swing 3.7M/5M, held-out success 0.85 | hrv done (301k), held-out success 1.00 | 1:05 elapsed, "
            "about 8:05 left",
        ),  # fmt: skip
        (100, " 42% | swing 3.7M/5M, success 0.85 | hrv done (301k), success 1.00 | 1:05 elapsed, about 8:05 left"),
        (90, " 42% | swing 3.7M/5M, success 0.85 | hrv done (301k), success 1.00 | about 8:05 left"),
        (79, " 42% | swing 3.7M, success 0.85 | hrv done, success 1.00 | about 8:05 left"),  # an 80-column terminal
        (60, " 42% | swing 3.7M | hrv done | about 8:05 left"),
        (40, " 42% | about 8:05 left"),
        (20, " 42% | about 8:05 le"),  # narrower than the percentage and the time left: cut
    ],
)
def test_the_line_fits_its_width_dropping_the_least_important_parts_first(width, line):
    """User path 4: in an 80-column terminal the line was cut before the time left."""
    assert fit_line(0.425, TWO_TASKS, 65, 485, True, width, progress_bar(0.425)) == line
    if width is None or width >= 22:
        assert len(line) <= (width or len(line)) and line.startswith(" 42%") and line.endswith("about 8:05 left")


# ------------------------------------------------------------------ plan and time left


def test_the_plan_has_the_checkpoints_of_the_runner():
    # the first updates at or beyond 3,000, 6,000, ...: 6 (3,072), 12 (6,144), ..., 30 (15,360) and the
    # last (32); every second target (6,000, 12,000) and the last get the full evaluation
    plan = TaskPlan.from_config(SMALL, SMALL_PROTOCOL)
    assert (plan.batch_size, plan.num_updates, plan.total_steps) == (512, 32, 16384)
    assert plan.full_checkpoints == (12, 24, 32) and plan.quick_checkpoints == (6, 18, 30)
    assert plan.checkpoints_after(12) == (2, 2) and plan.checkpoints_after(32) == (0, 0)


def _batched_iteration(estimate: RunEstimate, clock: list[float], tasks: list[str], seconds: float) -> None:
    """One scan iteration as XLA runs it: every task's update computed, then their callbacks
    within a millisecond."""
    clock[0] += seconds
    for task in tasks:
        estimate.on_update(task, clock[0])
        clock[0] += 0.001


def test_time_left_is_timed_per_scan_iteration_and_per_checkpoint():
    """A 10 updates with full checkpoints after 5 and 10, B 4 updates and one after 4; the
    callbacks of an iteration arrive together, so the iteration is timed, not each task."""
    plans = {"A": TaskPlan(512, 10, 5120, (5, 10), ()), "B": TaskPlan(512, 4, 2048, (4,), ())}
    estimate, clock = RunEstimate(plans, {"A": 0, "B": 0}), [0.0]
    estimate.start(0.0)
    assert estimate.remaining({"A": 0, "B": 0}) == (None, False)  # nothing timed yet
    _batched_iteration(estimate, clock, ["A", "B"], 4.0)  # start-up, step-0 checkpoints, first updates: 4 s
    for _ in range(3):
        _batched_iteration(estimate, clock, ["A", "B"], 1.0 - 0.002)  # a plain iteration of both: 1 s
    # after 4 updates of each: A's 6 iterations alone are untimed, so they borrow both tasks' 1 s (an upper
    # bound), and A's 2 checkpoints the first interval's 4 s (no checkpoint timed yet): 6 + 8, not settled
    assert estimate.remaining({"A": 0, "B": 0}) == (pytest.approx(14.0 + 4.0, abs=0.01), False)  # B's too
    estimate.on_checkpoint("B", True)
    assert estimate.remaining({"A": 0, "B": 4}) == (pytest.approx(14.0, abs=0.01), False)
    _batched_iteration(estimate, clock, ["A"], 1.0 - 0.001)  # A alone 0.5 s + B's checkpoint 0.5 s
    estimate.on_checkpoint("A", True)
    _batched_iteration(estimate, clock, ["A"], 1.0 - 0.001)  # A alone 0.5 s + A's checkpoint 0.5 s
    for _ in range(2):
        _batched_iteration(estimate, clock, ["A"], 0.5 - 0.001)
    # A has done 8 updates: 2 iterations of 0.5 s and its last checkpoint at 0.5 s, all timed
    assert estimate.remaining({"A": 5, "B": 4}) == (pytest.approx(1.5, abs=0.01), True)


def test_the_time_left_never_falls_short_when_the_first_task_of_an_iteration_finishes_first():
    """User path 4, the cause of 95 -> 98 -> 92 -> 94: timed per task, the first task of each
    iteration (swing, 25 updates at --steps 100000) was given the whole iteration and hrv
    (49 updates) about 0 s; once swing was done the time left fell to about 0 and grew back.
    Timed per iteration, the estimate stays at or above the time really left."""
    plans = {"swing": TaskPlan(4096, 25, 102_400, (25,), ()), "hrv": TaskPlan(2048, 49, 100_352, (49,), ())}
    estimate, clock = RunEstimate(plans, {"swing": 0, "hrv": 0}), [0.0]
    estimate.start(0.0)
    truth = 24 * 0.4 + 24 * 0.28  # after the first iteration: 24 more with both tasks, 24 of hrv alone
    for iteration in range(49):
        tasks = ["swing", "hrv"] if iteration < 25 else ["hrv"]
        _batched_iteration(estimate, clock, tasks, (0.4 if len(tasks) == 2 else 0.28) - 0.001 * len(tasks))
        if iteration >= 1:
            truth -= 0.4 if len(tasks) == 2 else 0.28  # what is left after this iteration
        if iteration > 1:  # two iterations timed
            left, settled = estimate.remaining({"swing": 25, "hrv": 49})
            assert left >= truth - 1e-6, (iteration, left, truth)
            assert settled == (iteration >= 25), iteration  # an upper bound until hrv alone is timed
            if settled:
                assert left == pytest.approx(truth, rel=0.01)


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


def test_a_resumed_run_prints_the_falls_an_uninterrupted_run_would():
    """The watches of a resumed run start from the rows it kept, not afresh: its notes after the
    resume are those of the uninterrupted run (no note of a fall measured from the resume)."""
    plan = {"swing": TaskPlan(512, 60, 30_720, (), ())}
    returns = [[float(v), float(v) + 1.0] for v in [0, 2, 4, 6, 8, 10] * 2 + list(range(10, -14, -1))]
    returns += [[20.0, 20.0]] * 12 + [[18.7, 18.6], [18.6, 18.5]] * 6
    seed_rows = {seed: [] for seed in (0, 1)}

    def feed(progress: Progress, first: int, last: int) -> list[str]:
        progress.start()
        for update in range(first, last):
            progress.on_update("swing", {"mean_episode_return": np.asarray(returns[update])})
            for seed in (0, 1):
                seed_rows[seed].append({"update": update + 1, "mean_episode_return": returns[update][seed]})
        return [line for line in progress.file.getvalue().splitlines() if line.startswith("note:")]

    whole = feed(Progress(plan, 2, file=io.StringIO(), clock=lambda: 0.0), 0, len(returns))
    assert len(whole) == 1 and "fell from" in whole[0]  # the fall after the first best, not the wobble at 20
    for resume_at in (14, 30, 45):
        seed_rows = {seed: [] for seed in (0, 1)}
        first = feed(Progress(plan, 2, file=io.StringIO(), clock=lambda: 0.0), 0, resume_at)
        kept = {"swing": {seed: list(rows) for seed, rows in seed_rows.items()}}
        resumed = Progress(plan, 2, done_updates={"swing": resume_at}, file=io.StringIO(), clock=lambda: 0.0)
        resumed.seed_from_rows(kept, {"swing": {0: [], 1: []}})
        assert first + feed(resumed, resume_at, len(returns)) == whole, resume_at


# ------------------------------------------------------------------ the progress object


class FakeTerminal(io.StringIO):
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def _quick_run(file, iteration_seconds=(0.4, 0.28)):
    """The shape of --steps 100000 --seeds 0 1 (swing 25 updates, hrv 49) on a fake clock,
    the callbacks of each iteration together; 1 s per checkpoint."""
    clock = [100.0]
    plans = {"swing": TaskPlan(4096, 25, 102_400, (25,), ()), "hrv": TaskPlan(2048, 49, 100_352, (49,), ())}
    progress = Progress(plans, num_seeds=2, file=file, clock=lambda: clock[0])
    evaluation = {"success_rate": np.array([0.0, 0.5]), "return_mean": np.zeros(2)}
    progress.start()
    clock[0] += 5.0
    for task in plans:
        progress.on_checkpoint(task, None, evaluation, {})
    for iteration in range(1, 50):
        tasks = [task for task, plan in plans.items() if iteration <= plan.num_updates]
        clock[0] += iteration_seconds[0] if len(tasks) == 2 else iteration_seconds[1]
        for task in tasks:
            progress.on_update(task, {"mean_episode_return": np.array([1.0, 2.0])})
            clock[0] += 0.001
            if iteration == plans[task].num_updates:
                clock[0] += 1.0
                progress.on_checkpoint(task, None, evaluation, {})
    progress.close()
    return file.getvalue()


@pytest.mark.parametrize(
    "iteration_seconds",
    [(0.4, 0.28), (0.1, 0.9)],  # hrv alone as the timings say; then much slower than both were (a loaded machine)
)
def test_the_percentage_never_goes_down(iteration_seconds, monkeypatch):
    """User path 4: the percentage went 95 -> 98 -> 92 -> 94. Even when the time left grows
    (the second row: an estimate no timing could foresee) the percentage holds."""
    monkeypatch.setattr("purehr.run.host.progress.terminal_columns", lambda file: 80)
    shown = [int(percent) for percent in re.findall(r"(\d+)%", _quick_run(FakeTerminal(), iteration_seconds))]
    assert len(shown) > 10 and shown == sorted(shown) and shown[-1] == 100, shown


def test_in_a_terminal_the_line_is_redrawn_within_the_width_and_a_note_takes_its_own_line(monkeypatch):
    monkeypatch.setattr("purehr.run.host.progress.terminal_columns", lambda file: 80)
    text = _quick_run(FakeTerminal())
    draws = [draw for line in text.split("\n") for draw in line.split("\r") if draw.strip()]
    assert all(len(draw) <= 79 for draw in draws), max(draws, key=len)  # one column spare: no wrapping
    lines = [draw for draw in draws if "%" in draw]
    estimated = lines[next(i for i, line in enumerate(lines) if "left" in line) :]
    training = [line for line in estimated if not line.startswith("100%")]
    assert len(training) > 10 and all(re.search(r"(about|up to) [0-9:]+( s)? left", line) for line in training)
    assert "| swing 61.4k, success 0.25 | hrv 28.7k, success 0.25 | up to 24 s left" in text
    notes = [draw for draw in draws if " steps: held-out success" in draw]
    assert [note.strip() for note in notes] == [
        "swing at 0 steps: held-out success 0.25 (seeds 0.00 0.50), return 0",
        "hrv at 0 steps: held-out success 0.25 (seeds 0.00 0.50), return 0",
        "swing at 102k steps: held-out success 0.25 (seeds 0.00 0.50), return 0",
        "hrv at 100k steps: held-out success 0.25 (seeds 0.00 0.50), return 0",
    ]
    assert text.endswith("100% | swing done, success 0.25 | hrv done, success 0.25 | 24 s elapsed\n")


def test_in_a_log_the_line_is_a_plain_line_every_30_s_and_a_note_is_written_once():
    """User path 4: in a log file (stderr not a terminal) each checkpoint note repeated the
    progress line around it, with blank-padded carriage-return lines."""
    clock = [0.0]
    out = io.StringIO()
    plans = {"hrv": TaskPlan(2048, 100, 204_800, (50, 100), ())}
    progress = Progress(plans, num_seeds=1, file=out, clock=lambda: clock[0])
    evaluation = {"success_rate": np.array([1.0]), "return_mean": np.array([0.5])}
    progress.start()
    progress.on_checkpoint("hrv", None, evaluation, {})
    for update in range(1, 101):
        clock[0] += 1.0
        progress.on_update("hrv", {"mean_episode_return": np.array([0.5])})
        if update in (50, 100):
            progress.on_checkpoint("hrv", None, evaluation, {})
    progress.close()
    text = out.getvalue()
    assert "\r" not in text and " \n" not in text, repr(text)
    lines = text.splitlines()
    assert [line for line in lines if "%" not in line] == [
        "hrv at 0 steps: held-out success 1.00, return 0.5",
        "hrv at 102k steps: held-out success 1.00, return 0.5",
        "hrv at 205k steps: held-out success 1.00, return 0.5",
    ]
    progress_lines = [line for line in lines if "%" in line]
    assert len(progress_lines) == len(set(progress_lines)) == 5  # at 0, 30, 60, 90 s and the last
    # 30 updates done, 70 to go at 1 s and 2 checkpoints, untimed, at the first interval's 1 s (an upper bound)
    assert (
        progress_lines[1] == " 29% | hrv 61.4k/205k, held-out success 1.00, return 0.5 | 30 s elapsed, up to 1:12 left"
    )
    assert progress_lines[-1] == "100% | hrv done (205k), held-out success 1.00 | 1:40 elapsed"


def test_a_warning_through_the_writer_clears_the_line_first():
    terminal = FakeTerminal()
    writer = LineWriter(terminal, terminal=True)
    writer.show(" 10% | hrv 1/2 | 1 s elapsed")
    writer.write("warning: hrv seed 0 diverged")
    assert terminal.getvalue() == (
        "\r 10% | hrv 1/2 | 1 s elapsed" + "\r" + " " * 28 + "\r" + "warning: hrv seed 0 diverged\n"
        "\r 10% | hrv 1/2 | 1 s elapsed"
    )
    log = io.StringIO()
    LineWriter(log, terminal=False).write("warning: hrv seed 0 diverged")
    assert log.getvalue() == "warning: hrv seed 0 diverged\n"


def test_a_training_without_checkpoints_ends_at_100_percent():
    """The seed API's line (``train_hr_ppo(progress=True)``): no checkpoint is planned, so the last
    update ends it; a planned last checkpoint holds it at 99% until it is saved."""
    clock, out = [0.0], io.StringIO()
    progress = Progress({"hrv": TaskPlan(128, 10, 1280, (), ())}, num_seeds=1, file=out, clock=lambda: clock[0])
    progress.start()
    for _ in range(10):
        clock[0] += 0.5
        progress.on_update("hrv", {"mean_episode_return": np.array([np.nan])})
    progress.close()
    assert out.getvalue() == "  0% | hrv 0/1,280 | 0 s elapsed\n100% | hrv done (1,280) | 5 s elapsed\n"
    saving = Progress({"hrv": TaskPlan(128, 2, 256, (2,), ())}, num_seeds=1, file=io.StringIO(), clock=lambda: 1.0)
    saving.start()
    for _ in range(2):
        saving.on_update("hrv", {"mean_episode_return": np.array([np.nan])})
    assert saving.line().startswith(" 99% | hrv done (256)")
    saving.on_checkpoint("hrv", None, {"success_rate": np.ones(1)}, None)
    assert saving.line() == "100% | hrv done (256), held-out success 1.00 | 0 s elapsed"
