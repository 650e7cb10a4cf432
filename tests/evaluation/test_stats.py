"""Paired tests and the Holm correction, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require
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


@pytest.mark.parametrize(
    ("n", "alpha", "power"), [(100, 0.05, 0.8), (30, 0.01, 0.9), (235, 0.05, 0.8), (12, 0.1, 0.5)]
)
def test_minimum_detectable_effect_and_queries_needed_are_statsmodels_power(n, alpha, power):
    """The reference is statsmodels' power of the normal test of one mean (NormalIndPower with
    ratio=0, two-sided), solved for the standardised effect (times the pairs' sd) and for the
    number of pairs. statsmodels counts the far tail too, which the formula leaves out: it moves
    the effect by under 0.1 % at power 0.5 and by under 1e-5 at 0.8."""
    power_of = require("statsmodels.stats.power").NormalIndPower()
    from rag_bench.evaluation.stats import minimum_detectable_effect, queries_needed

    d = np.random.default_rng(n).normal(0.01, 0.2, size=n)
    sd = d.std(ddof=1)
    options = {"alpha": alpha, "power": power, "ratio": 0, "alternative": "two-sided"}
    effect = power_of.solve_power(effect_size=None, nobs1=n, **options)
    assert minimum_detectable_effect(d, alpha, power) == pytest.approx(effect * sd, rel=1e-3)
    pairs = power_of.solve_power(effect_size=0.02 / sd, nobs1=None, **options)
    assert queries_needed(d, 0.02, alpha, power) == int(np.ceil(pairs))


def test_minimum_detectable_effect_needs_two_pairs():
    from rag_bench.evaluation.stats import minimum_detectable_effect, queries_needed

    d = np.array([0.1])
    assert np.isnan(minimum_detectable_effect(d)) and queries_needed(d, 0.1) is None
    assert queries_needed(np.full(5, 0.1), 0.1) == 2  # no spread: the fewest pairs a test takes
