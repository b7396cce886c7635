"""The checkpoint each seed reports (``ProtocolSettings.report_candidates``; docs/protocol.md, "The
reported checkpoint").

By default a run reports each seed's last checkpoint. A seed whose policy still oscillates when
the learning rate runs out can end on a bad snapshot of a good policy (the swing's seed 17 of 20:
held-out success 0.63 at the end, 0.99 one checkpoint before; results/robustness). With
``report_candidates`` = N > 1, after training each seed's last N checkpoints are evaluated on
*validation* episodes: the task's own evaluation drawn from ``VALIDATION_SEED`` instead of its
held-out seed, so the same distribution and never the held-out starts. The best one (validation
success, then the task's speed or return, then the later) is the seed's reported checkpoint, and
the run reports it by its *held-out* evaluation: choosing on the held-out starts and reporting them
would be selection bias. Training, checkpoints and resume are untouched; a kill during this step
leaves the run "running" with every checkpoint saved, and a resume does the step again.

Written per seed: ``<task>/seed_<n>/reported.csv``, one row (the chosen checkpoint's
checkpoints.csv row, its held-out ``eval_*`` columns from a full evaluation, and the
``validation_*`` numbers that chose it). ``reported_rows`` reads them back for the results table.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from purehr.algorithms.registry import split_entry
from purehr.run.compiled.train_all import TaskSetup
from purehr.run.store.checkpoints import SeedCheckpoints
from purehr.run.store.files import write_csv
from purehr.run.store.run_dir import RunDirectory, read_checkpoint_rows

VALIDATION_SEED = 20261205
"""The validation episodes' seed: none of the tasks' held-out (swing 20260901, hrv 20260902, the
generic 20261201) or showcase seeds, nor a training seed. On swing and hrv no validation episode
of 100 or 20 coincides with a held-out one of 100 or 20 (results/robustness, "The reported
checkpoint chosen on validation starts"; ``tests/test_reported_checkpoint.py``)."""
RANKED_BY = {"swing": "time_to_rotation", "hrv": "episode_length"}
"""After validation success, what ranks a task's candidates, less being better: the speed its
goal is judged by (``purehr.reports.results_table.GOAL_METRIC``); every other task's is its
held-out return, more being better."""


def ranking_metric(task: str) -> tuple[str, bool]:
    """(the metric a candidate's validation is ranked by after success, whether lower is better)."""
    family = split_entry(task)[0]
    return (RANKED_BY[family], True) if family in RANKED_BY else ("return_mean", False)


def choose(validation: Sequence[dict[str, float]], steps: Sequence[int], metric: str, lower_is_better: bool) -> int:
    """The index of the best candidate: highest validation success (NaN, none defined: 0), then
    the better ``metric`` (NaN: worst), then the later checkpoint."""

    def key(index: int) -> tuple[float, float, int]:
        success = float(validation[index]["success_rate"])
        value = float(validation[index][metric])
        value = -value if lower_is_better else value
        return (success if math.isfinite(success) else 0.0, value if math.isfinite(value) else -math.inf, steps[index])

    return max(range(len(steps)), key=key)


def report_checkpoints(run: RunDirectory, setups: Sequence[TaskSetup], seeds: Sequence[int]) -> dict[str, Any]:
    """Each task with ``report_candidates`` > 1: its seeds' reported checkpoints written and
    returned as the manifest records them (task -> seed -> chosen steps, and the seconds it took)."""
    reported = {}
    for setup in setups:
        if setup.protocol.report_candidates <= 1:
            continue
        started = time.perf_counter()
        rows = report_task(run, setup, list(seeds))
        reported[setup.name] = {
            "chosen_steps": {str(seed): row["actual_steps"] for seed, row in zip(seeds, rows)},
            "candidates": setup.protocol.report_candidates,
            "validation_episodes": setup.protocol.validation_episodes,
            "validation_seed": VALIDATION_SEED,
            "seconds": time.perf_counter() - started,
        }
        changed = sum(row["actual_steps"] != row["last_actual_steps"] for row in rows)
        print(
            f"{setup.name}: reported checkpoints chosen on {setup.protocol.validation_episodes} validation episodes "
            f"among each seed's last {setup.protocol.report_candidates}: {changed} of {len(rows)} seeds report an "
            f"earlier one ({reported[setup.name]['seconds']:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
    return reported


def report_task(run: RunDirectory, setup: TaskSetup, seeds: list[int]) -> list[dict[str, Any]]:
    """One task: the candidates restored and verified, all evaluated on the validation episodes in
    one vmapped call; each seed's chosen one reported by its logged full evaluation, or (a quick
    checkpoint) by a full held-out evaluation, the seeds in one call; the rows written."""
    logged = {seed: read_checkpoint_rows(run.checkpoints_csv(setup.name, seed)) for seed in seeds}
    count = min(setup.protocol.report_candidates, *(len(rows) for rows in logged.values()))
    candidates = {seed: rows[-count:] for seed, rows in logged.items()}
    params = _restored_params(run, setup, candidates)  # NumPy leaves [count * seeds, ...], candidate-major
    validate = jax.jit(jax.vmap(lambda p: _validation(setup, p)))
    validation = jax.tree.map(lambda x: np.asarray(x).reshape(count, len(seeds)), validate(params))
    metric, lower = ranking_metric(setup.name)
    chosen = []
    for column, seed in enumerate(seeds):
        per_candidate = [{name: values[i, column] for name, values in validation.items()} for i in range(count)]
        chosen.append(choose(per_candidate, [row["actual_steps"] for row in candidates[seed]], metric, lower))
    heldout = [_logged_heldout(setup, candidates[seed][index]) for seed, index in zip(seeds, chosen)]
    if any(metrics is None for metrics in heldout):  # a quick checkpoint was chosen
        picked = jax.tree.map(lambda x: x[np.asarray([i * len(seeds) + c for c, i in enumerate(chosen)])], params)
        evaluated = jax.tree.map(np.asarray, jax.jit(jax.vmap(setup.evaluate))(picked))
        heldout = [
            metrics or {f"eval_{name}": float(values[column]) for name, values in evaluated.items()}
            for column, metrics in enumerate(heldout)
        ]
    rows = []
    for column, (seed, index) in enumerate(zip(seeds, chosen)):
        picked_validation = {f"validation_{name}": float(values[index, column]) for name, values in validation.items()}
        row = _reported_row(setup, candidates[seed], index, heldout[column], picked_validation)
        write_csv(run.reported_csv(setup.name, seed), list(row), [row])
        rows.append(row)
    return rows


def _logged_heldout(setup: TaskSetup, row: dict) -> dict[str, float] | None:
    """A full checkpoint's logged held-out metrics (``eval_*``), else None (a quick one's are
    from fewer episodes)."""
    if row.get("eval_episodes") != setup.protocol.eval_episodes:
        return None
    return {name: value for name, value in row.items() if name.startswith("eval_")}


def _validation(setup: TaskSetup, network_params) -> dict[str, jax.Array]:
    """The task's own evaluation (without the protocol's extra probes) on the validation episodes."""
    policy = setup.algorithm.policy(network_params)
    episodes = setup.protocol.validation_episodes
    return setup.task.env_evaluation(
        setup.env, setup.eval_env_params, policy, num_episodes=episodes, seed=VALIDATION_SEED
    )


def _restored_params(run: RunDirectory, setup: TaskSetup, candidates: dict[int, list[dict]]) -> Any:
    """Every candidate's network parameters, verified by its digest, stacked candidate-major
    (candidate 0 of every seed, then candidate 1, ...) so that one vmapped call evaluates them all."""
    abstract = setup.abstract_state()
    params = {}
    for seed, rows in candidates.items():
        store = SeedCheckpoints(run.checkpoint_dir(setup.name, seed), read_only=True)
        try:
            for index, row in enumerate(rows):
                state = store.restore(row["actual_steps"], abstract, row["state_digest"])
                params[index, seed] = setup.algorithm.network_params(state)
        finally:
            store.finish()
    count = len(next(iter(candidates.values())))
    ordered = [params[index, seed] for index in range(count) for seed in candidates]
    return jax.tree.map(lambda *leaves: np.stack([np.asarray(leaf) for leaf in leaves]), *ordered)  # host: no compile


def _reported_row(setup: TaskSetup, candidates: list[dict], index: int, heldout: dict, validation: dict) -> dict:
    """reported.csv's row: which checkpoint (and the last, which it was chosen against), its
    held-out metrics as checkpoints.csv names them, the validation numbers that chose it."""
    chosen = candidates[index]
    head = {name: chosen[name] for name in ("target_steps", "actual_steps", "update")}
    head.update(
        last_actual_steps=candidates[-1]["actual_steps"],
        candidates=len(candidates),
        validation_episodes=setup.protocol.validation_episodes,
        validation_seed=VALIDATION_SEED,
    )
    return head | heldout | validation | {"state_digest": chosen["state_digest"]}
