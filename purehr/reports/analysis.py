"""The training-performance analysis of ``docs/hrv_task.md``, computed from a run directory.

Pure NumPy functions on per-update logs (one array per ``updates.csv`` column) and on the
held-out rows of ``checkpoints.csv``; ``analyze_run`` reads a run directory laid out as in
``docs/interfaces.md`` and returns per task the metrics of every seed plus their mean with a
two-sided 95% t interval over seeds (the seed is the unit). Nothing here imports JAX.

Conventions shared by all functions:

- "the last / first 10%" of a log is its last / first ``max(1, ceil(0.1 * n))`` entries;
- updates that completed no episode log a NaN ``mean_episode_return``; return-based
  metrics skip those entries (they carry no return);
- a metric that is undefined for the data (a ratio over zero, a missing column) is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from purehr.reports.stats import (
    FRACTION,
    NON_NEGATIVE,
    TAIL_FRACTION,
    UNBOUNDED,
    finite_values,
    mean_confidence_interval,
    tail_length,
    tail_mean,
)
from purehr.run.store.columns import ANALYSED_CHECKPOINT_COLUMNS, ANALYSED_UPDATE_COLUMNS
from purehr.run.store.run_dir import read_manifest, read_seed_logs, run_seed_directories

ROBUSTNESS_COLUMN = "eval_noisy_success_rate"
"""checkpoints.csv column holding held-out success under observation noise (the hrv task's
checkpoint evaluation, ``purehr.envs.hrv.checkpoint_evaluation``, writes it with noise
std ``HRV_OBSERVATION_NOISE_STD`` = 0.02 on the observed ``current_hrv``); robustness is NaN
without it (e.g. the swing task)."""
PEAK_MEMORY_KEY = "peak_memory_bytes"
"""manifest.json key of the run's peak memory; NaN when the manifest does not record it."""

METRIC_GUIDE: dict[str, tuple[str, str]] = {
    "final_reward": ("higher is better", "mean training return, last 10% of updates"),
    "initial_reward": ("reference", "mean training return, first 10% of updates"),
    "convergence_rate": (
        "lower is better",
        "fraction of training before the returns settled (1 = never); settling at a low return also counts",
    ),
    "stability_score": (
        "1 = flat end",
        "1 - std/|mean| of the last 10% of returns; says nothing "
        "of the level: a return that halves and stays flat scores 1 "
        "(see decline_from_best)",
    ),
    "decline_from_best": (
        "lower is better",
        "best 10%-window mean return minus final reward (return units; 0 = ends at its best)",
    ),
    "improvement_ratio": (
        "higher is better",
        "(final - initial) / |initial| of the training return; huge when initial is near 0",
    ),
    "training_success_rate": (
        "higher is better",
        "success on the training distribution, last 10% of updates (stochastic policy)",
    ),
    "heldout_success_rate": (
        "higher is better",
        "success on the fixed held-out set, last checkpoint (deterministic policy)",
    ),
    "heldout_return_mean": ("higher is better", "mean held-out return, last checkpoint"),
    "heldout_final_distance": ("lower is better", "L2 distance of final HRV to target, held-out"),
    "hrv_alignment": ("higher is better", "Pearson r of final HRV and target, held-out (1 = aligned)"),
    "generalisation": ("1 = as on training", "held-out success / training success"),
    "robustness": ("1 = unaffected", "held-out success with observation noise / without"),
    "samples_per_second": ("higher is better", "env steps per second at the last update (compile excluded)"),
    "training_time_s": ("information", "seconds from the compiled start to the last update"),
    "env_steps": ("information", "environment steps at the last update"),
}
"""Per metric: (direction, meaning), printed beside each value by scripts/analyze_run.py so a
number that is correct by its definition cannot be read the wrong way round."""

