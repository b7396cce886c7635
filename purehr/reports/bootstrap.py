"""Interval estimates of Agarwal et al. (NeurIPS 2021): the interquartile mean (IQM), percentile
bootstrap intervals stratified by task (seeds resampled within each task; held-out episodes
within a seed as the inner level when the values are per episode), performance profiles and the
probability of improvement. A leaf module: NumPy and SciPy.

A *sample* is one task's values: ``[seeds]`` (one number per seed) or ``[seeds, episodes]``
(per held-out episode). One-level samples of a scalar statistic go through
``scipy.stats.bootstrap`` (percentile method, as rliable's); two-level samples and the profile's
curve through ``resample``, a vectorised NumPy two-level resampler (SciPy has none)."""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

REPS = 2000
"""Bootstrap replicates (rliable's default is 2000 for intervals)."""
CONFIDENCE = 0.95
SEED = 0
"""The resampler's seed: a report gives the same interval every time it is drawn."""


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its two-sided percentile bootstrap interval (NaN bounds when some
    task has fewer than two seeds: nothing to resample)."""

    value: float
    low: float
    high: float
    seeds: int

    def covers(self, point: float) -> bool:
        return self.low <= point <= self.high

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def as_samples(samples: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
    """One array per task, each ``[seeds]`` or ``[seeds, episodes]`` (float64, seeds whose value
    is NaN dropped: a seed that never succeeded has no time to rotation); a bad shape or a NaN
    episode is refused by name."""
    if isinstance(samples, np.ndarray):
        samples = [samples]
    checked = []
    for index, sample in enumerate(samples):
        sample = np.asarray(sample, np.float64)
        if sample.ndim == 1:
            sample = sample[np.isfinite(sample)]
        elif sample.ndim == 2:
            if not np.isfinite(sample).all():
                raise ValueError(f"sample {index}: per-episode values [seeds, episodes] must be finite")
        else:
            raise ValueError(f"sample {index} has shape {sample.shape}; expected [seeds] or [seeds, episodes]")
        checked.append(sample)
    return checked


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean of the middle 50% (``scipy.stats.trim_mean`` cutting 25% at
    each end, rliable's ``aggregate_iqm``): robust to an outlying seed, less noisy than the median."""
    from scipy import stats

    return stats.trim_mean(values, 0.25, axis=axis)


