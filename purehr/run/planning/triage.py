"""Checkpoint triage: which checkpoints on disk a resume may continue from, and which a run
that trained to its end must list. A kill leaves a run directory in a state the index files
(checkpoints.csv, updates.csv) and the checkpoint folders describe together; a resume
continues from the newest point every seed has intact, sets aside (never deletes) whatever
lies beyond, and refuses the damage it cannot judge alone."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from purehr.run.compiled.task_setup import recorded_setup
from purehr.run.compiled.train_all import TaskSetup
from purehr.run.host.recorder import seed_slice
from purehr.run.store.checkpoints import CorruptCheckpointError, SeedCheckpoints, shape_mismatches, tree_digest
from purehr.run.store.files import RunDirectoryError
from purehr.run.store.run_dir import (
    RunDirectory,
    completed_checkpoint_steps,
    is_orbax_entry,
    read_checkpoint_rows,
    read_update_rows,
)


@dataclass(frozen=True)
class TaskResume:
    """Where one task continues: the same point for every seed, so the rows, the checkpoints
    on disk and the states the program goes on from all describe one prefix of the run."""

    runner: Any | None  # stacked over seeds; None: the task starts over
    steps: int  # env steps of the resume point (0: starting over)
    elapsed_s: float
    kept: dict[int, dict[int, str]]  # seed -> {steps: digest} kept that the program saves again
    quarantined: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"} moved aside


def check_indexes(run_dir: RunDirectory, manifest: dict, tasks: list[str], seeds: list[int]) -> None:
    """Refuses a resume whose index files cannot be read (a row cut short, a cell that is not
    a number), were lost while the checkpoints they describe are still there, or whose
    manifest disagrees with its checkpoints: the resume would have to set that progress aside.
    Only the files on disk are read (nothing moves): a kill leaves the index at most one
    checkpoint behind and never damages a row, so this is damage, and the user decides. An
    index emptied or cut to its header while checkpoints beyond step 0 are there is lost too."""
    for task in tasks:
        for seed in seeds:
            saved = [steps for steps in completed_checkpoint_steps(run_dir.checkpoint_dir(task, seed)) if steps > 0]
            index, updates = run_dir.checkpoints_csv(task, seed), run_dir.updates_csv(task, seed)
            try:
                listed = read_checkpoint_rows(index)
                read_update_rows(updates)
            except RunDirectoryError as error:
                raise RunDirectoryError(
                    f"--resume: {error}. Nothing was changed; put the file back from a copy of the run "
                    "(a resume cannot tell which checkpoints the damaged rows describe)"
                ) from None
            beyond_zero = [r["actual_steps"] for r in listed if r["actual_steps"] > 0]
            missing, lost = None, "is missing from"
            if saved and not listed:  # deleted, emptied or cut to its header: the index is lost
                missing = index
                if index.exists():
                    lost = "lists no checkpoint in" if index.read_text().strip() else "is empty in"
            elif saved and beyond_zero and not updates.exists():
                missing = updates
            if missing is not None:
                relative = missing.relative_to(run_dir.root)
                raise FileNotFoundError(
                    f"--resume: {relative} {lost} {run_dir.root}, while "
                    f"{run_dir.checkpoint_dir(task, seed).relative_to(run_dir.root)}/ holds checkpoints "
                    f"{', '.join(map(str, saved))}: without it they cannot be verified, and resuming would set "
                    f"that progress aside. Nothing was changed. Put {relative} back (from a copy of the run), "
                    f"or, to start {task} over, move {run_dir.checkpoint_dir(task, seed).relative_to(run_dir.root)} "
                    "out of the run directory and --resume again"
                )
    check_checkpoints_match_manifest(run_dir, manifest, tasks, seeds)


def check_checkpoints_match_manifest(run_dir: RunDirectory, manifest: dict, tasks: list[str], seeds: list[int]) -> None:
    """Refuses a resume whose manifest builds other shapes than every seed's newest checkpoint
    holds (an edited ``actor_hidden``): each restore would fail, and the resume would set every
    intact checkpoint aside and train the task from step 0. Read from the checkpoints'
    metadata before anything moves; a single odd checkpoint is left to the triage."""
    for task in tasks:
        newest = {seed: completed_checkpoint_steps(run_dir.checkpoint_dir(task, seed)) for seed in seeds}
        newest = {seed: run_dir.checkpoint_dir(task, seed) / str(steps[-1]) for seed, steps in newest.items() if steps}
        if not newest:
            continue
        abstract = recorded_setup(manifest, task).abstract_state()
        found = {seed: shape_mismatches(path, abstract) for seed, path in newest.items()}
        found = {seed: problems for seed, problems in found.items() if problems is not None}
        if not found or not all(found.values()):
            continue
        seed, problems = next(iter(found.items()))
        config = manifest["configs"][task]
        fields = [f for f in ("actor_hidden", "critic_hidden") if any(f.split("_")[0] in p for p in problems)]
        suspects = ", ".join(f"configs.{task}.{f} is {config.get(f)!r}" for f in fields) or (
            "a network width, num_envs or an environment setting"
        )
        raise RunDirectoryError(
            f"--resume: {run_dir.manifest_path} disagrees with the checkpoints of {task}: "
            f"{newest[seed].relative_to(run_dir.root)}: {'; '.join(problems[:3])}"
            f"{f' (and {len(problems) - 3} more)' if len(problems) > 3 else ''}. Was manifest.json edited "
            f"({suspects})? Resuming would set every checkpoint of {task} aside and train it from step 0. "
            "Nothing was changed: put the recorded settings back, or start a new run with the new settings "
            "(another --run-dir)"
        )


def restore_task(
    run_dir: RunDirectory, setup: TaskSetup, seeds: list[int], recorder_rows: dict, initial: Any = None
) -> TaskResume:
    """The newest checkpoint every seed has intact (on disk, listed in checkpoints.csv with a
    matching digest, its updates logged) is the task's resume point. Everything newer, listed
    or not, half-written saves and damaged ones are moved to ``quarantine/`` with a note (never
    deleted); the rows in ``recorder_rows`` are trimmed to what stays on disk. With no such
    checkpoint beyond step 0 the task starts over from ``initial`` (the stacked initial states,
    or a function that computes them: they are needed only then, and computing them compiles
    ``init``), keeping each seed's step-0 checkpoint when it holds exactly that state."""
    name = setup.name
    folders = [run_dir.checkpoint_dir(name, seed) for seed in seeds]
    had_checkpoints = any(folder.is_dir() and any(map(is_orbax_entry, os.listdir(folder))) for folder in folders)
    managers = {seed: SeedCheckpoints(run_dir.checkpoint_dir(name, seed)) for seed in seeds}
    try:
        # before anything reads the folder: saves the killed process left half-written
        quarantined = _quarantine_unfinished(run_dir, managers, name)
        rows = {seed: _unique_rows(read_checkpoint_rows(run_dir.checkpoints_csv(name, seed))) for seed in seeds}
        updates = {seed: read_update_rows(run_dir.updates_csv(name, seed)) for seed in seeds}
        _say_missing(run_dir, managers, name, rows)
        abstract = setup.abstract_state()
        chosen, states = _resume_point(managers, rows, updates, abstract)
        kept = {seed: {} for seed in seeds}
        if chosen == 0:
            _say_starting_over(name, seeds, had_checkpoints or any(rows.values()))
            kept = _kept_initial_states(managers, rows, abstract, initial() if callable(initial) else initial)
        for seed in seeds:
            quarantined += _set_aside_beyond(run_dir, managers[seed], name, seed, seeds, chosen, rows[seed], kept[seed])
            recorder_rows["checkpoints"][seed], recorder_rows["updates"][seed] = _rows_kept(
                managers[seed], chosen, rows[seed], updates[seed]
            )
    finally:
        for manager in managers.values():
            manager.finish()
    if chosen == 0:
        return TaskResume(None, 0, 0.0, kept, quarantined)
    runner = jax.tree.map(lambda *leaves: np.stack(leaves), *states)
    return TaskResume(runner, chosen, rows[seeds[0]][chosen]["elapsed_s"], kept, quarantined)