METRIC_RANGES: dict[str, tuple[float, float]] = {
    "convergence_rate": FRACTION,
    "stability_score": FRACTION,
    "decline_from_best": NON_NEGATIVE,
    "training_success_rate": FRACTION,
    "heldout_success_rate": FRACTION,
    "heldout_final_distance": NON_NEGATIVE,
    "hrv_alignment": (-1.0, 1.0),
    "generalisation": NON_NEGATIVE,
    "robustness": NON_NEGATIVE,
    "samples_per_second": NON_NEGATIVE,
    "training_time_s": NON_NEGATIVE,
    "env_steps": NON_NEGATIVE,
}
"""The values each metric can take by its definition (the rest are unbounded): the aggregate's
t interval is clipped to them."""
MEASURED_FROM: dict[str, str] = {
    "heldout_final_distance": "eval_final_distance",
    "hrv_alignment": "eval_alignment",
    "robustness": ROBUSTNESS_COLUMN,
}
"""Metrics a task measures only when its checkpoints.csv has this column (hrv's, not swing's)."""
SUCCESS_METRICS = ("training_success_rate", "heldout_success_rate", "generalisation", "robustness")
"""Metrics of success, undefined for an environment that defines none (``eval_success_rate`` NaN
at every checkpoint: most gymnax and Brax tasks); such a task is judged on its return."""

Columns = Mapping[str, np.ndarray]


# --- metrics on one log ---------------------------------------------------------------------


def _tail(values: np.ndarray, fraction: float) -> np.ndarray:
    return values[-tail_length(len(values), fraction) :] if len(values) else values


