"""The progress line of a protocol run, fed by the in-scan update and checkpoint callbacks.

What it shows, per task: environment steps per seed done out of the task's budget (tasks
have different budgets; seeds train side by side, so their steps are never summed), the
held-out success of the last checkpoint (mean over seeds) and the latest training return
once an episode has completed. Then the training time so far and an estimate of the time
left, built from what each task costs (see ``TaskPlan`` and ``remaining_seconds``): a
plain update, a checkpoint with the full evaluation and one with the quick evaluation are
timed separately, because a checkpoint costs many updates and the swing's full ones are
rare. A one-line note is written when a task's training return or held-out success falls
markedly (``FallWatch``).

The formatting functions are pure (numbers in, text out) so they can be tested alone; the
summary after a run (``purehr.reports.summary``) spells its durations with ``spelled_duration``.
"""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import TextIO

import numpy as np
from tqdm import tqdm

BAR_RESOLUTION = 1000
REFRESH_S_TERMINAL = 1.0
REFRESH_S_LOG = 30.0
"""A bar written to a file or pipe (a log, a notebook cell) is refreshed rarely."""


# ----------------------------------------------------------------------------- formatting


def format_steps(steps: float) -> str:
    """4,096 / 12.3k / 300k / 1.23M / 10M: short, and exact where small."""
    steps = float(steps)
    if steps < 10_000:
        return f"{steps:,.0f}"
    if steps < 1_000_000:
        value, unit = steps / 1e3, "k"
        text = f"{value:.1f}" if value < 100 else f"{value:.0f}"
    else:
        value, unit = steps / 1e6, "M"
        text = f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text + unit


def _clock(seconds: float) -> tuple[int, int, int]:
    """(hours, minutes, seconds) of a duration rounded to whole seconds (negative: 0)."""
    hours, rest = divmod(max(0, int(round(seconds))), 3600)
    return (hours, *divmod(rest, 60))


def format_duration(seconds: float) -> str:
    """45 s / 8:05 / 1:02:03 (minutes:seconds, hours:minutes:seconds): the progress line's
    clock, compact and to the second because it is read while it changes."""
    hours, minutes, secs = _clock(seconds)
    if not hours and not minutes:
        return f"{secs} s"
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def spelled_duration(seconds: float) -> str:
    """32 s / 3 min 50 s / 1 h 02 min: a finished run's times in the summary, spelled out and
    to the minute past an hour, because they are read once, in a sentence."""
    hours, minutes, secs = _clock(seconds)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def format_task(
    name: str, done_steps: int, total_steps: int, success: float | None, training_return: float | None
) -> str:
    """One task's part of the line: ``swing 3.7M/10M, held-out success 0.85, return 12.3``.
    A value that does not exist yet (no checkpoint, no completed episode) is left out."""
    if done_steps >= total_steps:
        text = f"{name} done ({format_steps(total_steps)})"
    else:
        text = f"{name} {format_steps(done_steps)}/{format_steps(total_steps)}"
    if success is not None and math.isfinite(success):
        text += f", held-out success {success:.2f}"
    if done_steps < total_steps and training_return is not None and math.isfinite(training_return):
        text += f", return {training_return:.3g}"
    return text


def format_line(tasks: list[str], elapsed_s: float, remaining_s: float | None, settled: bool = True) -> str:
    """The whole line after the bar: the tasks, then elapsed and (when estimated) left;
    "up to" while the estimate still stands on the step-0 checkpoint's cost (an upper bound)."""
    timing = f"{format_duration(elapsed_s)} elapsed"
    if remaining_s is not None:
        timing += f", {'about' if settled else 'up to'} {format_duration(remaining_s)} left"
    return " | ".join(tasks + [timing])


# ----------------------------------------------------------------------------- plans and estimate


