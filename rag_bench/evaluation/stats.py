"""Paired significance tests and confidence intervals for per-query differences.

All take the paired differences ``d = b - a`` of one metric over the queries both runs share.
Resampling is seeded, so the same inputs give the same p-values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

import numpy as np

from rag_bench.errors import UnknownNameError
from rag_bench.evaluation import TEST_NAMES

BLOCK = 1000  # resamples drawn per block, bounding memory for large query sets
MAX_RESAMPLES = 1_000_000  # beyond this the p-values and intervals change in digits nobody reads


def randomization_test(d: np.ndarray, resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired randomization (sign-flip) test of mean(d) = 0.

    Under the null each difference is as likely negative as positive; the p-value counts the
    sign assignments whose mean is at least as extreme, with the +1 correction so it is never 0.
    """
    return randomization_tests([d], resamples, seed)[0]


def randomization_tests(
    ds: Sequence[np.ndarray], resamples: int = 10_000, seed: int = 0
) -> list[float]:
    """:func:`randomization_test` of each of ``ds``, the same p-values as one call each.

    A tied query (difference 0) is the same under either sign: only the others are flipped,
    which gives exactly the same null distribution of the sum at a fraction of the cost (most
    queries tie when two rankers are compared). The sign of the j-th untied difference in
    resample r depends only on the seed, r and j (:func:`_sign_words`), so one sign matrix
    serves every vector whatever its length, and the sums of a block of resamples are one
    matrix product for all vectors."""
    untied = [d[d != 0] for d in (np.asarray(d, dtype=np.float64) for d in ds)]
    p_values = [1.0] * len(ds)
    tested = [i for i, d in enumerate(untied) if len(d)]
    if not tested:
        return p_values
    width = max(len(untied[i]) for i in tested)
    stacked = np.zeros((width, len(tested)))  # rows past a vector's end are 0: they add nothing
    for column, i in enumerate(tested):
        stacked[: len(untied[i]), column] = untied[i]
    observed = np.abs(stacked.sum(axis=0)) - 1e-12
    extremes = np.zeros(len(tested), dtype=np.int64)
    words = _sign_words(resamples, width, seed)
    for start, size in _blocks(resamples):
        sums = _signs(words[start : start + size], width) @ stacked
        extremes += np.count_nonzero(np.abs(sums) >= observed, axis=0)
    for column, i in enumerate(tested):
        p_values[i] = (int(extremes[column]) + 1) / (resamples + 1)
    return p_values


def _by_length(arrays: Sequence[np.ndarray]) -> dict[int, list[int]]:
    """Positions of the arrays, grouped by length."""
    groups: dict[int, list[int]] = defaultdict(list)
    for i, array in enumerate(arrays):
        groups[len(array)].append(i)
    return groups


def _blocks(resamples: int) -> Iterator[tuple[int, int]]:
    """(start, size) of each block of resamples."""
    for start in range(0, resamples, BLOCK):
        yield start, min(BLOCK, resamples - start)


_WORD = 64  # signs per random word
# ±1.0 for each of the 8 bits of a byte, least significant first
_BYTE_SIGNS = ((np.arange(256)[:, None] >> np.arange(8)) & 1) * 2.0 - 1.0


