"""compare's two families: the primary metric over all queries is confirmatory (Holm across the
compared runs, intervals at the simultaneous level), every other row exploratory (raw p,
Benjamini–Hochberg, 95 % intervals); each row says whether its interval and its test agree.
Adjustments checked against statsmodels; the gate's family is its gated metrics."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import assert_one_line_error, require
from rag_bench.analysis.compare import CONFIRMATORY, EXPLORATORY, compare, paired_table
from rag_bench.analysis.gate import gate
from rag_bench.analysis.pairing import Pair
from rag_bench.errors import UsageError
from rag_bench.evaluation.stats import bootstrap_ci, domain_bootstrap_cis


def synthetic_pairs() -> list[Pair]:
    """Three compared runs, two metrics, the overall slice and two halves of 300 queries."""
    rng = np.random.default_rng(11)
    n = 300
    halves = {"all": np.arange(n), "first": np.arange(150), "second": np.arange(150, n)}
    a = {m: rng.random(n) for m in ("ndcg@10", "recall@10")}
    pairs = []
    for run, shift in (("b", 0.04), ("c", 0.0), ("d", 0.015)):
        for metric in ("ndcg@10", "recall@10"):
            b = np.clip(a[metric] + rng.normal(shift, 0.2, n), 0, 1)
            for name, where in halves.items():
                pairs.append(
                    Pair(
                        name,
                        metric,
                        "a",
                        run,
                        a[metric][where],
                        b[where],
                        positions=where,
                        base_size=n,
                    )  # fmt: skip
                )
    return pairs


def test_the_families_and_their_adjustments_are_statsmodels():
    multipletests = require("statsmodels.stats.multitest").multipletests
    pairs = synthetic_pairs()
    alpha = 0.05
    table = paired_table(pairs, "randomization", alpha, 2_000, 0, ["ndcg@10"])
    confirmatory = (table["slice"] == "all") & (table["metric"] == "ndcg@10")
    assert list(table["family"]) == [CONFIRMATORY if c else EXPLORATORY for c in confirmatory]
    assert confirmatory.sum() == 3  # one per compared run
    first = table[confirmatory]
    others = table[~confirmatory]
    holm = multipletests(first["p_value"], method="holm")[1]
    bh = multipletests(others["p_value"], method="fdr_bh")[1]
    assert first["p_adjusted"].to_numpy() == pytest.approx(holm, abs=1e-12)
    assert others["p_adjusted"].to_numpy() == pytest.approx(bh, abs=1e-12)
    assert (table["significant"] == (table["p_adjusted"] < alpha)).all()
    # the confirmatory intervals at Bonferroni's simultaneous level, the others at 95 %
    assert (first["ci_level"] == 1 - alpha / 3).all() and (others["ci_level"] == 0.95).all()
    row = first.iloc[0]
    pair = pairs[first.index[0]]
    interval = bootstrap_ci(pair.differences, 1 - alpha / 3, 2_000, 0)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(interval, abs=1e-12)
    # ci_agrees: the interval excludes 0 exactly when the row's test rejects at that level
    excludes = (table["ci_low"] > 0) | (table["ci_high"] < 0)
    tested = np.where(confirmatory, table["p_adjusted"], table["p_value"]) < alpha
    assert (table["ci_agrees"] == (excludes == tested)).all()
    assert table["significant"].any() and not table["significant"].all()


def test_a_half_slice_is_drawn_from_the_same_resampling_as_the_whole():
    pairs = synthetic_pairs()
    table = paired_table(pairs, "randomization", 0.05, 1_000, 3, ["ndcg@10"])
    pair = pairs[1]  # run b, ndcg@10, first half
    (expected,) = domain_bootstrap_cis(
        pair.base_size, [pair.positions], [pair.differences], [0.95], 1_000, 3
    )
    assert (table.loc[1, "ci_low"], table.loc[1, "ci_high"]) == pytest.approx(expected, abs=1e-12)


def test_without_primary_the_table_is_one_holm_family():
    pairs = synthetic_pairs()
    table = paired_table(pairs, "randomization", 0.05, 500, 0)
    assert "family" not in table
    from rag_bench.evaluation.stats import holm

    assert table["p_adjusted"].to_numpy() == pytest.approx(holm(table["p_value"]))


def test_a_disagreement_between_interval_and_test_is_marked():
    """Four queries lose 0.25 each, 96 tie: the sign-flip test cannot reject (p = 2/16 at
    best) while the bootstrap interval of the 4 % losses excludes 0."""
    a = np.full(100, 0.5)
    b = a.copy()
    b[:4] = 0.25
    pairs = [Pair("all", "recall@10", "a", "b", a, b, positions=np.arange(100), base_size=100)]
    pairs.append(
        Pair("all", "ndcg@10", "a", "b", a, a + 0.1, positions=np.arange(100), base_size=100)
    )
    table = paired_table(pairs, "randomization", 0.05, 4_000, 0, ["ndcg@10"])
    row = table.iloc[0]
    assert row["family"] == EXPLORATORY and row["ci_high"] < 0 and row["p_value"] > 0.1
    assert not row["ci_agrees"] and not row["significant"]
    assert table.iloc[1]["ci_agrees"] and table.iloc[1]["significant"]


def test_compare_on_the_shipped_runs(shipped_runs, rag_bench):
    baseline, hybrid = shipped_runs("kestrel-kb")
    store = baseline.store
    refs = [baseline.run_id, hybrid.run_id]
    result = compare(store, refs, resamples=2_000)
    rows = result.rows
    assert result.primary == ["ndcg@10"]
    first = rows[rows["family"] == CONFIRMATORY]
    assert list(zip(first["slice"], first["metric"])) == [("all", "ndcg@10")]
    # a family of one: Holm leaves its p alone, and the interval is the 95 % one
    assert first["p_adjusted"].iloc[0] == first["p_value"].iloc[0]
    assert first["ci_level"].iloc[0] == 0.95
    other = compare(store, refs, resamples=2_000, primary=["recall@10", "mrr@10"])
    chosen = other.rows[other.rows["family"] == CONFIRMATORY]
    assert sorted(chosen["metric"]) == ["mrr@10", "recall@10"]
    assert (chosen["ci_level"] == 0.975).all()
    with pytest.raises(UsageError, match="not among the compared metrics"):
        compare(store, refs, metrics=["recall@10"], primary="ndcg@10")
    alone = compare(store, refs, metrics=["recall@10"], resamples=500)
    assert (alone.rows["family"] == EXPLORATORY).all()
    assert any("no confirmatory row" in w for w in alone.warnings)

    def cli(*args):
        return rag_bench("compare", *refs, "--runs-dir", store, "--resamples", "2000", *args)

    out = cli("--format", "json", "--primary", "recall@10")
    records = json.loads(out.stdout)
    assert {"family", "p_value", "p_adjusted", "ci_level", "ci_agrees"} <= set(records[0])
    assert {(r["metric"], r["slice"]) for r in records if r["family"] == CONFIRMATORY} == {
        ("recall@10", "all")
    }
    csv = pd.read_csv(pd.io.common.StringIO(cli("--format", "csv").stdout))
    assert set(csv["family"]) == {CONFIRMATORY, EXPLORATORY}
    table = cli("--metrics", "ndcg@10,recall@10")
    header = next(line for line in table.stdout.splitlines() if line.startswith("slice"))
    assert header.split()[:9] == [
        "slice",
        "metric",
        "family",
        "A",
        "B",
        "delta",
        "ci",
        "p",
        "p_adj",
    ]
    assert "confirm" in table.stdout and "explore" in table.stdout
    assert_one_line_error(cli("--primary", "map"), "primary metric map", "--metrics")


def test_the_gates_family_is_its_gated_metrics(shipped_runs):
    baseline, hybrid = shipped_runs("kestrel-kb")
    drops = {"recall@10": 0.01, "ndcg@10": 0.01, "mrr@10": 0.01}
    result = gate(baseline.store, hybrid.run_id, baseline.run_id, drops, resamples=2_000)
    from rag_bench.evaluation.stats import holm

    rows = result.rows
    assert rows["p_adjusted"].to_numpy() == pytest.approx(holm(rows["p_value"]), abs=1e-12)
