"""The progress line of a protocol run, fed by the in-scan update and checkpoint callbacks.

What it shows, per task: environment steps per seed done out of the task's budget (tasks
have different budgets; seeds train side by side, so their steps are never summed), the
held-out success of the last checkpoint (mean over seeds) and the latest training return
once an episode has completed. Then the training time so far and an estimate of the time
left (``RunEstimate``), from what the program's scan iterations and each task's checkpoints
cost. The percentage is of that estimated time and never goes down: an estimate that grows
holds it where it was. A one-line note is written when a task's training return or held-out
success falls markedly (``FallWatch``).

In a terminal the line is redrawn in place and fitted to the terminal's width, dropping the
least important parts first (``fit_line``): the percentage and the time left always show.
Written to a file or pipe (a log, a notebook cell) it is a plain line every 30 s, and a note
is a line of its own.

The formatting functions are pure (numbers in, text out) so they can be tested alone; the
summary after a run (``purehr.reports.summary``) spells its durations with ``spelled_duration``.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from purehr.run.host.estimate import RunEstimate, TaskPlan  # noqa: F401 (TaskPlan: the run's plans are built from here)

REFRESH_S_TERMINAL = 1.0
REFRESH_S_LOG = 30.0
"""A line written to a file or pipe (a log, a notebook cell) is written rarely."""
BAR_CELLS = 12


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


@dataclass(frozen=True)
class TaskStatus:
    """One task's numbers on the line; a value that does not exist yet is None."""

    name: str
    done_steps: int
    total_steps: int
    success: float | None = None
    training_return: float | None = None


@dataclass(frozen=True)
class Detail:
    """Which parts of the line are shown (``DETAIL_LEVELS``)."""

    bar: bool = True
    returns: bool = True
    success_label: str = "held-out success"
    elapsed: bool = True
    budgets: bool = True
    success: bool = True
    tasks: bool = True


_SHORT = {"bar": False, "returns": False, "success_label": "success"}
DETAIL_LEVELS = (
    Detail(),
    Detail(bar=False),
    Detail(bar=False, returns=False),
    Detail(**_SHORT),
    Detail(**_SHORT, elapsed=False),
    Detail(**_SHORT, elapsed=False, budgets=False),
    Detail(**_SHORT, elapsed=False, budgets=False, success=False),
    Detail(**_SHORT, elapsed=False, budgets=False, success=False, tasks=False),
)
"""The line from the most detailed to the least: the bar (the percentage says the same), the
training returns, the long label, the elapsed time, the budgets (``swing 3.7M/5M`` becomes
``swing 3.7M``), the held-out success, then the tasks go, in that order; the percentage and
the time left stay."""


def format_task(task: TaskStatus, detail: Detail = DETAIL_LEVELS[0]) -> str:
    """One task's part of the line: ``swing 3.7M/5M, held-out success 0.85, return 12.3``.
    A value that does not exist yet (no checkpoint, no completed episode) is left out."""
    done = task.done_steps >= task.total_steps
    budget = f"{format_steps(task.total_steps)}"
    if done:
        text = f"{task.name} done ({budget})" if detail.budgets else f"{task.name} done"
    else:
        text = f"{task.name} {format_steps(task.done_steps)}" + (f"/{budget}" if detail.budgets else "")
    if detail.success and task.success is not None and math.isfinite(task.success):
        text += f", {detail.success_label} {task.success:.2f}"
    if detail.returns and not done and task.training_return is not None and math.isfinite(task.training_return):
        text += f", return {task.training_return:.3g}"
    return text


def format_timing(elapsed_s: float, remaining_s: float | None, settled: bool = True, elapsed: bool = True) -> str:
    """``1:05 elapsed, about 8:05 left``; "up to" while the estimate is an upper bound
    (``RunEstimate.remaining``). Without an estimate the elapsed time always shows."""
    parts = [f"{format_duration(elapsed_s)} elapsed"] if elapsed or remaining_s is None else []
    if remaining_s is not None:
        parts.append(f"{'about' if settled else 'up to'} {format_duration(remaining_s)} left")
    return ", ".join(parts)


