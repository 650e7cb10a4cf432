"""Tests and intervals of many difference vectors at once share their resamples and give the
numbers of one call each (p-values exactly, intervals to rounding: a block's means are one matrix
product); and the numbers are the references': the exact sign-flip test (every assignment
enumerated, and scipy's permutation test) here, scipy's percentile bootstrap within Monte-Carlo
error in test_stats_resampling.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import require
from rag_bench.analysis.compare import _statistics
from rag_bench.analysis.pairing import Pair
from rag_bench.evaluation.stats import (
    bootstrap_ci,
    bootstrap_cis,
    paired_p_value,
    paired_p_values,
    randomization_test,
    randomization_tests,
)


def differences() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    ds = [rng.normal(0.05, 0.3, n) * (rng.random(n) < 0.6) for n in (1, 3, 40, 40, 40, 700)]
    return ds + [np.zeros(10), np.array([]), np.r_[rng.normal(size=39), 0.0]]


@pytest.mark.parametrize("resamples", [2_500, 999])
def test_batched_randomization_tests_equal_one_call_each(resamples):
    ds = differences()
    assert randomization_tests(ds, resamples, 3) == [
        randomization_test(d, resamples, 3) for d in ds
    ]


@pytest.mark.parametrize("test", ["randomization", "bootstrap", "ttest"])
def test_batched_p_values_equal_one_call_each(test):
    ds = differences()
    assert paired_p_values(ds, test, 1_500, 1) == [paired_p_value(d, test, 1_500, 1) for d in ds]


def test_batched_intervals_equal_one_call_each():
    ds = differences()
    batched = bootstrap_cis(ds, 0.9, 2_000, 4)
    single = [bootstrap_ci(d, 0.9, 2_000, 4) for d in ds]
    assert np.allclose(np.array(batched), np.array(single), rtol=0, atol=1e-12, equal_nan=True)
    assert np.isnan(batched[7]).all()  # no differences, no interval


def exact_sign_flip_p(d: np.ndarray) -> float:
    """The exact two-sided p-value of the sign-flip test: the share of all 2^n sign assignments
    whose |sum| reaches the observed one (ties included, as the definition counts them)."""
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=len(d))))
    return float(np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-12))


@pytest.mark.parametrize(("seed", "n", "zeros"), [(3, 10, 2), (4, 6, 0), (5, 11, 5)])
def test_the_randomization_test_is_the_exact_sign_flip_test(seed, n, zeros):
    """For small n every sign assignment is enumerated: scipy's exact permutation test and the
    enumeration agree, and the Monte Carlo p-value (tied queries dropped, +1 correction) lies
    within four standard errors of that exact value."""
    stats = require("scipy.stats")
    d = np.r_[np.random.default_rng(seed).normal(0.1, 0.3, n), np.zeros(zeros)]
    exact = exact_sign_flip_p(d)
    reference = stats.permutation_test(
        (d,),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",  # one sample: the signs are flipped
        n_resamples=np.inf,  # every assignment
        vectorized=True,
    )
    assert reference.pvalue == pytest.approx(exact, abs=1e-12)
    resamples = 100_000
    p = randomization_test(d, resamples, seed=0)
    assert abs(p - exact) <= 4 * np.sqrt(exact * (1 - exact) / resamples) + 1 / resamples


def test_compare_statistics_are_those_of_each_pair_alone():
    rng = np.random.default_rng(8)
    arrays = [(rng.random(n), rng.random(n)) for n in (30, 30, 12, 30)]
    arrays.append((arrays[0][0], arrays[0][0].copy()))  # all tied
    pairs = [Pair("all", "ndcg@10", "a", f"b{i}", a, b) for i, (a, b) in enumerate(arrays)]
    rows = _statistics(pairs, "randomization", 1_000, 2)
    for (a, b), row in zip(arrays, rows):
        interval = bootstrap_ci(b - a, resamples=1_000, seed=2)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(interval, abs=1e-12)
        assert row["p_value"] == paired_p_value(b - a, "randomization", 1_000, 2)
        assert row["n"] == len(a) and row["wins"] + row["ties"] + row["losses"] == len(a)
    assert rows[-1]["p_value"] == 1.0
