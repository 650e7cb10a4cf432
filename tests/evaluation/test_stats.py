"""Paired tests and the Holm correction, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rag_bench.evaluation.stats import bootstrap_ci, holm, randomization_test, t_test


def test_tied_queries_do_not_change_the_randomization_p_value():
    d = np.random.default_rng(2).normal(0.1, 0.2, 20)
    assert randomization_test(np.r_[d, np.zeros(200)]) == randomization_test(d)


def test_randomization_p_value_is_exact_for_a_tiny_case():
    # signs of (1, 1, 1) give sums 3, 1, 1, -1, 1, -1, -1, -3: |sum| >= 3 in 2 of 8 assignments
    p = randomization_test(np.array([1.0, 1.0, 1.0]), resamples=20_000, seed=1)
    assert p == pytest.approx(0.25, abs=0.01)
    assert randomization_test(np.zeros(5)) == 1.0


def test_holm_adjusts_in_order_and_keeps_nan():
    adjusted = holm([0.01, 0.04, np.nan, 0.03])
    assert adjusted[0] == pytest.approx(0.03)
    assert adjusted[3] == pytest.approx(0.06) and adjusted[1] == pytest.approx(0.06)
    assert np.isnan(adjusted[2])


def test_bootstrap_interval_brackets_the_mean_and_t_test_edges():
    d = np.random.default_rng(0).normal(0.2, 0.1, 200)
    low, high = bootstrap_ci(d)
    assert low < d.mean() < high
    assert t_test(np.zeros(4)) == 1.0 and t_test(np.full(4, 0.5)) == 0.0


def test_minimum_detectable_effect_and_queries_needed_agree_with_the_formula():
    from scipy.stats import norm

    from rag_bench.evaluation.stats import minimum_detectable_effect, queries_needed

    rng = np.random.default_rng(0)
    d = rng.normal(0.01, 0.2, size=100)
    z = norm.ppf(0.975) + norm.ppf(0.8)  # 2.8016
    assert minimum_detectable_effect(d) == pytest.approx(z * d.std(ddof=1) / 10)
    needed = queries_needed(d, 0.02)
    assert needed == int(np.ceil((z * d.std(ddof=1) / 0.02) ** 2))
    # with the queries needed, the effect asked for is detectable at the same spread
    assert minimum_detectable_effect(d) * np.sqrt(100 / needed) <= 0.02 + 1e-12
    assert np.isnan(minimum_detectable_effect(d[:1])) and queries_needed(d[:1], 0.1) is None