def _sign_words(resamples: int, width: int, seed: int) -> np.ndarray:
    """Random bits for ``resamples`` rows of ``width`` signs: in row r, word w holds the signs
    of positions 64w … 64w + 63. The words are drawn a word column at a time, so the first n
    positions of every row are the same whatever ``width`` is: a vector's p-value depends
    only on itself, the seed and the number of resamples, never on the vectors beside it."""
    n_words = -(-width // _WORD)
    raw = np.random.default_rng(seed).bit_generator.random_raw(resamples * n_words)
    return np.ascontiguousarray(raw.reshape(n_words, resamples).T).astype("<u8", copy=False)


def _signs(words: np.ndarray, width: int) -> np.ndarray:
    """The ±1.0 signs of rows of sign words (:func:`_sign_words`), ``width`` per row."""
    signs = _BYTE_SIGNS[words.view(np.uint8)].reshape(len(words), -1)
    return signs[:, :width]


def t_test(d: np.ndarray) -> float:
    """Two-sided paired t-test."""
    from scipy import stats

    d = np.asarray(d, dtype=np.float64)
    if len(d) < 2 or np.all(d == d[0]):
        return 1.0 if len(d) == 0 or d[0] == 0 else 0.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def _bootstrap_counts(rng: np.random.Generator, size: int, n: int) -> np.ndarray:
    """How often each of ``n`` queries is picked in each of ``size`` resamples of ``n`` picks.

    A pick is ⌊u · n / 2³²⌋ of a 32-bit random word u (two per 64-bit draw): off uniform by at
    most n / 2³² (2·10⁻⁶ at 10,000 queries), far below any resampling error, at a fraction of
    the cost of a bounded integer draw. Counting row by row keeps each row in cache."""
    words = rng.bit_generator.random_raw(-(-size * n // 2)).view(np.uint32)
    words = words[: size * n].reshape(size, n)
    counts = np.empty((size, n))
    scale, shift = np.uint64(n), np.uint64(32)
    for row, out in zip(words, counts):
        out[:] = np.bincount((row.astype(np.uint64) * scale) >> shift, minlength=n)
    return counts


def _bootstrap_means(ds: list[np.ndarray], resamples: int, seed: int) -> list[np.ndarray]:
    """Means of resamples (with replacement) of each of ``ds``, all of one length. The picks
    depend only on the seed and the length, so each block of them is drawn once for all; a
    block's means are one matrix product of how often each query was picked with the stacked
    vectors (the mean of the picked values, to rounding)."""
    rng = np.random.default_rng(seed)
    n = len(ds[0])
    stacked = np.column_stack(ds)
    means = np.empty((resamples, len(ds)))
    for start, size in _blocks(resamples):
        np.matmul(_bootstrap_counts(rng, size, n), stacked, out=means[start : start + size])
    means /= n
    return [means[:, i] for i in range(len(ds))]


def bootstrap_test(d: np.ndarray, resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided bootstrap test: how often the mean of resampled, re-centred differences is
    at least as extreme as the observed mean (+1 correction)."""
    d = np.asarray(d, dtype=np.float64)
    if len(d) == 0 or not np.any(d):
        return 1.0
    (centred,) = _bootstrap_means([d - d.mean()], resamples, seed)
    extreme = int(np.sum(np.abs(centred) >= abs(d.mean()) - 1e-12))
    return (extreme + 1) / (resamples + 1)


def bootstrap_ci(
    d: np.ndarray, level: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of mean(d)."""
    return bootstrap_cis([d], level, resamples, seed)[0]


def bootstrap_cis(
    ds: Sequence[np.ndarray], level: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> list[tuple[float, float]]:
    """:func:`bootstrap_ci` of each of ``ds``, the same intervals bit for bit; the resamples
    are drawn once for all the ``ds`` of one length."""
    ds = [np.asarray(d, dtype=np.float64) for d in ds]
    intervals = [(float("nan"), float("nan"))] * len(ds)
    tail = (1 - level) / 2
    for n, members in _by_length(ds).items():
        if n == 0:
            continue
        for i, means in zip(members, _bootstrap_means([ds[i] for i in members], resamples, seed)):
            low, high = np.quantile(means, [tail, 1 - tail])
            intervals[i] = (float(low), float(high))
    return intervals


DOMAIN_MIN = 100  # a smaller domain is resampled on its own (see domain_bootstrap_cis)


def domain_bootstrap_cis(
    n: int,
    positions: Sequence[np.ndarray],
    ds: Sequence[np.ndarray],
    levels: Sequence[float],
    resamples: int = 10_000,
    seed: int = 0,
) -> list[tuple[float, float]]:
    """Percentile bootstrap intervals of the mean of each ``ds[i]``, the values of the queries
    at ``positions[i]`` among ``n`` queries (a domain: a slice, or the queries a metric is
    defined for), each at its own ``levels[i]``.

    One resampling of the ``n`` queries serves every domain of at least :data:`DOMAIN_MIN`
    queries: a resample's value for a domain is the mean over the drawn queries that fall in
    it (the domain, or subpopulation, bootstrap: a slice's size varies from draw to draw as it
    would in a new sample of queries). Its intervals differ from drawing each domain's own size
    by far less than the Monte-Carlo error, at the cost of one draw for all; a domain covering
    all ``n`` queries gets exactly :func:`bootstrap_cis`' interval. A smaller domain, where the
    drawn count itself would be too uncertain, is resampled on its own (:func:`bootstrap_cis`'s
    draws)."""
    ds = [np.asarray(d, dtype=np.float64) for d in ds]
    intervals = [(float("nan"), float("nan"))] * len(ds)
    shared = [i for i, d in enumerate(ds) if len(d) >= DOMAIN_MIN and n > 0]
    alone = [i for i, d in enumerate(ds) if 0 < len(d) < DOMAIN_MIN]
    if shared:
        # one column of values per domain, one indicator column per distinct partial domain
        # (a domain of all n queries is drawn n times in every resample)
        indicators: dict[bytes, int] = {}
        for i in shared:
            if len(positions[i]) < n:
                indicators.setdefault(np.asarray(positions[i]).tobytes(), len(indicators))
        k = len(shared)
        stacked = np.zeros((n, k + len(indicators)))
        counted = []
        for column, i in enumerate(shared):
            stacked[positions[i], column] = ds[i]
            if len(positions[i]) < n:
                counted.append(k + indicators[np.asarray(positions[i]).tobytes()])
                stacked[positions[i], counted[-1]] = 1.0
            else:
                counted.append(-1)
        sums = np.empty((resamples, stacked.shape[1]))
        rng = np.random.default_rng(seed)
        for start, size in _blocks(resamples):
            np.matmul(_bootstrap_counts(rng, size, n), stacked, out=sums[start : start + size])
        for column, i in enumerate(shared):
            drawn = sums[:, counted[column]] if counted[column] >= 0 else n
            with np.errstate(invalid="ignore"):  # a resample that drew none of the domain
                intervals[i] = _percentiles(sums[:, column] / drawn, levels[i])
    for members in _by_length([ds[i] for i in alone]).values():
        chosen = [alone[j] for j in members]
        for i, means in zip(chosen, _bootstrap_means([ds[i] for i in chosen], resamples, seed)):
            intervals[i] = _percentiles(means, levels[i])
    return intervals


def _percentiles(means: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    low, high = np.nanquantile(means, [tail, 1 - tail])
    return float(low), float(high)


TESTS = dict(
    zip(
        TEST_NAMES,
        (
            lambda d, resamples, seed: randomization_test(d, resamples, seed),
            lambda d, resamples, seed: t_test(d),
            lambda d, resamples, seed: bootstrap_test(d, resamples, seed),
        ),
    )
)


def paired_p_value(
    d: np.ndarray, test: str = "randomization", resamples: int = 10_000, seed: int = 0
) -> float:
    return paired_p_values([d], test, resamples, seed)[0]


def paired_p_values(
    ds: Sequence[np.ndarray], test: str = "randomization", resamples: int = 10_000, seed: int = 0
) -> list[float]:
    """:func:`paired_p_value` of each of ``ds``; the randomization test draws its signs once
    per number of non-tied differences."""
    if test not in TESTS:
        raise UnknownNameError("test", test, list(TESTS))
    if test == "randomization":
        return randomization_tests(ds, resamples, seed)
    return [TESTS[test](d, resamples, seed) for d in ds]


def _ranked(p_values: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The p-values as floats, an all-NaN result of their shape, and the positions of the
    non-NaN ones in ascending order of p (stable): what both adjustments start from."""
    p = np.asarray(p_values, dtype=np.float64)
    valid = np.flatnonzero(~np.isnan(p))
    return p, np.full_like(p, np.nan), valid[np.argsort(p[valid], kind="stable")]


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (NaN entries stay NaN and do not count)."""
    p, adjusted, order = _ranked(p_values)
    m = len(order)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (the step-up procedure that controls the false
    discovery rate: reject where the adjusted p < alpha); NaN entries stay NaN and do not
    count."""
    p, adjusted, order = _ranked(p_values)
    m = len(order)
    if m:
        scaled = p[order] * m / np.arange(1, m + 1)
        adjusted[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    return adjusted


POWER = 0.8  # the conventional power for planning a comparison


def minimum_detectable_effect(d: np.ndarray, alpha: float = 0.05, power: float = POWER) -> float:
    """The smallest mean paired difference a two-sided test at ``alpha`` detects with
    ``power``, for these pairs' count and spread: (z₁₋α/₂ + z_power) · sd(d) / √n (the normal
    approximation of the paired t-test). NaN with fewer than two pairs."""
    from scipy.stats import norm

    d = np.asarray(d, dtype=float)
    if len(d) < 2:
        return float("nan")
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    return float(z * d.std(ddof=1) / np.sqrt(len(d)))


def queries_needed(
    d: np.ndarray, effect: float, alpha: float = 0.05, power: float = POWER
) -> int | None:
    """How many paired queries, spread like these, a test at ``alpha`` needs to detect a mean
    difference of ``effect`` with ``power``. None when the spread is unknown (under two pairs);
    2 when the pairs do not vary at all."""
    from scipy.stats import norm

    d = np.asarray(d, dtype=float)
    if len(d) < 2:
        return None
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    return max(2, int(np.ceil((z * d.std(ddof=1) / abs(effect)) ** 2)))


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation: Pearson's r of the two samples' ranks, tied values at their
    average rank; NaN with fewer than 3 pairs or when either sample is constant."""
    from scipy.stats import rankdata

    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(a) != len(b):
        raise ValueError(f"spearman of {len(a)} and {len(b)} values")
    if len(a) < 3 or np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan")
    ra, rb = rankdata(a) - (len(a) + 1) / 2, rankdata(b) - (len(b) + 1) / 2
    return float((ra * rb).sum() / np.sqrt((ra * ra).sum() * (rb * rb).sum()))


def _packed(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (queries × repeats) array with NaN for missing repeats, each row's values moved to
    its front, and each row's number of values."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(np.isnan(x), axis=1, kind="stable")
    return np.take_along_axis(x, order, axis=1), (~np.isnan(x)).sum(axis=1)


def two_level_bootstrap_ci(
    a: np.ndarray, b: np.ndarray, level: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of the paired delta mean(b) − mean(a) over queries, where ``a`` and
    ``b`` are (queries × repeats) arrays of per-repeat values, NaN where a query has fewer
    repeats (each row needs one value at least). A resample draws the queries with replacement,
    then, within each drawn query and for each run on its own, as many of its repeats as it has,
    with replacement; a query's value is the mean of its drawn repeats. The interval so holds
    both the choice of queries and the repeat-to-repeat noise. With one repeat per query it is
    :func:`bootstrap_ci` of b − a (other draws, the same distribution)."""
    sides = [_packed(a), _packed(b)]
    n = len(sides[0][1])
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    deltas = np.empty(resamples)
    for start, size in _blocks(resamples):
        picks = rng.integers(0, n, size=(size, n))
        means = []
        for packed, counts in sides:
            width = packed.shape[1]
            have = counts[picks][..., None]  # (size, n, 1)
            drawn = (rng.random((size, n, width)) * have).astype(np.int64)
            values = packed[picks[..., None], drawn]
            used = np.arange(width)[None, None, :] < have
            means.append((np.where(used, values, 0.0).sum(axis=2) / have[..., 0]).mean(axis=1))
        deltas[start : start + size] = means[1] - means[0]
    tail = (1 - level) / 2
    low, high = np.quantile(deltas, [tail, 1 - tail])
    return float(low), float(high)


def repeat_noise_se(a: np.ndarray, b: np.ndarray) -> float:
    """The standard error of the paired delta mean(b) − mean(a) that the repeats alone give,
    the queries held fixed: sqrt(Σ_q (s²_a,q / r_a,q + s²_b,q / r_b,q)) / n, with s² the sample
    variance of a query's repeats (ddof 1) over its r repeats; a query with one repeat adds
    nothing. 0 without repeats."""
    total = 0.0
    n = len(a)
    for x in (a, b):
        x = np.asarray(x, dtype=np.float64)
        counts = (~np.isnan(x)).sum(axis=1)
        several = counts > 1
        if several.any():
            variance = np.nanvar(x[several], axis=1, ddof=1)
            total += float((variance / counts[several]).sum())
    return float(np.sqrt(total) / n) if n else 0.0
