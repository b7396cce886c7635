"""Restore a checkpoint for analysis in a fresh process: parameters and a deterministic
policy, without compiling the training program."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from purehr.algorithms.base import AlgorithmConfig
from purehr.engine.acting import Actor
from purehr.envs.base import Environment
from purehr.envs.policies import RecurrentPolicy
from purehr.protocol_settings import ProtocolSettings
from purehr.run.compiled.task_setup import recorded_setup
from purehr.run.planning.resume import changed_network_source
from purehr.run.store.checkpoints import CheckpointNotShipped, CorruptCheckpointError, SeedCheckpoints, shape_mismatches
from purehr.run.store.reported import missing_reported_choice, reported_rows
from purehr.run.store.run_dir import (
    RunDirectory,
    completed_checkpoint_steps,
    is_published_record,
    read_checkpoint_rows,
    unfinished_save_steps,
)
from purehr.tasks import get_task
from purehr.types import Policy


@dataclass(frozen=True)
class Restored:
    task: str
    seed: int
    steps: int
    target_steps: int
    params: Any  # the network parameters
    runner: Any  # the algorithm's whole state: optimiser, env states, keys, update index
    policy: Callable  # policy(obs or batch, t=0) -> env action(s), deterministic, jitted; GRU: (action, state)
    pure_policy: Policy | RecurrentPolicy  # policy(obs, t, key) -> env action, to use inside jit/vmap
    config: AlgorithmConfig
    protocol: ProtocolSettings  # the run's checkpoint and evaluation cadence (eval_episodes, ...)
    env: Environment
    env_params: Any  # the held-out params (a curriculum's final stage)
    checkpoint_row: dict[str, Any]  # the row of checkpoints.csv, held-out metrics included


def restore(run_dir: str | Path, task: str, seed: int, step: int | str = "latest") -> Restored:
    """``task`` is any name of the run that ``get_task`` resolves in this process (swing, hrv,
    ``gymnax:CartPole-v1``, a ``module:factory`` whose module imports here; a ``register_task``
    task registered again); its environment is rebuilt from the manifest's constructor
    arguments. ``step`` is an environment-step count (the actual count, or the target it was
    saved for), ``"latest"`` or ``"reported"`` (the checkpoint the run reports: its latest, or
    the one chosen on validation episodes, ``purehr.run.choose_reported``; refused, naming the missing
    reported.csv, where the run chooses one but has not); ``seed`` and ``step`` may be
    NumPy integers. Only a checkpoint
    that matches the digest checkpoints.csv recorded for it is returned."""
    run = RunDirectory(Path(run_dir))
    manifest = run.read_manifest()
    definition = get_task(task)  # an unknown task is refused by name, before the run is searched
    if task not in manifest["tasks"]:
        raise ValueError(f"task {task!r} is not in the run {run.root} (it has {manifest['tasks']})")
    seed = _integer("seed", seed, "an integer seed")
    if seed not in manifest["seeds"]:
        raise ValueError(f"seed {seed!r} is not in the run {run.root} (it has {manifest['seeds']})")
    index = run.checkpoints_csv(task, seed)
    if not index.exists():
        raise FileNotFoundError(
            f"{index} is missing: it holds the digests that verify "
            f"the checkpoints in {run.checkpoint_dir(task, seed)}, which are not read without it"
        )
    rows = read_checkpoint_rows(index)
    if not rows:
        raise FileNotFoundError(f"{index} lists no checkpoint")
    if step == "latest":
        rows = _complete_rows(run, task, seed, rows)
    row = _choose_row(rows, _reported_step(run, task, seed) if step == "reported" else step, index)
    _check_on_disk(run, manifest, task, seed, rows, row, latest=step == "latest")
    # the config, environment and schedule the run trained with: env_params_at follows the
    # schedule, and the held-out params are its final stage
    setup = recorded_setup(manifest, definition)  # a user's network: its factory imported again
    changed = changed_network_source(manifest, task)
    if changed:
        warnings.warn(f"restore: {changed}", stacklevel=2)
    env, algorithm = setup.env, setup.algorithm
    abstract = setup.abstract_state()
    path = run.checkpoint_dir(task, seed) / str(row["actual_steps"])
    mismatches = shape_mismatches(path, abstract)
    if mismatches:
        raise ValueError(
            f"{run.manifest_path} disagrees with checkpoint {path}: {'; '.join(mismatches[:3])}"
            f"{f' (and {len(mismatches) - 3} more)' if len(mismatches) > 3 else ''}; was configs.{task} edited?"
        )
    checkpoints = SeedCheckpoints(run.checkpoint_dir(task, seed), read_only=True)
    try:
        runner = checkpoints.restore(row["actual_steps"], abstract, row["state_digest"])
    finally:
        checkpoints.finish()
    act = Actor(algorithm)
    params = algorithm.network_params(runner)

    def policy(observation, t=0, state=None):
        """One observation, or a batch (a leading axis on every leaf; ``t`` a scalar or one
        step index per observation), like ``PPOModel.predict``; a recurrent policy takes and
        returns its state: ``action, state = policy(observation, t, state)``."""
        return act(params, observation, t, state=state)

    return Restored(
        task,
        seed,
        row["actual_steps"],
        row["target_steps"],
        params,
        runner,
        policy,
        algorithm.policy(params),
        setup.config,
        setup.protocol,
        env,
        setup.eval_env_params,
        row,
    )


def _integer(name: str, value: Any, expected: str) -> int:
    """``value`` as an int: Python and NumPy integers; a bool (``seed=True``) is refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}={value!r}: expected {expected}")
    return int(value)