def progress_bar(fraction: float, unicode: bool = True) -> str:
    """``|█████▌      |``: BAR_CELLS cells, eighths of a cell in Unicode, ``#`` otherwise."""
    filled = min(1.0, max(0.0, fraction)) * BAR_CELLS
    if not unicode:
        return "|" + "#" * int(filled) + " " * (BAR_CELLS - int(filled)) + "|"
    whole, eighths = int(filled), int((filled - int(filled)) * 8)
    partial = " ▏▎▍▌▋▊▉"[eighths] if whole < BAR_CELLS else ""
    return "|" + ("█" * whole + partial).ljust(BAR_CELLS) + "|"


def fit_line(
    fraction: float,
    tasks: list[TaskStatus],
    elapsed_s: float,
    remaining_s: float | None,
    settled: bool = True,
    width: int | None = None,
    bar: str | None = None,
) -> str:
    """The line at the most detail that fits ``width`` columns (None: no limit): `` 42%|bar|
    tasks | timing``. ``bar`` None leaves the bar out. Cut at ``width`` only when even the
    percentage and the time left do not fit."""
    percent = f"{int(min(1.0, max(0.0, fraction)) * 100):3d}%"
    text = percent
    for detail in DETAIL_LEVELS:
        if bar is None and detail.bar:
            continue
        parts = [format_task(task, detail) for task in tasks] if detail.tasks else []
        parts.append(format_timing(elapsed_s, remaining_s, settled, detail.elapsed))
        text = (percent + bar + " " if detail.bar else percent + " | ") + " | ".join(parts)
        if width is None or len(text) <= width:
            return text
    return text[:width]


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


# ----------------------------------------------------------------------------- the line on screen


def terminal_columns(file: TextIO) -> int:
    """The width of the terminal ``file`` writes to (``COLUMNS`` first, as
    ``shutil.get_terminal_size`` reads it; 80 when it cannot be told)."""
    if not os.environ.get("COLUMNS", "").strip().isdigit():
        try:
            return os.get_terminal_size(file.fileno()).columns
        except (AttributeError, OSError, ValueError):
            pass
    return shutil.get_terminal_size((80, 24)).columns


def tell(text: str, file: TextIO) -> None:
    """Writes and flushes ``text`` for the user. A reader gone away (``... | tee log``, tee ended by
    the same Ctrl-C) points ``file`` at the null device instead of raising: a message nobody can
    read must not turn a run's interruption into a failure, nor fail every later write."""
    try:
        file.write(text)
        file.flush()
    except (BrokenPipeError, ValueError):  # ValueError: the file is closed
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, file.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
            pass


class LineWriter:
    """Writes the line and the notes. In a terminal the line is redrawn in place (a carriage
    return, then blanks over what is left of the previous one) within the width less one
    column (a full line would wrap); a note clears it, takes a line of its own and the line is
    drawn again below. Elsewhere every line and note is a plain line, written once."""

    def __init__(self, file: TextIO, terminal: bool):
        self.file, self.terminal = file, terminal
        self.last_line = ""
        self.drawn = 0  # characters of the line on screen (terminal)

    def width(self) -> int | None:
        return max(10, terminal_columns(self.file) - 1) if self.terminal else None

    def show(self, line: str) -> None:
        self.last_line = line
        if self.terminal:
            tell("\r" + line + " " * max(0, self.drawn - len(line)), self.file)
            self.drawn = len(line)
        else:
            tell(line + "\n", self.file)

    def write(self, message: str, file: TextIO | None = None) -> None:
        """A note (also the recorder's warnings): its own line, never between copies of the line."""
        if self.terminal and self.drawn:
            tell("\r" + " " * self.drawn + "\r", self.file)
            self.drawn = 0
        tell(message + "\n", file or self.file)
        if self.terminal and self.last_line:
            self.show(self.last_line)

    def close(self) -> None:
        if self.terminal and self.drawn:
            tell("\n", self.file)
            self.drawn = 0


