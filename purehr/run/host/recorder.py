"""The host side of the compiled run: what the in-scan callbacks hand over is written here
(update logs, checkpoints, showcase episodes, progress)."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from purehr.run.host.progress import tell
from purehr.run.host.writer import BackgroundWriter
from purehr.run.store.checkpoints import SeedCheckpoints, tree_digest
from purehr.run.store.columns import PBT_PREFIX, checkpoint_columns, update_columns
from purehr.run.store.files import write_csv, write_npz
from purehr.run.store.record import population_columns
from purehr.run.store.run_dir import RunDirectory, environment_advice, nonfinite_before


def _scalar(value) -> float | int:
    value = np.asarray(value).item()
    return value if isinstance(value, int) else float(value)


def seed_slice(tree: Any, index: int) -> Any:
    return jax.tree.map(lambda x: np.asarray(x)[index], tree)


# the libraries that log a failed checkpoint save from their own threads, a traceback each
# (Orbax through absl, the io_callback that called the recorder)
LIBRARY_LOGGERS = ("absl", "jax._src.callback")


class _OneLine(logging.Filter):
    """A library's error record as its first line, without the traceback: when a save fails
    (a full disk) the run's own error names the cause once, not in dozens of tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            first = record.getMessage().splitlines()[0] if record.getMessage() else ""
            record.msg, record.args = (first[:297] + "...") if len(first) > 300 else first, ()
            record.exc_info = record.exc_text = record.stack_info = None
        return True


@contextlib.contextmanager
def library_errors_in_one_line() -> Iterator[None]:
    """While the program trains: Orbax's and the callback's error records shortened (``_OneLine``)."""
    one_line = _OneLine()
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    for logger in loggers:
        logger.addFilter(one_line)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(one_line)


@dataclass(frozen=True)
class HeldCheckpoint:
    """A quick checkpoint of a grouped run, held until its group's full checkpoint."""

    runner: Any  # every seed's state, NumPy
    params: Any  # every seed's network parameters, NumPy
    elapsed_s: float  # the run's time when it was reached (its row's)
    logged: dict[int, int]  # seed -> update rows logged by then