def mean(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(values, axis=axis)


STATISTICS: dict[str, Callable] = {"iqm": iqm, "mean": mean}


def _pooled(samples: Sequence[np.ndarray], episodes_axis: bool) -> np.ndarray:
    """Every task's values in one last axis: ``[..., sum of seeds (x episodes)]``."""
    if episodes_axis:
        samples = [sample.reshape(*sample.shape[:-2], -1) for sample in samples]
    return np.concatenate(samples, axis=-1)


def resample(samples: Sequence[np.ndarray], reps: int = REPS, seed: int = SEED) -> list[np.ndarray]:
    """Two-level stratified bootstrap replicates, ``[reps, seeds, episodes]`` per task: seeds drawn
    with replacement within each task, then episodes with replacement within each drawn seed
    (a ``[seeds]`` sample is ``[seeds, 1]``: the inner draw keeps its one value)."""
    samples = as_samples(samples)
    key = (tuple(hashlib.sha1(np.ascontiguousarray(s)).hexdigest() + str(s.shape) for s in samples), reps, seed)
    if key in _RECENT:  # the IQM, the mean and the profile of one run resample the same seeds
        return _RECENT[key]
    rng = np.random.default_rng(seed)
    replicates = []
    for sample in samples:
        sample = sample[:, None] if sample.ndim == 1 else sample
        num_seeds, num_episodes = sample.shape
        seeds = rng.integers(0, num_seeds, (reps, num_seeds))
        episodes = rng.integers(0, num_episodes, (reps, num_seeds, num_episodes))
        replicates.append(sample[seeds[..., None], episodes])
    _RECENT.clear()  # one entry: a run's [reps, seeds, episodes] replicates are large
    _RECENT[key] = replicates
    return replicates


_RECENT: dict[tuple, list[np.ndarray]] = {}


def _two_level(samples: Sequence[np.ndarray]) -> bool:
    return any(sample.ndim == 2 for sample in samples)


def _percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentiles over axis 0 (replicates), NaN replicates left out; NaN where all are (a curve's
    checkpoint with no finite seed: NumPy warns, the answer is simply undefined)."""
    alpha = (1.0 - confidence) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanpercentile(replicates, 100 * alpha, axis=0), np.nanpercentile(
            replicates, 100 * (1 - alpha), axis=0
        )


def _estimate(
    groups: Sequence[Sequence[np.ndarray]], statistic: Callable, reps: int, confidence: float, seed: int
) -> Estimate:
    """``statistic(*groups)`` and its interval; each group a list of task samples, every sample
    resampled independently (stratified). ``statistic`` takes per group a list of
    ``[..., seeds, episodes]`` arrays and returns ``[...]``."""
    groups = [as_samples(group) for group in groups]
    sizes = [len(sample) for group in groups for sample in group]
    if not sizes or min(sizes) == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    point = float(statistic(*[[s[:, None] if s.ndim == 1 else s for s in group] for group in groups]))
    if min(sizes) < 2:
        return Estimate(point, math.nan, math.nan, min(sizes))
    flat = [sample for group in groups for sample in group]
    if not _two_level(flat):
        low, high = _scipy_interval(groups, statistic, reps, confidence, seed)
    else:
        replicates, parts = resample(flat, reps, seed), []
        for group in groups:
            parts, replicates = parts + [replicates[: len(group)]], replicates[len(group) :]
        low, high = _percentile_interval(statistic(*parts), confidence)
    return Estimate(point, float(low), float(high), min(sizes))


def _scipy_interval(groups, statistic: Callable, reps: int, confidence: float, seed: int) -> tuple[float, float]:
    """One-level samples: ``scipy.stats.bootstrap`` over every sample at once, unpaired (each task
    and run resampled on its own), the percentile interval."""
    from scipy import stats

    counts = [len(group) for group in groups]

    def vectorised(*arrays, axis=-1):
        arrays = [np.moveaxis(array, axis, -1)[..., None] for array in arrays]
        parts, start = [], 0
        for count in counts:
            parts.append(arrays[start : start + count])
            start += count
        return statistic(*parts)

    data = tuple(sample for group in groups for sample in group)
    if all(np.ptp(sample) == 0 for sample in data):  # every resample is the data: SciPy warns, the answer is exact
        value = float(statistic(*[[sample[:, None] for sample in group] for group in groups]))
        return value, value
    result = stats.bootstrap(
        data,
        vectorised,
        n_resamples=reps,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        paired=False,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def point_estimate(
    samples, statistic: str = "iqm", reps: int = REPS, confidence: float = CONFIDENCE, seed: int = SEED
) -> Estimate:
    """The IQM (or mean) of every task's values pooled (normalise them first to aggregate tasks),
    with its stratified bootstrap interval."""
    function = STATISTICS[statistic]
    return _estimate([samples], lambda group: function(_pooled(group, True)), reps, confidence, seed)


def difference(
    samples_a, samples_b, statistic: str = "iqm", reps: int = REPS, confidence: float = CONFIDENCE, seed: int = SEED
) -> Estimate:
    """``statistic(A) - statistic(B)`` with A's and B's seeds resampled independently."""
    function = STATISTICS[statistic]
    return _estimate(
        [samples_a, samples_b],
        lambda a, b: function(_pooled(a, True)) - function(_pooled(b, True)),
        reps,
        confidence,
        seed,
    )


def _improvement(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> np.ndarray:
    """P(X > Y) + P(X = Y) / 2 for a seed X of A and a seed Y of B (each seed's mean over its
    episodes), averaged over tasks: the Mann-Whitney U over the number of pairs."""
    per_task = []
    for task_a, task_b in zip(a, b, strict=True):
        x, y = task_a.mean(axis=-1)[..., :, None], task_b.mean(axis=-1)[..., None, :]
        per_task.append(np.mean((x > y) + 0.5 * (x == y), axis=(-2, -1)))
    return np.mean(per_task, axis=0)


def improvement_probability(
    samples_a, samples_b, reps: int = REPS, confidence: float = CONFIDENCE, seed: int = SEED
) -> Estimate:
    """The probability that a seed of A scores above a seed of B (ties count half), averaged
    over tasks, with its interval. Pass values negated where lower is better."""
    return _estimate([samples_a, samples_b], _improvement, reps, confidence, seed)


def performance_profile(
    samples, thresholds: np.ndarray, reps: int = REPS, confidence: float = CONFIDENCE, seed: int = SEED
) -> dict[str, np.ndarray]:
    """The fraction of seed-episodes (of seeds, for ``[seeds]`` samples) scoring above each
    threshold, pooled over tasks, with pointwise percentile bands: ``{thresholds, fraction,
    low, high}``, each ``[thresholds]``."""
    samples, thresholds = as_samples(samples), np.asarray(thresholds, np.float64)

    def fraction(values: np.ndarray) -> np.ndarray:  # [..., n] -> [..., thresholds], by sorting once per row
        ordered = np.sort(values.reshape(-1, values.shape[-1]), axis=-1)
        at_or_below = np.stack([np.searchsorted(row, thresholds, side="right") for row in ordered])
        return (1.0 - at_or_below / values.shape[-1]).reshape(*values.shape[:-1], len(thresholds))

    pooled = _pooled([s[:, None] if s.ndim == 1 else s for s in samples], True)
    low = high = np.full(len(thresholds), np.nan)
    if min(len(sample) for sample in samples) >= 2:
        low, high = _percentile_interval(fraction(_pooled(resample(samples, reps, seed), True)), confidence)
    return {"thresholds": thresholds, "fraction": fraction(pooled), "low": low, "high": high}


def curve(values: np.ndarray, statistic: str = "iqm", reps: int = REPS, confidence: float = CONFIDENCE) -> dict:
    """A sample-efficiency curve: the statistic over seeds at each checkpoint of ``values``
    ``[seeds, checkpoints]`` with pointwise percentile bands, ``{value, low, high}`` each
    ``[checkpoints]``; seeds resampled together across checkpoints (a seed is one learning run).
    A checkpoint's NaN seeds (no success yet: no speed) are left out of its statistic."""
    values = np.asarray(values, np.float64)
    if values.ndim != 2:
        raise ValueError(f"a curve takes values [seeds, checkpoints], got shape {values.shape}")
    cut = {"iqm": 0.25, "mean": 0.0}[statistic]

    def along_seeds(array: np.ndarray) -> np.ndarray:  # [..., seeds, checkpoints] -> [..., checkpoints]
        return _finite_trim_mean(np.moveaxis(array, -2, -1), cut)

    value = along_seeds(values)
    if values.shape[0] < 2:
        return {"value": value, "low": np.full_like(value, np.nan), "high": np.full_like(value, np.nan)}
    seeds = np.random.default_rng(SEED).integers(0, values.shape[0], (reps, values.shape[0]))
    low, high = _percentile_interval(along_seeds(values[seeds]), confidence)
    return {"value": value, "low": low, "high": high}


def _finite_trim_mean(values: np.ndarray, cut: float) -> np.ndarray:
    """``scipy.stats.trim_mean(finite entries, cut)`` along the last axis, vectorised (NaN where
    none is finite): sorted (NaN last), ``int(cut * n)`` cut from each end of the ``n`` finite."""
    ordered = np.sort(values, axis=-1)
    finite = np.isfinite(ordered)
    count = finite.sum(axis=-1)
    trimmed = (cut * count).astype(np.int64)
    sums = np.concatenate([np.zeros((*ordered.shape[:-1], 1)), np.cumsum(np.where(finite, ordered, 0.0), -1)], -1)
    kept = count - 2 * trimmed
    total = np.take_along_axis(sums, (count - trimmed)[..., None], -1)[..., 0]
    total = total - np.take_along_axis(sums, trimmed[..., None], -1)[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(kept > 0, total / np.maximum(kept, 1), np.nan)


def normalised(values: np.ndarray, floor: float, reference: float) -> np.ndarray:
    """``(values - floor) / (reference - floor)``: 0 at the task's floor, 1 at its reference
    policy, so tasks aggregate (refused when the two are equal or not finite)."""
    if not (math.isfinite(floor) and math.isfinite(reference)) or floor == reference:
        raise ValueError(f"cannot normalise between floor {floor} and reference {reference}: need two finite, distinct")
    return (np.asarray(values, np.float64) - floor) / (reference - floor)
