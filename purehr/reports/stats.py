"""The statistics every report shares: the Student-t interval over seeds (the seed is the
experimental unit, and there are few, so not the normal interval) and the mean of a log's
last 10%. A leaf module: NumPy, and scipy (a dependency of jax) for the t quantile."""

from __future__ import annotations

import math

import numpy as np

TAIL_FRACTION = 0.1
""""The last 10%" of a log is its last ``max(1, ceil(0.1 * n))`` entries."""


def finite_values(values: np.ndarray) -> np.ndarray:
    """The finite entries of a log, flattened, as float64 (an update that completed no
    episode logs NaN: it carries no return)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    return values[np.isfinite(values)]


def tail_length(n: int, fraction: float = TAIL_FRACTION) -> int:
    return max(1, math.ceil(fraction * n))


def tail_mean(values: np.ndarray, fraction: float = TAIL_FRACTION) -> float:
    """The mean of the last 10% of a log's finite entries; NaN when it has none."""
    finite = finite_values(values)
    return float(np.mean(finite[-tail_length(len(finite), fraction) :])) if len(finite) else math.nan


def t_quantile(probability: float, df: float) -> float:
    """The Student-t quantile, e.g. t_quantile(0.975, 4) = 2.7764."""
    from scipy import stats  # slow to import, and only a report needs it

    if not 0.0 < probability < 1.0 or df <= 0:
        raise ValueError(f"need 0 < probability < 1 and df > 0, got {probability}, {df}")
    return float(stats.t.ppf(probability, df))


def t_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over axis 0 (seeds) and the two-sided ``confidence`` t interval of that mean,
    mean -+ t(1 - alpha/2, n - 1) * sd / sqrt(n); NaN bounds with a single seed."""
    values = np.asarray(values, dtype=np.float64)
    num_seeds = values.shape[0]
    mean = values.mean(axis=0)
    if num_seeds < 2:
        nan = np.full_like(mean, np.nan)
        return mean, nan, nan
    half_width = t_quantile(0.5 + confidence / 2.0, num_seeds - 1) * values.std(axis=0, ddof=1) / math.sqrt(num_seeds)
    return mean, mean - half_width, mean + half_width


def mean_confidence_interval(
    values: np.ndarray, confidence: float = 0.95, bounds: tuple[float, float] | None = None
) -> dict[str, float]:
    """Mean and two-sided Student-t interval over seeds of one number per seed (NaN entries
    are dropped; NaN bounds for one seed). With ``bounds`` (the metric's range, see
    ``metric_range``) the interval is clipped to it; ``uninformative`` says when it tells
    little either way (``interval_uninformative``)."""
    finite = finite_values(values)
    if not len(finite):
        return {"mean": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n": 0, "uninformative": True}
    mean, low, high = (float(bound) for bound in t_interval(finite, confidence))
    uninformative = interval_uninformative(len(finite), low, high, bounds)
    if bounds is not None:
        low, high = (float(bound) for bound in clip_to_range(low, high, bounds))
    return {"mean": mean, "ci_low": low, "ci_high": high, "n": len(finite), "uninformative": uninformative}


# --- the range a metric can take --------------------------------------------------------------

UNBOUNDED = (-math.inf, math.inf)
FRACTION = (0.0, 1.0)
NON_NEGATIVE = (0.0, math.inf)
METRIC_RANGES: dict[str, tuple[float, float]] = {
    "success_rate": FRACTION,
    "noisy_success_rate": FRACTION,
    "negative_tension_rate": FRACTION,
    "alignment": (-1.0, 1.0),
    "episode_length": NON_NEGATIVE,
    "time_to_rotation": NON_NEGATIVE,
    "effort": NON_NEGATIVE,
    "final_distance": NON_NEGATIVE,
}
"""The values a held-out metric can take by its definition (``eval_`` prefix or not); a t
interval of few seeds runs past them (``0.99 [0.86, 1.12]``), so reports clip to them."""
MIN_INFORMATIVE_SEEDS = 3
"""Below this many seeds a t interval is too wide to tell settings apart (t(0.975, 1) = 12.7)."""
UNINFORMATIVE_NOTE = (
    f"intervals clipped to the metric's range; * marks one of fewer than {MIN_INFORMATIVE_SEEDS} seeds "
    "or as wide as the range: it says little"
)


def metric_range(name: str) -> tuple[float, float]:
    """The range of a metric named as in the evaluation (``success_rate``) or a checkpoints.csv
    column (``eval_success_rate``); unbounded when unknown (a return)."""
    return METRIC_RANGES.get(name.removeprefix("eval_"), UNBOUNDED)


def clip_to_range(low, high, bounds: tuple[float, float]):
    """The interval's bounds (numbers or arrays) clipped to ``bounds``; NaN stays NaN."""
    return np.clip(low, *bounds), np.clip(high, *bounds)


def interval_uninformative(n: int, low: float, high: float, bounds: tuple[float, float] | None = None) -> bool:
    """True when the interval says little: fewer than ``MIN_INFORMATIVE_SEEDS`` seeds, or (for a
    metric bounded on both sides) an unclipped interval at least as wide as the whole range."""
    if n < MIN_INFORMATIVE_SEEDS or not (math.isfinite(low) and math.isfinite(high)):
        return True
    if bounds is None or not all(math.isfinite(bound) for bound in bounds):
        return False
    return high - low >= bounds[1] - bounds[0]


# --- how many seeds a comparison needs ---------------------------------------------------------

MAX_SEEDS = 10_000


def t_test_power(num_seeds: int, difference: float, sd: float, alpha: float = 0.05) -> float:
    """The power of a two-sided two-sample t test with ``num_seeds`` seeds per run to detect a
    true difference of means ``difference`` when each run's seeds spread with ``sd`` (the
    noncentral t distribution, ``scipy.stats.nct``)."""
    from scipy import stats

    if num_seeds < 2 or sd <= 0:
        raise ValueError(f"need num_seeds >= 2 and sd > 0, got {num_seeds}, {sd}")
    df = 2 * num_seeds - 2
    shift = abs(difference) / (sd * math.sqrt(2.0 / num_seeds))
    critical = stats.t.ppf(1.0 - alpha / 2.0, df)
    return float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))


def seeds_needed(difference: float, sd: float, power: float = 0.8, alpha: float = 0.05) -> int | None:
    """The fewest seeds per run for which ``t_test_power`` reaches ``power`` (None past
    ``MAX_SEEDS``, or for no difference): e.g. a difference of one sd needs 17 seeds a run."""
    if not (math.isfinite(difference) and math.isfinite(sd)) or difference == 0 or sd <= 0:
        return None
    low, high = 2, MAX_SEEDS
    if t_test_power(high, difference, sd, alpha) < power:
        return None
    while low < high:  # power grows with the seeds
        middle = (low + high) // 2
        low, high = (middle + 1, high) if t_test_power(middle, difference, sd, alpha) < power else (low, middle)
    return low