def _quarantine_unfinished(run_dir: RunDirectory, managers: dict[int, SeedCheckpoints], task: str) -> list[dict]:
    """Orbax's half-written saves go to quarantine; anything else in ``checkpoints/`` is not
    Orbax's (a user's file) and stays where it is, said by name."""
    reason = "a save that never completed: the process stopped while writing it"
    for manager in managers.values():
        for entry in manager.foreign():
            where = (manager.directory / entry).relative_to(run_dir.root)
            print(
                f"resume: left {where} alone: not a checkpoint (only Orbax's folders are read or moved)",
                file=sys.stderr,
            )
    return [
        _quarantine(run_dir, manager, task, seed, entry, reason)
        for seed, manager in managers.items()
        for entry in manager.unfinished()
    ]


def _resume_point(
    managers: dict[int, SeedCheckpoints], rows: dict[int, dict], updates: dict[int, list[dict]], abstract: Any
) -> tuple[int, list | None]:
    """The newest steps every seed has on disk, listed and with its updates logged, whose
    states all restore with their digests (a damaged one falls back to the one before), and
    those states in seed order; (0, None) when there is none beyond step 0 (step 0 is the
    initial state, which the keys rebuild exactly: resuming there is starting over)."""
    usable = [
        {
            r["actual_steps"]
            for r in rows[seed].values()
            if r["actual_steps"] in managers[seed].steps() and _updates_logged(updates[seed], r["update"])
        }
        for seed in managers
    ]
    for steps in sorted(set.intersection(*usable) - {0}, reverse=True):
        try:
            states = [
                manager.restore(steps, abstract, rows[seed][steps]["state_digest"])
                for seed, manager in managers.items()
            ]
            return steps, states
        except CorruptCheckpointError as error:
            print(f"resume: {error}; falling back to the previous checkpoint", file=sys.stderr)
    return 0, None


def _say_missing(run_dir: RunDirectory, managers: dict[int, SeedCheckpoints], task: str, rows: dict[int, dict]) -> None:
    """Names each checkpoint the index lists that is not on disk (deleted, or moved away): the
    resume cannot continue from it, and drops its row."""
    for seed, manager in managers.items():
        on_disk = set(manager.steps())
        for steps in sorted(set(rows[seed]) - on_disk):
            where = manager.path(steps).relative_to(run_dir.root)
            print(
                f"resume: {task} seed {seed}: checkpoint {steps} listed in "
                f"{run_dir.checkpoints_csv(task, seed).name} is missing from disk ({where}); its row is dropped",
                file=sys.stderr,
            )


def _say_starting_over(task: str, seeds: list[int], had_any: bool) -> None:
    if not had_any:
        print(
            f"resume: {task} has no checkpoint yet (the run stopped before saving its first): it "
            "trains from scratch, from step 0",
            file=sys.stderr,
        )
    else:
        print(
            f"resume: {task} starts over: it trains from scratch, from step 0, since no checkpoint "
            f"beyond step 0 is intact and listed for every seed {seeds}",
            file=sys.stderr,
        )


def _kept_initial_states(
    managers: dict[int, SeedCheckpoints], rows: dict[int, dict], abstract: Any, initial: Any
) -> dict[int, dict[int, str]]:
    """seed -> {0: digest} for each seed whose step-0 checkpoint holds its initial state."""
    kept = {}
    for index, (seed, manager) in enumerate(managers.items()):
        state = None if initial is None else seed_slice(initial, index)
        digest = _initial_state_kept(manager, rows[seed].get(0), abstract, state)
        kept[seed] = {} if digest is None else {0: digest}
    return kept


def _set_aside_beyond(
    run_dir: RunDirectory,
    manager: SeedCheckpoints,
    task: str,
    seed: int,
    seeds: list[int],
    chosen: int,
    rows: dict[int, dict],
    kept: dict[int, str],
) -> list[dict[str, str]]:
    """Quarantines this seed's checkpoints a resume from ``chosen`` does not continue from:
    newer ones, unlisted ones, and (starting over) a step 0 that is not the initial state."""
    quarantined = []
    for steps in manager.steps():
        if steps in kept:
            continue
        if steps > chosen and chosen == 0:
            reason = (
                f"newer than step 0, where {task} starts over: not every seed {seeds} has a "
                "checkpoint beyond step 0 intact and listed"
            )
        elif steps > chosen:
            reason = (
                f"newer than the resume point {chosen} of {task}, the newest checkpoint every seed {seeds} has intact"
            )
        elif chosen == 0:
            reason = (
                "damaged: it does not hold the initial state this seed rebuilds; the task "
                "starts over and saves step 0 again"
            )
        elif steps not in rows:
            reason = f"not listed in {run_dir.checkpoints_csv(task, seed).name}"
        else:
            continue
        quarantined.append(_quarantine(run_dir, manager, task, seed, str(steps), reason))
    return quarantined