# ----------------------------------------------------------------------------- the progress object


class Progress:
    """The progress side of ``RunRecorder``: ``start`` once compilation has ended, the
    ``purehr.engine.loop.HostHooks`` calls (``on_update``, ``on_checkpoint``) forwarded by the
    recorder, ``close`` at the end. ``bar`` is the ``LineWriter`` while the line is shown
    (the recorder writes its warnings through ``bar.write``)."""

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
        self.checkpointed = dict(self.done_updates)  # each task's update count at its latest checkpoint
        self.file = file if file is not None else sys.stderr
        self.clock = clock
        self.success: dict[str, float | None] = {task: None for task in plans}
        self.training_return: dict[str, float | None] = {task: None for task in plans}
        self.estimate = RunEstimate(plans, self.done_updates)
        self.return_watch = {task: FallWatch(f"{task} training return") for task in plans}
        self.success_watch = {
            task: FallWatch(f"{task} held-out success", window=1, fraction=0.0, min_drop=0.25) for task in plans
        }
        self.terminal = bool(getattr(self.file, "isatty", lambda: False)())
        self.refresh_s = REFRESH_S_TERMINAL if self.terminal else REFRESH_S_LOG
        self.started = self.last_refresh = None
        self.shown_fraction = 0.0
        self.bar: LineWriter | None = None

    # the text ---------------------------------------------------------------------------
    def remaining_s(self) -> float | None:
        return self.estimate.remaining(self.checkpointed)[0]

    def fraction_done(self, remaining: float | None = None) -> float:
        """Of the estimated training time when there is an estimate (``remaining``: the time left,
        if already computed), else of the updates."""
        remaining = self.remaining_s() if remaining is None else remaining
        if remaining is not None and self.started is not None:
            elapsed = self.clock() - self.started
            return elapsed / (elapsed + remaining) if elapsed + remaining > 0 else 1.0
        done = sum(min(self.done_updates[t], p.num_updates) for t, p in self.plans.items())
        return done / max(1, sum(p.num_updates for p in self.plans.values()))

    def line(self, width: int | None = None) -> str:
        """The line as shown now; the percentage never below one shown before."""
        tasks = [
            TaskStatus(task, self._steps(task), plan.total_steps, self.success[task], self.training_return[task])
            for task, plan in self.plans.items()
        ]
        remaining, settled = self.estimate.remaining(self.checkpointed)
        finished = all(self._finished(task) for task in self.plans)
        if finished:
            remaining = None  # the last line says how long it took
        self.shown_fraction = max(self.shown_fraction, 1.0 if finished else min(0.99, self.fraction_done(remaining)))
        elapsed = 0.0 if self.started is None else self.clock() - self.started
        unicode = "utf" in str(getattr(self.file, "encoding", "") or "").lower()
        bar = progress_bar(self.shown_fraction, unicode) if self.terminal else None
        return fit_line(self.shown_fraction, tasks, elapsed, remaining, settled, width, bar)

    def seed_from_rows(self, update_rows: dict, checkpoint_rows: dict) -> None:
        """A resumed run's watches go through the rows it kept (``{task: {seed: [row]}}``), silently:
        their reference levels are those the uninterrupted run had, so the notes after the resume
        are its notes, not falls measured from a level restarted at the resume."""
        for task in self.plans:
            batch_size = self.plans[task].batch_size
            for update, values in _by_update(update_rows.get(task, {}), "mean_episode_return"):
                self.return_watch[task].add(
                    float(np.nanmean(values)) if np.isfinite(values).any() else math.nan, update * batch_size
                )
            full = {
                seed: [row for row in rows if row.get("showcase_path")]  # a full evaluation writes its showcase
                for seed, rows in checkpoint_rows.get(task, {}).items()
            }
            for update, values in _by_update(full, "eval_success_rate"):
                self.success_watch[task].add(float(np.mean(values)), update * batch_size)

    # the callbacks ----------------------------------------------------------------------
    def start(self) -> None:
        """The line appears once compilation has ended, so its times are training times."""
        self.started = self.clock()
        self.estimate.start(self.started)
        self.bar = LineWriter(self.file, self.terminal)
        self._refresh(force=True)

    def on_update(self, task: str, metrics: dict) -> None:
        self.estimate.on_update(task, self.clock())
        self.done_updates[task] += 1
        returns = np.asarray(metrics["mean_episode_return"], dtype=float)
        if np.isfinite(returns).any():
            self.training_return[task] = float(np.nanmean(returns))
            self._note(self.return_watch[task].add(self.training_return[task], self._steps(task)))
        self._refresh()

    def on_checkpoint(self, task: str, runner, evaluation: dict | None, showcase: dict | None) -> None:
        """``showcase`` None: the quick evaluation; else the full one (with its showcase).
        ``evaluation`` None: a quick checkpoint evaluated later with its group."""
        full = showcase is not None
        self.estimate.on_checkpoint(task, full)
        self.checkpointed[task] = self.done_updates[task]
        if evaluation is None:
            return
        success = np.asarray(evaluation["success_rate"], dtype=float)
        self.success[task] = float(np.mean(success))
        if full:
            self._note(
                checkpoint_note(
                    task, self._steps(task), success, np.asarray(evaluation.get("return_mean", np.nan), dtype=float)
                )
            )
            self._note(self.success_watch[task].add(self.success[task], self._steps(task)))
        self._refresh(force=full and self.terminal)

    def close(self) -> None:
        if self.bar is not None:
            self._refresh(force=True)
            self.bar.close()
            self.bar = None

    # internals --------------------------------------------------------------------------
    def _finished(self, task: str) -> bool:
        """Every update done and, when the plan saves after the last one, that checkpoint too."""
        plan = self.plans[task]
        last_saved = plan.num_updates not in plan.full_checkpoints + plan.quick_checkpoints
        return self.done_updates[task] >= plan.num_updates and (
            last_saved or self.checkpointed[task] >= plan.num_updates
        )

    def _steps(self, task: str) -> int:
        return self.done_updates[task] * self.plans[task].batch_size

    def _note(self, message: str | None) -> None:
        if message is None:
            return
        if self.bar is None:
            tell(message + "\n", self.file)
        else:
            self.bar.write(message)

    def _refresh(self, force: bool = False) -> None:
        if self.bar is None:
            return
        now = self.clock()
        if not force and now - self.last_refresh < self.refresh_s:
            return
        self.last_refresh = now
        self.bar.show(self.line(self.bar.width()))


