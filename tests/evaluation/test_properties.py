"""Properties of the ranking metrics and the run store, checked on generated inputs (hypothesis).

- every metric lies in [0, 1];
- renaming documents consistently in run and qrels (keeping their order, which breaks ties),
  renaming queries, and reordering the lines of either file change nothing;
- the ideal ranking scores 1 on ndcg, recall@k for k ≥ R, mrr, map, R-precision and P@R;
- ties are broken exactly as trec_eval does (score descending, then doc id descending);
- per-query agreement with pytrec_eval (trec_eval itself) on random small runs;
- the store round trip write → read → DuckDB view keeps every value: unicode ids and texts,
  NULLs, empty lists, infinities (a NaN is stored as NULL, the store's one "undefined").
"""

from __future__ import annotations

import json
import math
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runs_helpers import read_table

from conftest import require
from rag_bench import Qrels, Run, evaluate_run
from rag_bench.runs import TABLES, open_runs
from rag_bench.runs.catalog import read_manifest
from rag_bench.runs.layout import schema

CUTOFFS = (1, 2, 3, 5, 10)
FAMILIES = ("precision", "recall", "hit", "mrr", "ndcg", "ndcg_exp", "map")
METRICS = [f"{f}@{k}" for f in FAMILIES for k in CUTOFFS] + ["mrr", "map", "rprec", "ndcg"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ascii_ids = st.text("abcdefghij0123456789", min_size=1, max_size=3)
unicode_ids = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), min_size=1, max_size=5
)
scores = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.25])  # few values: many ties


@st.composite
def judged_runs(draw, ids=ascii_ids):
    """qrels ``{q: {d: grade}}`` and a run ``{q: {d: score}}`` over a small document pool."""
    docs = draw(st.lists(ids, min_size=1, max_size=10, unique=True))
    queries = draw(st.lists(ids, min_size=1, max_size=4, unique=True))
    qrels, run = {}, {}
    for query in queries:
        judged = draw(st.lists(st.sampled_from(docs), min_size=1, max_size=len(docs), unique=True))
        qrels[query] = {d: draw(st.integers(0, 3)) for d in judged}
        if draw(st.booleans()) or not run:
            retrieved = draw(
                st.lists(st.sampled_from(docs), min_size=1, max_size=len(docs), unique=True)
            )
            run[query] = {d: draw(scores) for d in retrieved}
    return qrels, run


def values(qrels, run, metrics=METRICS) -> dict[tuple[str, str], float]:
    result = evaluate_run(Qrels.from_dict(qrels), Run.from_scores(run), metrics)
    frame = result.per_query
    return dict(zip(zip(frame["query_id"].astype(str), frame["metric"]), frame["value"]))


@SETTINGS
@given(judged_runs())
def test_every_metric_is_within_0_and_1(case):
    for key, value in values(*case).items():
        assert 0.0 <= value <= 1.0 + 1e-12, key


def _rename(mapping: dict[str, str], qrels, run, queries: dict[str, str] | None = None):
    queries = queries or {}

    def q(x):
        return queries.get(x, x)

    return (
        {q(x): {mapping[d]: g for d, g in docs.items()} for x, docs in qrels.items()},
        {q(x): {mapping[d]: s for d, s in docs.items()} for x, docs in run.items()},
    )


@pytest.mark.slow
@SETTINGS
@given(judged_runs(), st.randoms(use_true_random=False), st.data())
def test_renaming_documents_and_queries_changes_nothing(case, rnd, data):
    qrels, run = case
    docs = sorted({d for x in (qrels, run) for ds in x.values() for d in ds})
    # new names, possibly unicode, in the same order as the old ones: ties break the same way
    fresh = sorted(data.draw(st.lists(unicode_ids, min_size=len(docs), max_size=len(docs),
                                      unique=True)))  # fmt: skip
    new_docs = dict(zip(docs, fresh))
    old_queries = list(qrels)
    new_names = data.draw(
        st.lists(unicode_ids, min_size=len(old_queries), max_size=len(old_queries), unique=True)
    )
    new_queries = dict(zip(old_queries, new_names))
    before = values(qrels, run)
    after = values(*_rename(new_docs, qrels, run, new_queries))
    assert after == {(new_queries[q], m): v for (q, m), v in before.items()}
    # with distinct scores, any renaming (order included) changes nothing
    distinct = {x: {d: float(i) for i, d in enumerate(ds)} for x, ds in run.items()}
    shuffled = fresh[:]
    rnd.shuffle(shuffled)
    assert values(*_rename(dict(zip(docs, shuffled)), qrels, distinct)) == values(qrels, distinct)


@pytest.mark.slow
@SETTINGS
@given(judged_runs(), st.randoms(use_true_random=False))
def test_reordering_lines_and_queries_changes_nothing(case, rnd):
    qrels, run = case
    before = values(qrels, run)

    def shuffled_frame(frame):
        order = list(range(len(frame)))
        rnd.shuffle(order)
        return frame.iloc[order].reset_index(drop=True)

    q = Qrels.from_dict(qrels)
    r = Run.from_scores(run)
    qrels_lines = Qrels._from_frame(shuffled_frame(q.frame))
    run_lines = Run(shuffled_frame(r.frame), ordered=False)
    result = evaluate_run(qrels_lines, run_lines, METRICS).per_query
    after = dict(zip(zip(result["query_id"].astype(str), result["metric"]), result["value"]))
    assert after == before


@SETTINGS
@given(judged_runs())
def test_the_ideal_ranking_scores_1(case):
    qrels, _ = case
    ideal = {}
    for query, grades in qrels.items():
        ranked = sorted(grades, key=lambda d: -grades[d])  # every judged doc, best grade first
        ideal[query] = {d: float(len(ranked) - i) for i, d in enumerate(ranked)}
    got = values(qrels, ideal)
    for query, grades in qrels.items():
        n_relevant = sum(g >= 1 for g in grades.values())
        if not n_relevant:
            continue
        ones = ["mrr", "map", "ndcg", "rprec"]
        ones += [f"precision@{n_relevant}"] if n_relevant in CUTOFFS else []
        ones += [f"ndcg@{k}" for k in CUTOFFS] + [f"ndcg_exp@{k}" for k in CUTOFFS]
        ones += [f"recall@{k}" for k in CUTOFFS if k >= n_relevant]
        ones += [f"hit@{k}" for k in CUTOFFS] + [f"mrr@{k}" for k in CUTOFFS]
        ones += [f"map@{k}" for k in CUTOFFS if k >= n_relevant]
        for metric in ones:
            assert got[(query, metric)] == pytest.approx(1.0, abs=1e-12), (query, metric)


@pytest.mark.slow
@SETTINGS
@given(judged_runs(), st.randoms(use_true_random=False))
def test_ties_are_broken_by_doc_id_descending_and_nothing_else(case, rnd):
    qrels, run = case
    # the order in which tied documents are listed does not matter ...
    listed = {}
    for query, docs in run.items():
        items = list(docs.items())
        rnd.shuffle(items)
        listed[query] = dict(items)
    assert values(qrels, listed) == values(qrels, run)
    # ... because the ranking is score descending, ties by doc id descending: scoring that
    # explicit ranking (a pipeline's own order) gives the same values
    explicit = {
        q: [d for d, _ in sorted(docs.items(), key=lambda it: (it[1], it[0]), reverse=True)]
        for q, docs in run.items()
    }
    result = evaluate_run(Qrels.from_dict(qrels), Run.from_rankings(explicit), METRICS)
    frame = result.per_query
    ordered = dict(zip(zip(frame["query_id"].astype(str), frame["metric"]), frame["value"]))
    assert ordered == values(qrels, run)


pytrec_eval = require("pytrec_eval")
TREC = {
    "precision": "P",
    "recall": "recall",
    "hit": "success",
    "ndcg": "ndcg_cut",
    "map": "map_cut",
}


@SETTINGS
@given(judged_runs())
def test_agrees_with_pytrec_eval(case):
    qrels, run = case
    cut = ",".join(map(str, CUTOFFS))
    measures = {f"{name}.{cut}" for name in TREC.values()} | {"recip_rank", "map", "ndcg", "Rprec"}
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    ours = values(qrels, run)
    names = {f"{f}@{k}": f"{TREC[f]}_{k}" for f in TREC for k in CUTOFFS}
    names.update(mrr="recip_rank", map="map", ndcg="ndcg", rprec="Rprec")
    assert {q for q, _ in ours} == set(reference)
    for query, row in reference.items():
        for metric, name in names.items():
            assert ours[(query, metric)] == pytest.approx(row[name], abs=1e-9), (query, metric)