def _rows_kept(
    manager: SeedCheckpoints, chosen: int, rows: dict[int, dict], updates: list[dict]
) -> tuple[list[dict], list[dict]]:
    """The checkpoint rows of the checkpoints still on disk and the update rows up to the
    resume point: what the recorder goes on from."""
    on_disk = set(manager.steps())  # a listed checkpoint missing from disk was named (_say_missing)
    last_update = rows[chosen]["update"] if chosen else 0
    return (
        [row for steps, row in sorted(rows.items()) if steps in on_disk],
        [r for r in updates if r["update"] <= last_update],
    )


def _initial_state_kept(manager, row: dict | None, abstract: Any, initial: Any) -> str | None:
    """A task starting over saves its initial state again at update 0: an intact step-0
    checkpoint holding exactly that state stays (and is not rewritten); its digest, else None.
    One the index does not list yet (the process stopped before writing the row) stays too:
    the recorder writes its row when the program reaches step 0 again."""
    if initial is None or 0 not in manager.steps():
        return None
    digest = tree_digest(initial)
    if row is not None and row["state_digest"] != digest:
        return None
    try:
        manager.restore(0, abstract, digest)
    except CorruptCheckpointError:
        return None
    return digest


def _quarantine(run_dir: RunDirectory, manager, task: str, seed: int, entry: str, reason: str) -> dict[str, str]:
    where = manager.quarantine_entry(entry, reason)
    print(f"resume: moved {task} seed {seed} checkpoint {entry} to {where} ({reason})", file=sys.stderr)
    return {"path": str(where.relative_to(run_dir.root)), "reason": reason}


def _unique_rows(rows: list[dict]) -> dict[int, dict]:
    """checkpoints.csv's parsed rows as {actual steps: row}; a step listed twice keeps its first row."""
    unique: dict[int, dict] = {}
    for row in rows:
        unique.setdefault(row["actual_steps"], row)
    return unique


def _updates_logged(updates: list[dict], last: int) -> bool:
    """updates.csv holds every update 1..last, in order: resuming after ``last`` leaves no gap."""
    return [r["update"] for r in updates if r["update"] <= last] == list(range(1, last + 1))


def index_disagreements(run_dir: RunDirectory, setups: list[TaskSetup], seeds: list[int]) -> list[str]:
    """What keeps a run that trained to its end from being ``finished``: every seed's
    checkpoints.csv must list exactly the checkpoints on disk and end at the last update, and
    updates.csv must hold every update."""
    problems = []
    for setup in setups:
        for seed in seeds:
            where = run_dir.seed_dir(setup.name, seed).relative_to(run_dir.root)
            rows = read_checkpoint_rows(run_dir.checkpoints_csv(setup.name, seed))
            listed = sorted(r["actual_steps"] for r in rows)
            on_disk = completed_checkpoint_steps(run_dir.checkpoint_dir(setup.name, seed))
            if listed != on_disk:
                problems.append(f"{where}/checkpoints.csv lists {listed}, {where}/checkpoints/ holds {on_disk}")
            elif not rows or max(r["update"] for r in rows) != setup.algorithm.num_updates:
                problems.append(
                    f"{where}/checkpoints.csv does not end at the last update {setup.algorithm.num_updates}"
                )
            updates = [r["update"] for r in read_update_rows(run_dir.updates_csv(setup.name, seed))]
            if updates != list(range(1, setup.algorithm.num_updates + 1)):
                problems.append(f"{where}/updates.csv does not hold updates 1..{setup.algorithm.num_updates} in order")
    return problems
