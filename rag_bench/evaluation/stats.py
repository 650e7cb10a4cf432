"""Paired significance tests and confidence intervals for per-query differences.

All take the paired differences ``d = b - a`` of one metric over the queries both runs share.
Resampling is seeded, so the same inputs give the same p-values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag_bench.errors import UnknownNameError

BLOCK = 1000  # resamples drawn per block, bounding memory for large query sets


def randomization_test(d: np.ndarray, resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired randomization (sign-flip) test of mean(d) = 0.

    Under the null each difference is as likely negative as positive; the p-value counts the
    sign assignments whose mean is at least as extreme, with the +1 correction so it is never 0.
    """
    d = np.asarray(d, dtype=np.float64)
    if len(d) == 0 or not np.any(d):
        return 1.0
    # A tied query (difference 0) is the same under either sign: only the others are flipped,
    # which gives exactly the same null distribution of the sum at a fraction of the cost
    # (most queries tie when two rankers are compared).
    d = d[d != 0]
    rng = np.random.default_rng(seed)
    observed = abs(d.sum()) - 1e-12
    extreme = 0
    for start in range(0, resamples, BLOCK):
        n = min(BLOCK, resamples - start)
        signs = rng.integers(0, 2, size=(n, len(d)), dtype=np.int8) * 2 - 1
        extreme += int(np.sum(np.abs(signs @ d) >= observed))
    return (extreme + 1) / (resamples + 1)


def t_test(d: np.ndarray) -> float:
    """Two-sided paired t-test."""
    from scipy import stats

    d = np.asarray(d, dtype=np.float64)
    if len(d) < 2 or np.all(d == d[0]):
        return 1.0 if len(d) == 0 or d[0] == 0 else 0.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def _bootstrap_means(d: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, BLOCK):
        n = min(BLOCK, resamples - start)
        picks = rng.integers(0, len(d), size=(n, len(d)))
        means[start : start + n] = d[picks].mean(axis=1)
    return means


def bootstrap_test(d: np.ndarray, resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided bootstrap test: how often the mean of resampled, re-centred differences is
    at least as extreme as the observed mean (+1 correction)."""
    d = np.asarray(d, dtype=np.float64)
    if len(d) == 0 or not np.any(d):
        return 1.0
    centred = _bootstrap_means(d - d.mean(), resamples, seed)
    extreme = int(np.sum(np.abs(centred) >= abs(d.mean()) - 1e-12))
    return (extreme + 1) / (resamples + 1)


def bootstrap_ci(
    d: np.ndarray, level: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of mean(d)."""
    d = np.asarray(d, dtype=np.float64)
    if len(d) == 0:
        return float("nan"), float("nan")
    means = _bootstrap_means(d, resamples, seed)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


TESTS = {
    "randomization": lambda d, resamples, seed: randomization_test(d, resamples, seed),
    "ttest": lambda d, resamples, seed: t_test(d),
    "bootstrap": lambda d, resamples, seed: bootstrap_test(d, resamples, seed),
}


def paired_p_value(
    d: np.ndarray, test: str = "randomization", resamples: int = 10_000, seed: int = 0
) -> float:
    if test not in TESTS:
        raise UnknownNameError("test", test, list(TESTS))
    return TESTS[test](d, resamples, seed)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (NaN entries stay NaN and do not count)."""
    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full_like(p, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    if len(valid) == 0:
        return adjusted
    order = valid[np.argsort(p[valid], kind="stable")]
    m = len(order)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted
