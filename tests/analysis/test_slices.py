"""One slicing rule: compare, diagnose, the report and `rag-bench show` put queries in the same
slices (by hand on a small frame, then on the seed example's stored runs)."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import ROOT
from rag_bench.analysis.compare import compare
from rag_bench.analysis.diagnose import diagnose_run
from rag_bench.analysis.slices import query_slices, slice_names, sliced_rows
from rag_bench.errors import UnknownNameError
from rag_bench.experiment.runner import run_variant
from rag_bench.report.data import report_data
from rag_bench.runs import open_runs

SEED = ROOT / "data" / "seed-example"
QUERIES = pd.DataFrame(
    {
        "run_id": ["a", "a", "a", "b"],
        "query_id": ["q1", "q2", "q3", "q4"],
        "category": ["literal", "multi-hop", "literal", "paraphrase"],
        "tags": [["smoke", "api"], [], None, ["smoke"]],
        "failure_class": ["ok", "retrieval_miss", "ok", "ok"],
    }
)


def test_the_rule_by_hand():
    assert query_slices(QUERIES, "tag", ["a", "b"]) == {
        "q1": ["smoke", "api"],
        "q2": ["untagged"],
        "q3": ["untagged"],
        "q4": ["smoke"],
    }
    labels = query_slices(QUERIES, "category", ["a", "b"])
    assert slice_names(labels) == ["all", "literal", "paraphrase", "multi-hop"]
    assert query_slices(QUERIES, None, ["a"]) == {}
    rows = sliced_rows(QUERIES, query_slices(QUERIES, "tag", ["a", "b"]))
    assert rows.groupby("slice", sort=False)["query_id"].apply(list).to_dict() == {
        "all": ["q1", "q2", "q3", "q4"],
        "api": ["q1"],
        "smoke": ["q1", "q4"],
        "untagged": ["q2", "q3"],
    }
    with pytest.raises(UnknownNameError, match="did you mean 'tag'"):
        query_slices(QUERIES, "tags", ["a"])
    with pytest.raises(UnknownNameError):
        query_slices(QUERIES, "none", ["a"])  # the library's "no slices" is None


@pytest.fixture(scope="module")
def seed_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    a = run_variant("recorded", SEED, runs_dir=folder, ks=(2, 3))
    b = run_variant("recorded", SEED, runs_dir=folder, ks=(2, 3), overrides=["judge.name=lexical"])
    return open_runs(folder), a.run_id, b.run_id


@pytest.mark.parametrize("slice_by", ["category", "tag", "failure_class", None])
def test_every_view_shows_the_same_slices(seed_runs, slice_by):
    store, a, b = seed_runs
    compared = set(compare(store, [a, b], slice_by=slice_by, resamples=20).rows["slice"])
    diagnosed = set(diagnose_run(store, store.get(b), store.get(a), slice_by)["slice"])
    reported = report_data(store, [a, b], slice_by=slice_by, metric="ndcg@3", resamples=20)
    assert compared == diagnosed == set(reported.means["slice"]) == set(reported.failures["slice"])
    if slice_by == "tag":  # the seed example's queries carry no tag
        assert compared == {"all", "untagged"}
    if slice_by is None:
        assert compared == {"all"}


def test_failure_class_slices_come_from_the_baseline_in_every_view(tmp_path):
    """Two runs whose queries fail differently: every view slices both by the baseline's
    failure classes ("where the baseline failed, did the candidate fix it?")."""
    from conftest import SHIPPED
    from rag_bench.data.selection import Selection

    smoke = Selection(tag="smoke")
    a = run_variant("baseline", SHIPPED, runs_dir=tmp_path, selection=smoke).run_id
    b = run_variant("hybrid_rerank", SHIPPED, runs_dir=tmp_path, selection=smoke).run_id
    store = open_runs(tmp_path)
    classes = {r: set(store.queries([r])["failure_class"]) for r in (a, b)}
    assert classes[a] != classes[b]  # else the test could not tell whose classes are used
    compared = set(compare(store, [a, b], slice_by="failure_class", resamples=20).rows["slice"])
    diagnosed = set(diagnose_run(store, store.get(b), store.get(a), "failure_class")["slice"])
    reported = report_data(store, [a, b], slice_by="failure_class", resamples=20)
    assert compared == diagnosed == set(reported.diagnosis["slice"]) == {"all", *classes[a]}