def _by_update(seed_rows: dict, column: str) -> list[tuple[int, np.ndarray]]:
    """``column`` of every seed's rows, grouped by update in order (what one callback carried)."""
    grouped: dict[int, list[float]] = {}
    for rows in seed_rows.values():
        for row in rows:
            grouped.setdefault(int(row["update"]), []).append(float(row.get(column, math.nan)))
    return [(update, np.asarray(values, dtype=float)) for update, values in sorted(grouped.items())]


def checkpoint_note(task: str, steps: int, success: np.ndarray, returns: np.ndarray) -> str:
    """The line written at each full evaluation: mean success and return over seeds, and
    each seed's success when there are several. An environment without success (NaN,
    docs/environments.md) is reported by its return, each seed's when there are several."""
    text = f"{task} at {format_steps(steps)} steps: held-out"
    if not np.isfinite(success).any():
        if not np.isfinite(returns).any():
            return f"{text} return -"
        text += f" return {float(np.nanmean(returns)):.3g}"
        return text + (" (seeds " + " ".join(f"{v:.3g}" for v in returns.ravel()) + ")" if returns.size > 1 else "")
    text += f" success {float(np.mean(success)):.2f}"
    if success.size > 1:
        text += " (seeds " + " ".join(f"{v:.2f}" for v in success.ravel()) + ")"
    if np.isfinite(returns).any():
        text += f", return {float(np.nanmean(returns)):.3g}"
    return text