def _check_on_disk(run: RunDirectory, manifest: dict, task: str, seed: int, rows: list[dict], row: dict, latest: bool):
    """Says why the chosen checkpoint is not on disk (a published record does not ship it, or
    it is missing), and warns when ``"latest"`` is older than a completed checkpoint on disk:
    checkpoints.csv lost its last rows, and an unlisted checkpoint cannot be verified."""
    folder = run.checkpoint_dir(task, seed)
    on_disk = completed_checkpoint_steps(folder) if folder.is_dir() else []
    steps = row["actual_steps"]
    if steps not in on_disk:
        if is_published_record(run.root, manifest):
            shipped = [r["actual_steps"] for r in rows if r["actual_steps"] in on_disk]
            raise CheckpointNotShipped(
                f"checkpoint {folder / str(steps)} is missing: not shipped in this record ({run.root} is a "
                f"published record, which keeps each seed's last checkpoint only; checkpoints.csv still lists "
                f"the others with their held-out metrics). Restore step='latest' (shipped: {shipped}), or "
                "train the run again to have every checkpoint"
            )
        raise CorruptCheckpointError(
            f"checkpoint {steps} listed in checkpoints.csv is missing from disk ({folder / str(steps)})"
        )
    newer = [s for s in on_disk if s > steps]
    if latest and newer:
        warnings.warn(
            f"restore(step='latest'): {folder / str(newer[-1])} on disk is newer than the last checkpoint "
            f"{run.checkpoints_csv(task, seed)} lists ({steps}): did the file lose its last rows? Restoring "
            f"{steps}, the latest listed one (an unlisted checkpoint has no digest to verify it)",
            stacklevel=3,
        )


def _complete_rows(run: RunDirectory, task: str, seed: int, rows: list[dict]) -> list[dict]:
    """``rows`` without the checkpoints whose save never completed (a run stopped while saving
    them: ``unfinished_save_steps``), so that "latest" is the newest complete one, said in a warning."""
    unfinished = unfinished_save_steps(run.checkpoint_dir(task, seed))
    complete = [r for r in rows if r["actual_steps"] not in unfinished]
    if complete and len(complete) < len(rows):
        skipped = max(r["actual_steps"] for r in rows if r["actual_steps"] in unfinished)
        latest = max(r["actual_steps"] for r in complete)
        warnings.warn(
            f"restore(step='latest'): checkpoint {skipped} of {run.checkpoint_dir(task, seed)} was never completed "
            f"(the run was stopped while saving it; a --resume sets it aside): restoring {latest}, the latest "
            "complete one",
            stacklevel=3,
        )
    return complete or rows


def _reported_step(run: RunDirectory, task: str, seed: int) -> int | str:
    """The steps of the checkpoint the seed reports, or ``"latest"`` where the run reports its
    last ones (it chooses none); refused where it chooses one but the choice is missing or stale."""
    missing = missing_reported_choice(run.root, task, [seed])
    if missing is not None:
        raise FileNotFoundError(f"restore(step='reported'): {missing}")
    reported = reported_rows(run.root, task, [seed])
    return "latest" if reported is None else reported[0]["actual_steps"]


def _choose_row(rows: list[dict], step, csv_path: Path) -> dict:
    if step == "latest":
        return max(rows, key=lambda r: r["actual_steps"])
    step = _integer("step", step, "an integer number of environment steps, 'latest' or 'reported'")
    for column in ("actual_steps", "target_steps"):
        for row in rows:
            if row[column] == step:
                return row
    available = [r["target_steps"] for r in rows]
    raise ValueError(f"no checkpoint at step {step} in {csv_path}; targets available: {available}")
