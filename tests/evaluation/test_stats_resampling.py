"""The resampling behind compare's p-values and intervals, checked against references: the exact
sign-flip distribution (every assignment enumerated) and SciPy's bootstrap, within the
Monte-Carlo error of the number of resamples."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats

from rag_bench.evaluation.stats import (
    _bootstrap_counts,
    _sign_words,
    _signs,
    bootstrap_ci,
    bootstrap_cis,
    randomization_test,
    randomization_tests,
)


def exact_sign_flip_p(d: np.ndarray) -> float:
    """Share of all 2^n sign assignments whose |sum| reaches the observed one."""
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=len(d))))
    return float(np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-12))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_randomization_p_is_the_exact_p_within_monte_carlo_error(seed):
    rng = np.random.default_rng(seed)
    d = rng.normal(0.15, 0.5, 13)
    exact = exact_sign_flip_p(d)
    resamples = 40_000
    p = randomization_test(d, resamples=resamples, seed=seed)
    error = np.sqrt(exact * (1 - exact) / resamples)
    assert abs(p - exact) <= 4 * error + 2 / resamples, (p, exact)


def test_ties_are_left_out_without_changing_the_exact_distribution():
    d = np.array([0.3, -0.1, 0.0, 0.25, 0.0, 0.4, -0.05, 0.2, 0.0, 0.1])
    exact = exact_sign_flip_p(d[d != 0])
    assert exact == exact_sign_flip_p(d)  # a tied query flips to itself
    p = randomization_test(d, resamples=40_000, seed=3)
    assert abs(p - exact) <= 4 * np.sqrt(exact * (1 - exact) / 40_000) + 1e-4


def test_a_vectors_p_value_ignores_the_vectors_beside_it():
    rng = np.random.default_rng(4)
    d = rng.normal(0.02, 0.3, 300)
    alone = randomization_test(d, 3_000, 7)
    beside_longer = randomization_tests([rng.normal(size=5_000), d, np.zeros(4)], 3_000, 7)
    assert beside_longer[1] == alone and beside_longer[2] == 1.0


def test_sign_words_keep_their_first_positions_whatever_the_width():
    narrow = _signs(_sign_words(50, 70, 9), 70)
    wide = _signs(_sign_words(50, 700, 9), 700)
    assert np.array_equal(narrow, wide[:, :70])
    assert set(np.unique(wide)) == {-1.0, 1.0}
    assert abs(wide.mean()) < 0.01  # fair coins: 35,000 of them


def test_bootstrap_counts_are_resamples_of_n_picks_spread_evenly():
    counts = _bootstrap_counts(np.random.default_rng(0), 4_000, 25)
    assert np.all(counts.sum(axis=1) == 25)
    per_query = counts.mean(axis=0)  # each query is picked once per resample on average
    assert np.all(np.abs(per_query - 1) < 5 * np.sqrt(24 / 25 / 4_000))


def test_bootstrap_means_are_the_means_of_the_picked_values():
    d = np.random.default_rng(5).normal(size=40)
    counts = _bootstrap_counts(np.random.default_rng(11), 1_000, 40)
    picks = [np.repeat(np.arange(40), row.astype(int)) for row in counts]
    means = np.array([d[p].mean() for p in picks])
    low, high = bootstrap_ci(d, 0.9, 1_000, 11)
    assert (low, high) == pytest.approx(tuple(np.quantile(means, [0.05, 0.95])), abs=1e-12)


@pytest.mark.parametrize("n", [15, 200])
def test_bootstrap_interval_is_scipys_percentile_interval_within_monte_carlo_error(n):
    d = np.random.default_rng(n).normal(0.1, 0.4, n)
    ours = bootstrap_ci(d, 0.95, 20_000, 1)
    reference = scipy_stats.bootstrap(
        (d,), np.mean, n_resamples=20_000, method="percentile", random_state=2
    ).confidence_interval
    spread = d.std(ddof=1) / np.sqrt(n)  # the standard error of the mean
    assert abs(ours[0] - reference.low) < 0.05 * spread
    assert abs(ours[1] - reference.high) < 0.05 * spread


def test_batched_intervals_equal_one_call_each_to_rounding():
    rng = np.random.default_rng(6)
    ds = [rng.normal(size=n) for n in (30, 30, 30, 7)]
    batched = bootstrap_cis(ds, 0.95, 2_000, 3)
    single = [bootstrap_ci(d, 0.95, 2_000, 3) for d in ds]
    assert np.allclose(batched, single, rtol=0, atol=1e-12)
