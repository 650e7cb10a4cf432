"""A system's outputs come in (``import``) and runs go out (``export``): an exported run
imported under another name is the same run, metric for metric, and a TREC export re-scored
by pytrec_eval gives the stored ranking metrics."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import SHIPPED, assert_one_line_error, require
from rag_bench.runs import open_runs

pytestmark = pytest.mark.slow  # full-dataset runs exported and imported


# a full run each; the fused and reranked one in the slow tier
@pytest.fixture(
    scope="module", params=["baseline", pytest.param("hybrid_rerank", marks=pytest.mark.slow)]
)
def stored(request, tmp_path_factory, index_cache):
    """A run on the shipped dataset: BM25 scores with ties (50 queries), or fused and reranked
    ones."""
    from rag_bench.experiment.runner import run_variant

    runs = tmp_path_factory.mktemp("runs")
    result = run_variant(request.param, SHIPPED, runs_dir=runs, cache_dir=index_cache)
    return runs, result.run_id


def _table(runs, ref: str, table: str) -> pd.DataFrame:
    store = open_runs(runs)
    return store.table(table, [store.get(ref).run_id]).drop(columns=["variant"])


def assert_same_values(first: pd.DataFrame, second: pd.DataFrame) -> None:
    """Every (query, metric) of two metrics tables, and the same value (NULL where NULL)."""
    paired = first.merge(second, on=["query_id", "metric"], suffixes=("_a", "_b"))
    assert len(paired) == len(first) == len(second)
    a, b = paired["value_a"].to_numpy(), paired["value_b"].to_numpy()
    assert np.array_equal(np.isnan(a), np.isnan(b))
    assert np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)])


def test_export_then_import_is_the_same_run(stored, rag_bench, tmp_path):
    runs, run_id = stored
    outputs = tmp_path / "outputs.jsonl"
    out = rag_bench("export", run_id, "--format", "jsonl", "-o", outputs, "--runs-dir", runs)
    assert out.exit_code == 0, out.stderr
    first = json.loads(outputs.read_text().splitlines()[0])
    assert {"query_id", "retrieved", "answer", "context_k"} <= set(first)
    out = rag_bench("import", outputs, "--name", "my-system", "--runs-dir", runs, "--format", "csv")
    assert out.exit_code == 0, out.stderr
    assert_same_values(*(_table(runs, ref, "metrics") for ref in (run_id, "latest:my-system")))
    queries = [
        _table(runs, ref, "queries").set_index("query_id") for ref in (run_id, "latest:my-system")
    ]
    assert queries[0]["failure_class"].equals(queries[1]["failure_class"])
    compared = rag_bench(
        "compare", run_id, "latest:my-system", "--runs-dir", runs, "--format", "json",
        "--resamples", "200",
    )  # fmt: skip
    rows = (
        json.loads(compared.stdout)["rows"]
        if compared.stdout.lstrip().startswith("{")
        else json.loads(compared.stdout)
    )
    assert rows and all(r["delta"] == 0 for r in rows if r["delta"] is not None)
    assert {r["n"] for r in rows if r["slice"] == "all" and r["metric"] == "recall@10"} == {235}


def test_trec_export_rescored_by_pytrec_eval_gives_the_stored_metrics(stored, rag_bench, tmp_path):
    pytrec_eval = require("pytrec_eval")
    runs, run_id = stored
    out = rag_bench("export", run_id, "--runs-dir", runs)
    assert out.exit_code == 0, out.stderr
    run: dict[str, dict[str, float]] = {}
    for line in out.stdout.splitlines():
        query, _, doc, _, score, _ = line.split()
        run.setdefault(query, {})[doc] = float(score)
    # trec_eval's order (score descending, then doc id descending) is the stored order
    documents = _table(runs, run_id, "retrieved").query("stage == 'documents'")
    for query, ranked in documents.sort_values("rank").groupby("query_id"):
        trec_order = sorted(run[query], key=lambda d: (run[query][d], d), reverse=True)
        assert trec_order == list(ranked["doc_id"]), query
    qrels: dict[str, dict[str, int]] = {}
    for line in (SHIPPED / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query, doc, grade = line.split("\t")
        qrels.setdefault(query, {})[doc] = int(grade)
    qrels = {q: d for q, d in qrels.items() if q in run}
    scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_100", "recip_rank"})
    found = scores.evaluate(run)
    metrics = _table(runs, run_id, "metrics").set_index(["query_id", "metric"])["value"]
    names = {"ndcg_cut_10": "ndcg@10", "recall_100": "recall@100", "recip_rank": "mrr"}
    compared = 0
    for query, values in found.items():
        for theirs, ours in names.items():
            stored_value = metrics[(query, ours)]
            if np.isnan(stored_value):  # unanswerable: undefined in a pipeline run, not 0
                continue
            assert values[theirs] == pytest.approx(stored_value, abs=1e-9), (query, ours)
            compared += 1
    assert compared == 3 * 235


def test_strictly_decreasing_keeps_the_order_of_ties():
    from rag_bench.analysis.export import strictly_decreasing

    scores = strictly_decreasing([3.0, 3.0, 3.0, 5.0, 1.0])
    assert all(a > b for a, b in zip(scores, scores[1:]))
    assert scores[0] == 3.0 and scores[-1] == 1.0


@pytest.mark.parametrize(
    "line, fragments",
    [
        ('{"query_id": "nope", "retrieved": [], "answer": "x"}', ["outputs.jsonl:1", "'nope'"]),
        ('{"query_id": "q-nas-001", "retrieved": ["ghost"], "answer": "x"}', ["ghost", "corpus"]),
        ('{"query_id": "q-nas-001", "answer": "x"}', ["missing field 'retrieved'"]),
        ('{"query_id": "q-nas-001", "retrieved": [1.5], "answer": "x"}', ["retrieved item"]),
    ],
)
def test_bad_outputs_are_one_line_naming_file_and_line(tmp_path, rag_bench, line, fragments):
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(line + "\n")
    runs = tmp_path / "runs"
    out = rag_bench("import", outputs, "--name", "x", "--runs-dir", runs)
    assert_one_line_error(out, *fragments)
    assert not runs.exists() or not any((runs / "_manifests").glob("*.json"))


def test_a_query_answered_twice_is_refused(tmp_path, rag_bench):
    outputs = tmp_path / "outputs.jsonl"
    record = '{"query_id": "q-nas-001", "retrieved": ["nas-001"], "answer": "x"}\n'
    outputs.write_text(record * 2)
    out = rag_bench("import", outputs, "--name", "x", "--runs-dir", tmp_path / "runs")
    assert_one_line_error(out, "outputs.jsonl:2", "second record", "first on line 1")


def test_a_hand_written_csv_import_reports_the_queries_it_lacks(tmp_path, rag_bench):
    outputs = tmp_path / "outputs.csv"
    outputs.write_text(
        "query_id,retrieved,answer,latency_ms,cost_usd\n"
        'q-nas-001,nas-001;nas-002,"The Kestrel NAS-200 costs US$299 [nas-001].",800,0.002\n'
        'q-nas-002,"[""nas-002""]",I do not know.,1200,0.001\n'
    )
    runs = tmp_path / "runs"
    out = rag_bench("import", outputs, "--name", "csv-system", "--runs-dir", runs)
    assert out.exit_code == 0, out.stderr
    assert "273 evaluated queries have no record" in out.stderr
    queries = _table(runs, "latest:csv-system", "queries")
    assert sorted(queries["query_id"]) == ["q-nas-001", "q-nas-002"]
    manifest = open_runs(runs).get("latest:csv-system").manifest
    assert manifest["outputs"]["n_records"] == 2 and len(manifest["outputs"]["missing"]) == 273
    assert manifest["outputs"]["latency_ms_mean"] == 1000.0
    assert manifest["outputs"]["cost_usd_total"] == 0.003
    assert (
        manifest["dataset"]["sha256"] == open_runs(runs).get("latest").manifest["dataset"]["sha256"]
    )


def test_evaluate_outputs_gives_the_tables_of_an_import_and_stores_nothing(
    stored, tmp_path, rag_bench
):
    """The notebook path: records (here a DataFrame) in, the same tables as an import out."""
    from rag_bench.experiment.importer import evaluate_outputs

    runs, run_id = stored
    outputs = tmp_path / "outputs.jsonl"
    out = rag_bench("export", run_id, "--format", "jsonl", "-o", outputs, "--runs-dir", runs)
    assert out.exit_code == 0, out.stderr
    frame = pd.read_json(outputs, lines=True)
    before = sorted(p.name for p in runs.rglob("*"))
    tables = evaluate_outputs(SHIPPED, frame)
    assert sorted(p.name for p in runs.rglob("*")) == before
    stored_metrics = _table(runs, run_id, "metrics")
    paired = stored_metrics.merge(
        tables["metrics"], on=["query_id", "metric"], suffixes=("_a", "_b")
    )
    assert len(paired) == len(stored_metrics)
    a, b = paired["value_a"].to_numpy(), paired["value_b"].to_numpy()
    assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(
        a[~np.isnan(a)], b[~np.isnan(b)]
    )
    assert set(tables) == {"queries", "metrics", "retrieved", "claims"}


def test_evaluate_outputs_names_the_row_of_a_bad_record():
    from rag_bench.errors import DataError
    from rag_bench.experiment.importer import evaluate_outputs

    records = [{"query_id": "q-nas-001", "retrieved": ["nas-001"], "answer": "x"}, {"answer": "y"}]
    with pytest.raises(DataError, match="<records>:2: missing field 'query_id'"):
        evaluate_outputs(SHIPPED, records)


def test_assert_no_regression_passes_and_fails_with_a_readable_message(stored):
    from runs_helpers import copy_run, locate, read_table, write_table

    from rag_bench.testing import assert_no_regression

    runs, run_id = stored
    same = copy_run(locate(runs, run_id), runs, "29990101-000000-same-cafe")
    assert_no_regression(same.run_id, run_id, {"recall@10": 0.0}, runs_dir=runs)
    worse = copy_run(locate(runs, run_id), runs, "29990101-000000-worse-beef")
    frame = read_table(worse, "metrics")
    frame.loc[frame["metric"] == "recall@10", "value"] *= 0.5
    write_table(worse, "metrics", frame)
    with pytest.raises(AssertionError) as failure:
        assert_no_regression(worse.run_id, run_id, {"recall@10": 0.02}, runs_dir=runs)
    message = str(failure.value)
    assert message.startswith(f"{worse.run_id} regressed from {run_id}\ngate FAILED: 1 of 1")
    assert "\nrecall@10: fail, " in message and "worsened by" in message