class RunRecorder:
    """Implements ``purehr.engine.loop.HostHooks``. CSV rows live in memory and are rewritten
    atomically at every checkpoint and at the end, so the files on disk always describe a
    prefix of the run that a resume can continue from. A checkpoint's files are written by a
    ``BackgroundWriter`` while the program trains on (purehr/run/host/writer.py says why)."""

    def __init__(
        self,
        run_dir: RunDirectory,
        setups,
        seeds: list[int],
        *,
        elapsed_offset: float = 0.0,
        update_rows=None,
        checkpoint_rows=None,
        progress=None,
        kept=None,
        tracking=None,
    ):
        self.run_dir = run_dir
        self.setups = {setup.name: setup for setup in setups}
        self.seeds = seeds
        self.elapsed_offset = elapsed_offset
        self.started = time.perf_counter()
        self.update_rows = update_rows or {name: {seed: [] for seed in seeds} for name in self.setups}
        self.checkpoint_rows = checkpoint_rows or {name: {seed: [] for seed in seeds} for name in self.setups}
        self.checkpoints = {
            name: {seed: SeedCheckpoints(run_dir.checkpoint_dir(name, seed)) for seed in seeds} for name in self.setups
        }
        self.progress = progress
        self.tracking = tracking  # purehr.tracking.Tracking (--log), or None
        self.last_update_time = {name: self.started for name in self.setups}
        self.seconds_in_checkpoint_callbacks = 0.0
        self.seconds_in_evaluation = 0.0
        self.writer = BackgroundWriter()
        self._writer_error_raised = False
        self.checkpoints_written = 0
        self.held: dict[str, list[HeldCheckpoint]] = {}  # task -> quick checkpoints awaiting their group
        # task -> seed -> {steps: digest}: checkpoints a resume kept that the program reaches
        # again (a task starting over saves its initial state at update 0): verified, not rewritten
        self.kept = kept or {}
        self.failure: str | None = None  # what stopped the run, said once
        self.stop_requested = False  # Ctrl-C: the program stops at its next update
        self.abandoned = False  # a second Ctrl-C: nothing more is written
        # task -> seed -> every first diverged update (a PBT member may diverge again once a PBT
        # step replaced it), from the rows a resume kept and those logged since
        self.diverged: dict[str, dict[int, list[int]]] = {}
        for name, seeds_rows in self.update_rows.items():
            for seed, rows in seeds_rows.items():
                for update in sorted({row.get("diverged_at_update", 0) for row in rows} - {0}):
                    self.diverged.setdefault(name, {}).setdefault(seed, []).append(update)

    def start(self) -> None:
        """Called when the compiled program starts running (compilation is not training time)."""
        self.started = time.perf_counter()
        self.last_update_time = {name: self.started for name in self.setups}
        if self.progress is not None:
            self.progress.start()

    def elapsed(self) -> float:
        return self.elapsed_offset + time.perf_counter() - self.started

    def request_stop(self) -> None:
        """Ctrl-C: every task stops at its next update (``on_update`` returns False), with the
        state it reached; a resume continues from the checkpoints saved so far."""
        self.stop_requested = True
        self.say("Ctrl-C: stopping at the next update (Ctrl-C again exits at once, without waiting)")

    def abandon(self) -> None:
        """A second Ctrl-C: the program, still running, writes nothing more and stops."""
        self.stop_requested = self.abandoned = self.writer.abandoned = True

    def _raise_writer_error(self) -> None:
        """A checkpoint the writer failed to save stops the program from the next callback."""
        if self.writer.failed is not None and not self._writer_error_raised:
            self._writer_error_raised = True
            raise self.writer.failed

    def resume_points(self) -> dict[str, int]:
        """task -> env steps of the newest checkpoint listed for every seed (0: none yet)."""
        return {
            name: min(max((row["actual_steps"] for row in rows), default=0) for rows in seeds_rows.values())
            for name, seeds_rows in self.checkpoint_rows.items()
        }

    def steps_reached(self) -> dict[str, int]:
        """task -> env steps of the last update logged (the resumed-from rows included)."""
        return {
            name: min(rows[-1]["env_steps"] if rows else 0 for rows in seeds_rows.values())
            for name, seeds_rows in self.update_rows.items()
        }

    def say(self, message: str) -> None:
        """A line for the user, above the progress bar when there is one."""
        if self.progress is not None and self.progress.bar is not None:
            self.progress.bar.write(message, file=sys.stderr)
        else:
            tell(message + "\n", sys.stderr)  # a closed pipe (Ctrl-C ended `| tee`) is no failure

    # --- callbacks --------------------------------------------------------------------------
    def on_update(self, task: str, metrics: dict) -> bool:
        """Logs the update; False (stop) once Ctrl-C asked the program to stop."""
        self._raise_writer_error()
        if self.failure is not None or self.abandoned:
            return not self.stop_requested
        now = self.elapsed()
        batch_size = self.setups[task].config.batch_size
        for index, seed in enumerate(self.seeds):
            row = {name: _scalar(value[index]) for name, value in metrics.items()}
            row["env_steps"] = row["update"] * batch_size  # Python ints: exact at any budget
            row["elapsed_s"] = now
            self.update_rows[task][seed].append(row)
            if self.tracking is not None:
                self.tracking.update(task, seed, row)
            self._note_divergence(task, seed, row.get("diverged_at_update", 0))
        self.last_update_time[task] = time.perf_counter()
        if self.progress is not None:
            self.progress.on_update(task, metrics)
        return not self.stop_requested

    def _note_divergence(self, task: str, seed: int, update: int) -> None:
        """Says once per divergence, as it happens, that a seed diverged (the run goes on for
        the others). A PBT member frozen there is given another's weights at a later step, and
        its every divergence is said: each one ends the run "diverged" (docs/pbt.md)."""
        noted = self.diverged.setdefault(task, {}).setdefault(seed, [])
        if update <= 0 or update in noted:
            return
        noted.append(update)
        population = self.setups[task].population is not None
        advice = environment_advice(nonfinite_before(self.update_rows[task][seed], update))
        self.say(
            f"warning: {task} seed {seed} diverged at update {update} "
            f"({update * self.setups[task].config.batch_size:,} env steps): a loss or parameter "
            f"became NaN or infinite; its parameters stay frozen at update {update - 1}"
            + (" until a PBT step gives it another member's weights; the run will end diverged" if population else "")
            + (f"; {advice}" if advice else "")
        )

    def _note_replacements(self, task: str, evaluation: dict, update: int) -> None:
        """Says when a PBT step gave a diverged member another member's weights."""
        diverged_at, parents = evaluation.get("pbt_diverged_at_update"), evaluation.get("pbt_parent")
        if diverged_at is None or parents is None:
            return
        for index, seed in enumerate(self.seeds):
            parent = self.seeds[int(parents[index])]
            if diverged_at[index] > 0 and parent != seed:
                self.say(
                    f"PBT: {task} seed {seed}, frozen since it diverged at update {int(diverged_at[index])}, "
                    f"continues from seed {parent}'s weights after update {update}"
                )

    def on_checkpoint(self, task: str, runner, evaluation: dict, showcase: dict | None) -> None:
        """Hands every seed's state and row to the writer and returns. ``showcase`` is None at
        checkpoints with a quick evaluation (no episode recorded; the row's ``showcase_path``
        is empty). A save that failed (kept in ``failure``, so the caller can say what went
        wrong) is raised here or from the next update's callback, which stops the run."""
        self._raise_writer_error()
        if self.failure is not None or self.abandoned:
            return
        entered = time.perf_counter()
        self.seconds_in_evaluation += entered - self.last_update_time[task]
        # copies: the callback's arrays may be the runtime's buffers, reused once it returns
        runner, evaluation, showcase = jax.tree.map(np.array, (runner, evaluation, showcase))
        logged = {seed: len(self.update_rows[task][seed]) for seed in self.seeds}
        self._record(task, runner, evaluation, showcase, self.elapsed(), logged)
        if self.progress is not None:
            self.progress.on_checkpoint(task, runner, evaluation, showcase)
        self.seconds_in_checkpoint_callbacks += time.perf_counter() - entered
        self.last_update_time[task] = time.perf_counter()

    def _record(self, task: str, runner, evaluation: dict, showcase: dict | None, now: float, logged: dict) -> None:
        """One checkpoint's rows to the dashboards and its saves, rows and CSVs to the writer."""
        heads = [self._row_head(task, runner, evaluation, index, now) for index in range(len(self.seeds))]
        self._note_replacements(task, evaluation, heads[0]["update"])
        if self.tracking is not None:  # here, in step order with the update rows: W&B takes no step back
            for seed, head in zip(self.seeds, heads):
                if not self._listed(task, seed, head["actual_steps"]):
                    self.tracking.checkpoint(task, seed, head)
        self.writer.submit(lambda: self._write_checkpoint(task, runner, heads, showcase, logged))

    # --- grouped quick evaluations (ProtocolSettings.group_quick_evaluations) -------------
    def on_deferred_checkpoint(self, task: str, runner, params) -> None:
        """Holds a quick checkpoint until its group is evaluated: nothing is written for it
        before its evaluation, so the files never list a checkpoint without one (a kill or
        Ctrl-C before the group's full checkpoint loses the held ones; a resume goes on from the
        last checkpoint written)."""
        self._raise_writer_error()
        if self.failure is not None or self.abandoned:
            return
        runner, params = jax.tree.map(np.array, (runner, params))
        logged = {seed: len(self.update_rows[task][seed]) for seed in self.seeds}
        self.held.setdefault(task, []).append(HeldCheckpoint(runner, params, self.elapsed(), logged))
        if self.progress is not None:
            self.progress.on_checkpoint(task, runner, None, None)
        self.last_update_time[task] = time.perf_counter()

    def pending_params(self, task: str) -> list:
        """The held checkpoints' network parameters, oldest first (none once the run failed)."""
        return [] if self.failure is not None or self.abandoned else [held.params for held in self.held.get(task, [])]

    def on_group_evaluations(self, task: str, evaluations: dict) -> None:
        """Writes each held checkpoint, in order, with its evaluation (slot i of ``evaluations``)."""
        held, self.held[task] = self.held.get(task, []), []
        if self.failure is not None or self.abandoned:
            return
        entered = time.perf_counter()
        evaluations = jax.tree.map(np.array, evaluations)
        for slot, checkpoint in enumerate(held):
            evaluation = {name: values[slot] for name, values in evaluations.items()}
            self._record(task, checkpoint.runner, evaluation, None, checkpoint.elapsed_s, checkpoint.logged)
        self.seconds_in_checkpoint_callbacks += time.perf_counter() - entered

    def unsaved_checkpoints(self) -> dict[str, int]:
        """task -> quick checkpoints held and never written (the run stopped before their group's end)."""
        return {task: len(held) for task, held in self.held.items() if held}

    def _row_head(self, task: str, runner, evaluation: dict, index: int, now: float) -> dict:
        """The checkpoints.csv row of seed ``index`` up to its files: steps, time, held-out metrics."""
        setup = self.setups[task]
        config, interval = setup.config, setup.protocol.checkpoint_interval
        update = int(runner.update_index[index])
        steps = update * config.batch_size
        target = config.total_timesteps if update == setup.algorithm.num_updates else steps // interval * interval
        row = {"target_steps": target, "actual_steps": steps, "update": update, "elapsed_s": now}
        return row | self._evaluation_columns(evaluation, index)

    def _listed(self, task: str, seed: int, steps: int) -> bool:
        """A checkpoint a resume kept whose row ``checkpoints.csv`` already lists."""
        return steps in self.kept.get(task, {}).get(seed, {}) and any(
            row["actual_steps"] == steps for row in self.checkpoint_rows[task][seed]
        )

    def _write_checkpoint(self, task: str, runner, heads: list[dict], showcase: dict | None, logged) -> None:
        """In the writer's thread: saves, rows and CSVs (the update rows logged by then)."""
        try:
            self._checkpoint(task, runner, heads, showcase)
            self.flush(task, logged)
            self.checkpoints_written += 1
        except Exception as error:
            self.failure = f"saving a {task} checkpoint failed: {type(error).__name__}: {error}"
            raise

    def _checkpoint(self, task: str, runner, heads: list[dict], showcase: dict | None) -> None:
        for index, (seed, head) in enumerate(zip(self.seeds, heads)):
            steps = head["actual_steps"]
            state = seed_slice(runner, index)
            kept = self.kept.get(task, {}).get(seed, {})
            if steps in kept:
                if tree_digest(state) != kept[steps]:
                    raise RuntimeError(
                        f"{task} seed {seed}: the state at {steps} steps differs from the kept checkpoint "
                        f"{self.checkpoints[task][seed].path(steps)} (digest {kept[steps][:12]}...); "
                        "expected the same initial state for the same seed"
                    )
                if self._listed(task, seed, steps):
                    continue  # its row is already in checkpoint_rows
                digest = kept[steps]  # intact on disk but never listed: only its row is written
            else:
                digest = self.checkpoints[task][seed].save(steps, state, pending=len(self.seeds) - index)
            showcase_path = None
            if showcase is not None:
                showcase_path = self.run_dir.showcase_path(task, seed, steps)
                write_npz(showcase_path, {name: value[index] for name, value in showcase.items()})
            self.checkpoint_rows[task][seed].append(
                head
                | dict(
                    checkpoint_path=str(self.checkpoints[task][seed].path(steps).relative_to(self.run_dir.root)),
                    showcase_path="" if showcase_path is None else str(showcase_path.relative_to(self.run_dir.root)),
                    state_digest=digest,
                )
            )
        if self.tracking is not None:  # what a resume keeps is never newer than what is logged
            self.tracking.sync()

    def _evaluation_columns(self, evaluation: dict, index: int) -> dict:
        """A seed's held-out metrics as ``eval_<name>``; a population's record (``pbt_<name>``)
        as it is, its parent as the parent's seed."""
        columns = {}
        for name, value in evaluation.items():
            if name == "pbt_parent":
                columns[name] = self.seeds[int(value[index])]
            elif name.startswith(PBT_PREFIX):
                columns[name] = _scalar(value[index])
            else:
                columns[f"eval_{name}"] = _scalar(value[index])
        return columns

    # --- files ------------------------------------------------------------------------------
    def flush(self, task: str | None = None, logged: dict[int, int] | None = None) -> None:
        """Rewrites the CSVs of ``task`` (default: every task); ``logged``: seed -> how many of
        its update rows to write (a checkpoint's, which later updates may have joined since)."""
        for name in [task] if task else list(self.setups):
            for seed in self.seeds:
                updates = self.update_rows[name][seed]
                if logged is not None:
                    updates = updates[: logged[seed]]
                if updates:
                    write_csv(self.run_dir.updates_csv(name, seed), update_columns(updates[0]), updates)
                checkpoints = self.checkpoint_rows[name][seed]
                if checkpoints:
                    evaluation_names = [c[len("eval_") :] for c in checkpoints[0] if c.startswith("eval_")]
                    columns = checkpoint_columns(evaluation_names, population_columns(checkpoints))
                    write_csv(self.run_dir.checkpoints_csv(name, seed), columns, checkpoints)

    def finish(self) -> None:
        """Waits for the writer and the asynchronous saves and writes the CSVs; every manager
        is closed even when one save failed, and the first failure is raised afterwards."""
        self.writer.close()
        first_error = None if self._writer_error_raised else self.writer.failed
        for task, managers in self.checkpoints.items():
            for seed, manager in managers.items():
                try:
                    manager.finish()
                except Exception as error:
                    if first_error is None:
                        first_error = error
                        if self.failure is None:
                            self.failure = (
                                f"completing a {task} seed {seed} checkpoint failed: {type(error).__name__}: {error}"
                            )
        self.flush()
        if self.progress is not None:
            self.progress.close()
        if first_error is not None:
            raise first_error
