"""A user's own RAG service as a variant (``http``), against a local fake service: answers and
documents read from configured fields, one request per query, retries, timeouts and malformed
replies."""

from __future__ import annotations

import pytest

from conftest import ROOT, assert_one_line_error
from rag_bench.runs import open_runs

SEED = ROOT / "data" / "seed-example"


@pytest.fixture
def service(fake, monkeypatch):
    monkeypatch.setenv("RAG_SYSTEM_URL", fake.url + "/ask")
    monkeypatch.setenv("RAG_SYSTEM_API_KEY", "sk-service-secret")
    return fake


def _run(rag_bench, runs, *extra):
    return rag_bench(
        "run", "--variant", "http", "--dataset", SEED, "--runs-dir", runs, "--k", "1,2,3",
        "--set", "generator.answer_field=result.answer",
        "--set", "retriever.answer_field=result.answer", *extra,
    )  # fmt: skip


def test_the_service_is_scored_like_a_pipeline(service, rag_bench, tmp_path):
    runs = tmp_path / "runs"
    out = _run(rag_bench, runs)
    assert out.exit_code == 0, out.stderr
    asked = [r for r in service.requests if r["path"].endswith("/ask")]
    assert sorted(r["body"]["query_id"] for r in asked) == ["q1", "q2"]  # one request per query
    assert all(r["headers"]["authorization"] == "Bearer sk-service-secret" for r in asked)
    store = open_runs(runs)
    stored = store.get("latest")
    retrieved = store.retrieved(["latest"]).query("stage == 'documents'")
    assert list(retrieved.query("query_id == 'q2'")["doc_id"]) == ["d3", "d2"]
    queries = store.queries(["latest"]).set_index("query_id")
    assert queries.loc["q2", "answer"] == "Refunds take 3 to 5 working days [d3]."
    metrics = store.metrics(["latest"]).set_index(["query_id", "metric"])["value"]
    assert metrics[("q2", "recall@1")] == 1.0 and metrics[("q1", "recall@1")] == 0.5
    assert "sk-service-secret" not in str(stored.manifest)
    again = _run(rag_bench, runs)  # a rerun is answered from the reply cache
    assert again.exit_code == 0 and len(service.requests) == len(asked)


def test_a_failing_then_recovering_service_is_retried(service, rag_bench, tmp_path):
    service.script = [503, 500]
    out = _run(rag_bench, tmp_path / "runs", "--set", "retriever.concurrency=1")
    assert out.exit_code == 0, out.stderr
    assert len([r for r in service.requests if r["path"].endswith("/ask")]) == 4


def test_a_slow_service_times_out_in_one_line(service, rag_bench, tmp_path):
    service.script = [("sleep", 1.5)] * 4
    out = _run(
        rag_bench, tmp_path / "runs", "--set", "retriever.timeout=0.3",
        "--set", "retriever.max_retries=1", "--set", "retriever.concurrency=1",
    )  # fmt: skip
    assert_one_line_error(out, "no reply within 0.3s", "max_retries")


def test_a_reply_without_the_configured_field_names_the_fix(service, rag_bench, tmp_path):
    service.system = lambda body: {"documents": ["d1"], "text": "no answer field"}
    out = _run(rag_bench, tmp_path / "runs")
    assert_one_line_error(out, "has no field 'result.answer'", "generator.answer_field")


def test_documents_that_are_not_a_list_are_refused(service, rag_bench, tmp_path):
    service.system = lambda body: {"documents": "d1", "result": {"answer": "x"}}
    out = _run(rag_bench, tmp_path / "runs")
    assert_one_line_error(out, "holds no list of documents", "retriever.documents_field")


def test_an_unset_url_says_which_variable_to_set(fake, rag_bench, tmp_path, monkeypatch):
    monkeypatch.delenv("RAG_SYSTEM_URL", raising=False)
    out = _run(rag_bench, tmp_path / "runs")
    assert_one_line_error(out, "$RAG_SYSTEM_URL is not set")


def test_variant_all_leaves_out_variants_that_call_a_service(rag_bench, tmp_path, monkeypatch):
    monkeypatch.delenv("RAG_SYSTEM_URL", raising=False)
    runs = tmp_path / "runs"
    out = rag_bench("run", "--variant", "all", "--dataset", SEED, "--k", "1,2", "--runs-dir", runs)
    assert out.exit_code == 0, out.stderr
    variants = {r.variant for r in open_runs(runs).list()}
    assert variants == {"baseline", "hybrid", "hybrid_rerank", "recorded"}
