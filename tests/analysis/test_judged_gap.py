"""compare warns when the qrels see much more of one run's top 10 than of the other's."""

from __future__ import annotations

import pytest

from conftest import SHIPPED
from rag_bench.analysis import compare as comparing
from rag_bench.data.selection import Selection
from rag_bench.experiment.runner import run_variant


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, index_cache):
    runs = tmp_path_factory.mktemp("judged")
    smoke = Selection(tag="smoke")
    made = [
        run_variant(v, SHIPPED, selection=smoke, runs_dir=runs, cache_dir=index_cache)
        for v in ("baseline", "hybrid")
    ]
    return runs, made


def _judged_mean(result, shared):
    m = result.metrics
    values = m[(m["metric"] == "judged@10") & m["query_id"].isin(shared)]["value"].dropna()
    return values.mean()


def test_the_warning_names_both_runs_judged_shares(two_runs, monkeypatch):
    runs, (a, b) = two_runs
    shared = set(a.metrics["query_id"]) & set(b.metrics["query_id"])
    gap = abs(_judged_mean(a, shared) - _judged_mean(b, shared))
    assert gap > 0  # the hybrid's dense half brings documents BM25's pool did not judge
    monkeypatch.setattr(comparing, "JUDGED_GAP", gap / 2)
    found = comparing.compare(runs, [a.run_id, b.run_id], resamples=200).warnings
    assert len(found) == 1
    assert f"{_judged_mean(a, shared):.2f} for {a.run_id}" in found[0]
    assert f"{_judged_mean(b, shared):.2f} for {b.run_id}" in found[0]
    monkeypatch.setattr(comparing, "JUDGED_GAP", gap * 2)
    assert comparing.compare(runs, [a.run_id, b.run_id], resamples=200).warnings == []