@dataclass(frozen=True)
class TaskPlan:
    """What one task will do, from its config: ``num_updates`` updates of ``batch_size``
    environment steps per seed, and at which update indices a checkpoint follows (full or
    quick evaluation), by the rules of ``runner.TaskSetup``."""

    batch_size: int
    num_updates: int
    total_steps: int  # num_updates * batch_size (the rounded-up budget)
    full_checkpoints: tuple[int, ...]
    quick_checkpoints: tuple[int, ...]

    @classmethod
    def from_config(cls, config) -> TaskPlan:
        batch, interval, updates = config.batch_size, config.checkpoint_interval, config.num_updates
        full, quick = [], []
        for update in range(1, updates + 1):
            crossed = (update * batch) // interval > ((update - 1) * batch) // interval or update == updates
            if not crossed:
                continue
            is_full = update == updates or (update * batch // interval) % config.full_eval_interval == 0
            (full if is_full else quick).append(update)
        return cls(batch, updates, updates * batch, tuple(full), tuple(quick))

    def checkpoints_after(self, done_updates: int) -> tuple[int, int]:
        """(full, quick) checkpoints still to come once ``done_updates`` updates are done."""
        return (
            sum(u > done_updates for u in self.full_checkpoints),
            sum(u > done_updates for u in self.quick_checkpoints),
        )


class Timings:
    """Seconds per plain update and per checkpoint (full, quick) of one task, measured
    between consecutive callbacks. The first of each kind is left out of its mean while
    later ones exist (it carries warm-up: the first run of that branch of the program);
    the update mean uses the latest 50, so it follows a machine whose load changes."""

    def __init__(self):
        self.updates: deque[float] = deque(maxlen=51)
        self.checkpoints: dict[bool, list[float]] = {True: [], False: []}
        self.initial_checkpoint: float | None = None  # the step-0 one, start-up costs included

    def seconds_per_update(self) -> float | None:
        values = list(self.updates)[1:] or list(self.updates)
        return float(np.mean(values)) if values else None

    def seconds_per_checkpoint(self, full: bool) -> float | None:
        """An untimed kind borrows the other kind's cost (an upper bound for quick ones);
        with neither timed yet, the step-0 checkpoint's (an upper bound: start-up included)."""
        values = self.checkpoints[full] or self.checkpoints[not full]
        if not values:
            return self.initial_checkpoint
        return float(np.mean(values[1:] or values))


def remaining_seconds(
    plans: dict[str, TaskPlan], done_updates: dict[str, int], timings: dict[str, Timings]
) -> float | None:
    """Training time left: per task, remaining updates x seconds per update plus remaining
    checkpoints x their cost. None until every task with updates left has been timed (the
    tasks run one after the other inside each scan iteration, so their costs add up)."""
    total = 0.0
    for task, plan in plans.items():
        left = plan.num_updates - done_updates[task]
        if left <= 0:
            continue
        per_update = timings[task].seconds_per_update()
        if per_update is None:
            return None
        full, quick = plan.checkpoints_after(done_updates[task])
        total += left * per_update
        for count, is_full in ((full, True), (quick, False)):
            if count:
                total += count * (timings[task].seconds_per_checkpoint(is_full) or 0.0)
    return total


def estimate_settled(plans: dict[str, TaskPlan], done_updates: dict[str, int], timings: dict[str, Timings]) -> bool:
    """False while a task with checkpoints to come has timed none after step 0 (its estimate
    then uses the step-0 checkpoint, whose start-up costs make it an upper bound)."""
    return all(
        sum(plan.checkpoints_after(done_updates[task])) == 0
        or timings[task].checkpoints[True]
        or timings[task].checkpoints[False]
        for task, plan in plans.items()
    )


# ----------------------------------------------------------------------------- falls


class FallWatch:
    """Says once when a series falls markedly below its best, and again only after a new best.

    ``window`` values are averaged (training returns are noisy and, for the swing, arrive
    only when episodes complete). The fall is marked when the average has given back at
    least ``fraction`` of what it had gained from its first value to its best (scale-free,
    for returns), and at least ``min_drop`` (an absolute 0.25 for a success rate, with
    ``fraction`` 0)."""

    def __init__(self, label: str, window: int = 10, fraction: float = 0.5, min_drop: float = 0.0):
        self.label, self.fraction, self.min_drop = label, fraction, min_drop
        self.values: deque[float] = deque(maxlen=window)
        self.start: float | None = None
        self.best: float | None = None
        self.best_steps = 0
        self.warned = False

    def add(self, value: float, steps: int) -> str | None:
        if not math.isfinite(value):
            return None
        self.values.append(value)
        if len(self.values) < self.values.maxlen:
            return None
        level = float(np.mean(self.values))
        if self.start is None:
            self.start = self.best = level
            self.best_steps = steps
            return None
        if level > self.best:
            self.best, self.best_steps, self.warned = level, steps, False
            return None
        gained, lost = self.best - self.start, self.best - level
        if self.fraction > 0 and gained <= 0:
            return None  # a fall is measured against what was gained: nothing yet
        if self.warned or lost <= 0 or lost < self.fraction * gained or lost < self.min_drop:
            return None
        self.warned = True
        averaged = f" (mean of the last {len(self.values)})" if len(self.values) > 1 else ""
        return (
            f"note: {self.label} fell from {self.best:.3g} at {format_steps(self.best_steps)} steps to "
            f"{level:.3g} at {format_steps(steps)}{averaged}"
        )


# ----------------------------------------------------------------------------- the bar


class Progress:
    """The progress side of ``RunRecorder``: ``start`` once compilation has ended, the
    ``purehr.ppo.loop.HostHooks`` calls (``on_update``, ``on_checkpoint``) forwarded by the
    recorder, ``close`` at the end."""

    def __init__(
        self,
        plans: dict[str, TaskPlan],
        num_seeds: int,
        done_updates: dict[str, int] | None = None,
        file: TextIO | None = None,
        clock=time.perf_counter,
    ):
        self.plans = plans
        self.num_seeds = num_seeds
        self.done_updates = {task: int((done_updates or {}).get(task, 0)) for task in plans}
        self.file = file if file is not None else sys.stderr
        self.clock = clock
        self.success: dict[str, float | None] = {task: None for task in plans}
        self.training_return: dict[str, float | None] = {task: None for task in plans}
        self.timings = {task: Timings() for task in plans}
        self.return_watch = {task: FallWatch(f"{task} training return") for task in plans}
        self.success_watch = {
            task: FallWatch(f"{task} held-out success", window=1, fraction=0.0, min_drop=0.25) for task in plans
        }
        isatty = getattr(self.file, "isatty", lambda: False)()
        self.refresh_s = REFRESH_S_TERMINAL if isatty else REFRESH_S_LOG
        self.started = self.last_event = self.last_refresh = None
        self.bar = None

    # the text ---------------------------------------------------------------------------
    def remaining_s(self) -> float | None:
        return remaining_seconds(self.plans, self.done_updates, self.timings)

    def fraction_done(self) -> float:
        """Of the estimated training time when there is an estimate, else of the updates."""
        remaining = self.remaining_s()
        if remaining is not None and self.started is not None:
            elapsed = self.clock() - self.started
            return elapsed / (elapsed + remaining) if elapsed + remaining > 0 else 1.0
        done = sum(min(self.done_updates[t], p.num_updates) for t, p in self.plans.items())
        return done / max(1, sum(p.num_updates for p in self.plans.values()))

    def line(self) -> str:
        tasks = [
            format_task(
                task,
                self.done_updates[task] * plan.batch_size,
                plan.total_steps,
                self.success[task],
                self.training_return[task],
            )
            for task, plan in self.plans.items()
        ]
        elapsed = 0.0 if self.started is None else self.clock() - self.started
        return format_line(
            tasks, elapsed, self.remaining_s(), estimate_settled(self.plans, self.done_updates, self.timings)
        )

    # the callbacks ----------------------------------------------------------------------
    def start(self) -> None:
        """The bar appears once compilation has ended, so its times are training times."""
        self.started = self.last_event = self.clock()
        self.last_refresh = -math.inf
        self.bar = tqdm(
            total=BAR_RESOLUTION,
            file=self.file,
            dynamic_ncols=True,
            desc=self.line(),
            bar_format="{percentage:3.0f}%|{bar:12}| {desc}",
            mininterval=0,
        )
        self.last_refresh = self.clock()

    def _elapsed_since_last_event(self) -> float:
        now = self.clock()
        elapsed, self.last_event = now - self.last_event, now
        return elapsed

    def on_update(self, task: str, metrics: dict) -> None:
        self.timings[task].updates.append(self._elapsed_since_last_event())
        self.done_updates[task] += 1
        returns = np.asarray(metrics["mean_episode_return"], dtype=float)
        if np.isfinite(returns).any():
            self.training_return[task] = float(np.nanmean(returns))
            self._note(self.return_watch[task].add(self.training_return[task], self._steps(task)))
        self._refresh()

    def on_checkpoint(self, task: str, runner, evaluation: dict, showcase: dict | None) -> None:
        """``showcase`` None: the quick evaluation; else the full one (with its showcase)."""
        full = showcase is not None
        seconds = self._elapsed_since_last_event()
        if self.done_updates[task] > 0:
            self.timings[task].checkpoints[full].append(seconds)
        else:  # the step-0 checkpoint also carries start-up costs
            self.timings[task].initial_checkpoint = seconds
        success = np.asarray(evaluation["success_rate"], dtype=float)
        self.success[task] = float(np.mean(success))
        if full:
            self._note(
                checkpoint_note(
                    task, self._steps(task), success, np.asarray(evaluation.get("return_mean", np.nan), dtype=float)
                )
            )
            self._note(self.success_watch[task].add(self.success[task], self._steps(task)))
        self._refresh(force=full)

    def close(self) -> None:
        if self.bar is not None:
            self._refresh(force=True)
            self.bar.close()
            self.bar = None

    # internals --------------------------------------------------------------------------
    def _steps(self, task: str) -> int:
        return self.done_updates[task] * self.plans[task].batch_size

    def _note(self, message: str | None) -> None:
        if message is None:
            return
        if self.bar is None:
            print(message, file=self.file, flush=True)
        else:
            self.bar.write(message, file=self.file)

    def _refresh(self, force: bool = False) -> None:
        if self.bar is None:
            return
        now = self.clock()
        if not force and now - self.last_refresh < self.refresh_s:
            return
        self.last_refresh = now
        self.bar.n = int(round(BAR_RESOLUTION * min(1.0, self.fraction_done())))
        self.bar.set_description_str(self.line(), refresh=False)
        self.bar.refresh()


def checkpoint_note(task: str, steps: int, success: np.ndarray, returns: np.ndarray) -> str:
    """The line written at each full evaluation: mean success and return over seeds, and
    each seed's success when there are several."""
    text = f"{task} at {format_steps(steps)} steps: held-out success {float(np.mean(success)):.2f}"
    if success.size > 1:
        text += " (seeds " + " ".join(f"{v:.2f}" for v in success.ravel()) + ")"
    if np.isfinite(returns).any():
        text += f", return {float(np.nanmean(returns)):.3g}"
    return text