def _head(values: np.ndarray, fraction: float) -> np.ndarray:
    return values[: tail_length(len(values), fraction)]


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def _ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is zero or either is NaN."""
    if not (math.isfinite(numerator) and math.isfinite(denominator)) or denominator == 0:
        return math.nan
    return numerator / denominator


def final_reward(returns: np.ndarray, fraction: float = TAIL_FRACTION) -> float:
    """Final reward: the mean of the last 10% of ``mean_episode_return`` (smooths the
    update-to-update noise of the last value)."""
    return tail_mean(returns, fraction)


def initial_reward(returns: np.ndarray, fraction: float = TAIL_FRACTION) -> float:
    """Initial reward: the mean of the first 10% of ``mean_episode_return``."""
    return _mean(_head(finite_values(returns), fraction))


def convergence_rate(returns: np.ndarray, window_fraction: float = TAIL_FRACTION, threshold: float = 0.05) -> float:
    """Convergence rate: the fraction of training that passed before the returns settled.

    A trailing window of ``w = max(2, ceil(window_fraction * n))`` updates slides over the
    ``n`` logged returns; the first window whose (population) std is below
    ``threshold * (max - min of all returns)`` marks convergence, and the result is its start
    index / n. Lower is faster. 1.0 if no window ever settles (or fewer than w entries);
    0.0 for a log whose returns never change.
    """
    values = finite_values(returns)
    n = len(values)
    window = max(2, math.ceil(window_fraction * n))
    if n < window:
        return 1.0
    return_range = float(np.max(values) - np.min(values))
    if return_range == 0:
        return 0.0
    windows = np.lib.stride_tricks.sliding_window_view(values, window)
    settled = np.flatnonzero(np.std(windows, axis=1) < threshold * return_range)
    return float(settled[0]) / n if len(settled) else 1.0


def stability_score(returns: np.ndarray, fraction: float = TAIL_FRACTION) -> float:
    """Stability score: ``1 - std / |mean|`` of the last 10% of returns, clipped to [0, 1]
    (1 = flat at the end). With a zero mean it is 1 if the tail is constant, else 0."""
    tail = _tail(finite_values(returns), fraction)
    if not len(tail):
        return math.nan
    spread, centre = float(np.std(tail)), abs(float(np.mean(tail)))
    if centre == 0:
        return 1.0 if spread == 0 else 0.0
    return float(np.clip(1.0 - spread / centre, 0.0, 1.0))


def decline_from_best(returns: np.ndarray, fraction: float = TAIL_FRACTION) -> float:
    """Decline from best: the best mean return over any window of ``max(1, ceil(0.1 n))``
    consecutive finite entries minus the final reward, in return units (>= 0; 0 = training
    ends at its best). What the stability score cannot say: a return that halves and then
    stays flat is perfectly stable, and its decline is half its peak."""
    values = finite_values(returns)
    if not len(values):
        return math.nan
    window = tail_length(len(values), fraction)
    best = float(np.max(np.convolve(values, np.ones(window) / window, mode="valid")))
    decline = best - final_reward(values, fraction)
    # the last window is the final reward itself: rounding must not read as a decline
    return decline if decline > 1e-9 * max(1.0, abs(best)) else 0.0


def improvement_ratio(returns: np.ndarray, fraction: float = TAIL_FRACTION, min_denominator: float = 1e-6) -> float:
    """Improvement ratio: ``(final - initial) / max(|initial|, min_denominator)`` with final
    and initial the means of the last and first 10% of returns (the guard keeps a start
    near zero return from dividing by zero; such ratios are large, read them with care)."""
    values = finite_values(returns)
    initial, final = initial_reward(values, fraction), final_reward(values, fraction)
    return (final - initial) / max(abs(initial), min_denominator) if len(values) else math.nan


def generalisation(heldout_success: float, training_success: float) -> float:
    """Generalisation: held-out success / training-distribution success, both at the end of
    training (1 = as good on the fixed held-out targets as on the ones trained on; NaN when
    training success is 0)."""
    return _ratio(heldout_success, training_success)


def robustness(noisy_success: float, clean_success: float) -> float:
    """Robustness: held-out success with Gaussian noise on the observed ``current_hrv`` /
    held-out success without (NaN when the clean success is 0)."""
    return _ratio(noisy_success, clean_success)


def consistency(per_seed_final_rewards: np.ndarray) -> float:
    """Consistency across seeds: the sample std (ddof=1) of the seeds' final rewards, in
    return units; lower is more consistent. The std rather than ``1 - std/mean`` because
    potential-form returns sit near zero, where a ratio to the mean explodes. NaN for fewer
    than two seeds."""
    values = finite_values(per_seed_final_rewards)
    return float(np.std(values, ddof=1)) if len(values) >= 2 else math.nan


def samples_per_second(env_steps: np.ndarray, elapsed_s: np.ndarray) -> float:
    """Environment steps per wall-clock second at the last update. The log's elapsed time
    counts from the start of the already-compiled call (``RunRecorder.start``), so
    compilation is excluded; checkpoint evaluation and saving are included."""
    return _ratio(float(np.asarray(env_steps)[-1]), float(np.asarray(elapsed_s)[-1]))


def seed_metrics(updates: Columns, checkpoints: Columns) -> dict[str, float]:
    """Every per-seed metric from one seed's ``updates.csv`` and ``checkpoints.csv`` columns
    (held-out values are those of the last checkpoint)."""
    returns = updates["mean_episode_return"]
    last_checkpoint = {name: column[-1] for name, column in checkpoints.items()}

    def heldout(name: str) -> float:
        value = last_checkpoint.get(name, math.nan)
        return float(value) if isinstance(value, (float, np.floating)) else math.nan

    training_success = tail_mean(updates["train_success_rate"])
    heldout_success = heldout("eval_success_rate")
    return {
        "final_reward": final_reward(returns),
        "initial_reward": initial_reward(returns),
        "convergence_rate": convergence_rate(returns),
        "stability_score": stability_score(returns),
        "decline_from_best": decline_from_best(returns),
        "improvement_ratio": improvement_ratio(returns),
        "training_success_rate": training_success,
        "heldout_success_rate": heldout_success,
        "heldout_return_mean": heldout("eval_return_mean"),
        "heldout_final_distance": heldout("eval_final_distance"),
        "hrv_alignment": heldout("eval_alignment"),
        "generalisation": generalisation(heldout_success, training_success),
        "robustness": robustness(heldout(ROBUSTNESS_COLUMN), heldout_success),
        "samples_per_second": samples_per_second(updates["env_steps"], updates["elapsed_s"]),
        "training_time_s": float(updates["elapsed_s"][-1]),
        "env_steps": float(updates["env_steps"][-1]),
    }


# --- reading a run directory -----------------------------------------------------------------


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def analyze_run(run_dir: str | Path) -> dict[str, Any]:
    """The analysis of a whole run directory (``docs/interfaces.md`` layout).

    Tasks are ``manifest["tasks"]`` (else every folder holding ``seed_<n>`` folders).
    Returns ``{"run_dir", "wall_time_s", "peak_memory_bytes", "curricula" (the manifest's
    difficulty schedules, {} for none), "tasks": {task: {"seeds":
    {seed: seed_metrics}, "aggregate": {metric: mean_confidence_interval, clipped to
    METRIC_RANGES}, "defines_success", "not_measured": [metrics the task's logs have no column
    for, and ``SUCCESS_METRICS`` where the environment defines no success: NaN by
    construction], "consistency", "samples_per_second_all_seeds"}}}``;
    ``samples_per_second_all_seeds`` is the task's steps over all seeds divided by the longest
    seed's elapsed time (seeds train together).
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    result: dict[str, Any] = {
        "run_dir": str(run_dir),
        "wall_time_s": _number(manifest.get("wall_time_s")),
        "peak_memory_bytes": _number(manifest.get(PEAK_MEMORY_KEY)),
        "curricula": manifest.get("curricula") or {},
        "tasks": {},
    }
    for task, seed_dirs in run_seed_directories(run_dir, manifest).items():
        logs = {
            seed: read_seed_logs(seed_dir, ANALYSED_UPDATE_COLUMNS, ANALYSED_CHECKPOINT_COLUMNS, numeric=True)
            for seed, seed_dir in seed_dirs.items()
        }
        per_seed = {seed: seed_metrics(*seed_logs) for seed, seed_logs in logs.items()}
        success_defined = defines_success([checkpoints for _, checkpoints in logs.values()])
        if not success_defined:  # info["success"] is always False there: a training rate of 0 means nothing
            per_seed = {
                seed: dict(metrics, **dict.fromkeys(SUCCESS_METRICS, math.nan)) for seed, metrics in per_seed.items()
            }
        metric_names = next(iter(per_seed.values())).keys()
        result["tasks"][task] = {
            "seeds": per_seed,
            "aggregate": {
                name: mean_confidence_interval(
                    np.array([metrics[name] for metrics in per_seed.values()]),
                    bounds=METRIC_RANGES.get(name, UNBOUNDED),
                )
                for name in metric_names
            },
            "defines_success": success_defined,
            "not_measured": [
                name
                for name, column in MEASURED_FROM.items()
                if not any(column in checkpoints for _, checkpoints in logs.values())
            ]
            + ([] if success_defined else [name for name in SUCCESS_METRICS if name not in MEASURED_FROM]),
            "consistency": consistency(np.array([metrics["final_reward"] for metrics in per_seed.values()])),
            "samples_per_second_all_seeds": _ratio(
                sum(metrics["env_steps"] for metrics in per_seed.values()),
                max(metrics["training_time_s"] for metrics in per_seed.values()),
            ),
        }
    return result


def defines_success(checkpoint_logs: list[Columns]) -> bool:
    """Whether a task's environment defines success: some checkpoint of some seed logged a finite
    held-out ``eval_success_rate`` (an environment without success logs NaN throughout)."""
    return any(
        np.isfinite(np.asarray(columns.get("eval_success_rate", []), np.float64)).any() for columns in checkpoint_logs
    )


def to_json_safe(value: Any) -> Any:
    """NaN and infinities become null (strict JSON has no NaN); numpy scalars become floats;
    mapping keys become strings."""
    if isinstance(value, Mapping):
        return {str(key): to_json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_safe(item) for item in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value
