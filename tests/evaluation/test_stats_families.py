"""The adjustments behind compare's two families and the domain bootstrap that draws one
resampling for every slice, against references: statsmodels' multipletests, hand-computed
families, bootstrap_ci's own draws, and the fixed-size bootstrap within Monte-Carlo error."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require
from rag_bench.evaluation.stats import (
    DOMAIN_MIN,
    benjamini_hochberg,
    bootstrap_ci,
    bootstrap_cis,
    domain_bootstrap_cis,
    holm,
)


def test_holm_and_benjamini_hochberg_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, kept non-decreasing
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted p times 4/1, 4/2, 4/3, 4/4 = 0.02, 0.02, 0.04, 0.04, kept non-increasing from
    # the largest down
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert benjamini_hochberg([0.2]) == pytest.approx([0.2])
    assert benjamini_hochberg([0.9, 0.8]) == pytest.approx([0.9, 0.9])
    kept = benjamini_hochberg([0.01, np.nan, 0.02])
    assert np.isnan(kept[1]) and kept[[0, 2]] == pytest.approx([0.02, 0.02])
    assert np.isnan(benjamini_hochberg([np.nan])).all() and len(benjamini_hochberg([])) == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_holm_and_benjamini_hochberg_are_statsmodels(seed):
    multipletests = require("statsmodels.stats.multitest").multipletests
    rng = np.random.default_rng(seed)
    p = np.r_[rng.uniform(0, 0.05, 7), rng.uniform(0, 1, 30), [0.5, 0.5, 1.0]]  # with ties
    for ours, method in ((holm, "holm"), (benjamini_hochberg, "fdr_bh")):
        reference = multipletests(p, alpha=0.05, method=method)[1]
        assert ours(p) == pytest.approx(reference, abs=1e-12), method


def test_a_domain_of_every_query_is_bootstrap_cis_to_rounding():
    rng = np.random.default_rng(3)
    n = 400
    full = [rng.normal(0.02, 0.2, n) for _ in range(3)]
    part = np.sort(rng.choice(n, 150, replace=False))
    ds = [*full, full[0][part]]
    positions = [np.arange(n)] * 3 + [part]
    found = domain_bootstrap_cis(n, positions, ds, [0.95, 0.9, 0.95, 0.95], 2_000, 7)
    assert np.allclose(found[0], bootstrap_ci(full[0], 0.95, 2_000, 7), rtol=0, atol=1e-12)
    assert np.allclose(found[1], bootstrap_ci(full[1], 0.9, 2_000, 7), rtol=0, atol=1e-12)
    assert np.allclose(found[2], bootstrap_cis([full[2]], 0.95, 2_000, 7)[0], rtol=0, atol=1e-12)


def test_a_small_domain_is_resampled_on_its_own():
    rng = np.random.default_rng(4)
    n = 500
    small = np.sort(rng.choice(n, DOMAIN_MIN - 1, replace=False))
    d = rng.normal(size=n)
    (found,) = domain_bootstrap_cis(n, [small], [d[small]], [0.95], 1_500, 2)
    assert found == bootstrap_ci(d[small], 0.95, 1_500, 2)
    empty = domain_bootstrap_cis(n, [small[:0]], [d[:0]], [0.95], 100, 0)
    assert np.isnan(empty[0]).all()


def test_a_domains_interval_is_the_fixed_size_bootstraps_within_monte_carlo_error():
    """A slice of 1,500 of 6,000 queries, its interval over 25 seeds each way: the domain
    bootstrap (one draw of all 6,000, the slice's mean over the drawn queries in it) and the
    bootstrap of the slice alone agree within four standard errors of their seed-to-seed
    spread, and that spread is the Monte-Carlo error of a percentile."""
    rng = np.random.default_rng(0)
    n, resamples, seeds = 6_000, 1_000, 25
    # a mean far from 0 beside the spread: dividing by the slice's fixed size instead of the
    # drawn count would widen the interval several times
    d_all = rng.normal(0.3, 0.1, n) * (rng.random(n) < 0.8)
    where = np.sort(rng.choice(n, 1_500, replace=False))
    d = d_all[where]
    alone = np.array([bootstrap_ci(d, 0.95, resamples, s) for s in range(seeds)])
    domain = np.array(
        [domain_bootstrap_cis(n, [where], [d], [0.95], resamples, s)[0] for s in range(seeds)]
    )
    error = np.sqrt(alone.var(axis=0, ddof=1) / seeds + domain.var(axis=0, ddof=1) / seeds)
    assert np.all(np.abs(domain.mean(axis=0) - alone.mean(axis=0)) < 4 * error)
    # a 2.5 % percentile's Monte-Carlo error: sqrt(p(1-p)/R) / density there (normal means)
    se = d.std(ddof=1) / np.sqrt(len(d))
    expected = np.sqrt(0.025 * 0.975 / resamples) / (np.exp(-(1.96**2) / 2) / np.sqrt(2 * np.pi))
    assert domain.std(axis=0, ddof=1) == pytest.approx([expected * se] * 2, rel=0.5)