# --- the store round trip -------------------------------------------------------------------------

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
maybe = st.none() | texts
floats = st.none() | st.floats(allow_nan=True, allow_infinity=True)
text_lists = st.lists(texts, max_size=3)


def _rows(draw, run_id: str, n: int, columns: dict) -> pd.DataFrame:
    rows = [{"run_id": run_id, **{k: draw(v) for k, v in columns.items()}} for _ in range(n)]
    return pd.DataFrame(rows, columns=["run_id", *columns])


@st.composite
def trace_tables(draw, run_id: str):
    def n():
        return draw(st.integers(0, 4))

    latency = {
        f"latency_ms_{s}": floats
        for s in ("retrieve", "fusion", "rerank", "generate", "judge", "total")
    }
    return {
        "queries": _rows(draw, run_id, n(), {
            "query_id": texts, "category": maybe, "tags": text_lists,
            "should_refuse": st.booleans(), "query": texts, "answer": maybe,
            "refused": st.none() | st.booleans(), "failure_class": maybe,
            "failure_stage": maybe, "failure_fix": maybe,
            "n_relevant": st.integers(0, 2**40), **latency,
        }),
        "metrics": _rows(draw, run_id, n(), {
            "query_id": texts, "category": maybe, "metric": texts, "value": floats,
            "status": st.sampled_from(["ok", "undefined"]),
        }),
        "retrieved": _rows(draw, run_id, n(), {
            "query_id": texts, "stage": texts, "rank": st.integers(1, 2**31 - 1),
            "chunk_id": texts, "doc_id": texts, "score": floats,
            "relevance": st.none() | st.integers(-(2**31), 2**31 - 1),
        }),
        "claims": _rows(draw, run_id, n(), {
            "query_id": texts, "claim_id": st.integers(0, 2**31 - 1), "text": texts,
            "citations": text_lists, "supported": st.none() | st.booleans(),
            "support_grade": st.none() | st.integers(0, 2), "supported_by": text_lists,
            "judge": texts, "reason": maybe,
        }),
    }  # fmt: skip


def _cell(value):
    """A cell as plain Python, every kind of missing as None."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_cell(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    return value


def _plain(frame: pd.DataFrame, columns) -> list[tuple]:
    return [tuple(_cell(v) for v in row) for row in frame[list(columns)].itertuples(index=False)]


RUN_ID = "20260101-000000-prop-ü✓-0001"


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace_tables(RUN_ID), st.dictionaries(texts, maybe | st.integers(), max_size=3))
def test_store_round_trip_keeps_every_value(tables, extra):
    manifest = {
        "run_id": RUN_ID,
        "schema_version": 1,
        "variant": "prop ü✓",
        "created_at": datetime(2026, 1, 1, tzinfo=timezone.utc).isoformat(),
        "dataset": {"name": "données", "sha256": "0" * 64, "n_queries": 1},
        "extra": extra,
    }
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        store = open_runs(runs)
        path = store.write_run(RUN_ID, manifest, tables).location
        assert read_manifest(path) == json.loads(json.dumps(manifest))
        assert not store.broken and [r.run_id for r in store.list()] == [RUN_ID]
        con = store.connect()
        for table in TABLES:
            columns = schema(table).names
            written = tables[table]
            if "repeat" in columns and "repeat" not in written:  # a run answered once: repeat 0
                written = written.assign(repeat=0)
            expected = _plain(written, columns)
            assert _plain(read_table(path, table), columns) == expected, table
            viewed = con.sql(f"SELECT * FROM {table}").df()
            assert _plain(viewed, columns) == expected, table
            if table == "metrics" and len(expected):
                found = con.execute("SELECT count(*) FROM metrics WHERE value IS NULL")
                assert found.fetchall()[0][0] == sum(v[4] is None for v in expected)
        assert store.sql("SELECT variant FROM runs")["variant"].tolist() == ["prop ü✓"]
