"""`rag-bench run`: the run folder, determinism, selections, and the variants' real behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from runs_helpers import committed_ids, manifest_file, read_table

from conftest import SHIPPED, assert_one_line_error
from rag_bench.experiment.runner import DEFAULT_KS, Selection, run_variant
from rag_bench.experiment.traces import ranking_measures
from rag_bench.runs import TABLES


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory, index_cache):
    runs = tmp_path_factory.mktemp("runs")
    return {
        v: run_variant(
            v, SHIPPED, selection=Selection(tag="smoke"), runs_dir=runs, cache_dir=index_cache
        )
        for v in ("baseline", "hybrid", "hybrid_rerank", "recorded")
    }


def test_run_has_a_manifest_and_a_partition_of_every_table(smoke_runs):
    result = smoke_runs["hybrid_rerank"]
    runs, run_id = Path(result.location.runs.root), result.run_id
    for table in TABLES:
        partition = runs / table / "variant=hybrid_rerank" / f"run_id={run_id}"
        assert [p.name for p in partition.iterdir()] == ["part-0.parquet"]
    manifest = json.loads((runs / "_manifests" / f"{run_id}.json").read_text())
    assert manifest["run_id"] == result.run_id and manifest["schema_version"] == 2
    assert manifest["variant"] == "hybrid_rerank" and manifest["status"] == "complete"
    assert manifest["params"]["reranker"]["name"] == "ltr"
    assert manifest["dataset"]["name"] == "kestrel-kb" and len(manifest["dataset"]["sha256"]) == 64
    assert manifest["selection"]["tag"] == "smoke" and manifest["dataset"]["n_queries"] == 30
    for table in TABLES:
        frame = read_table(result.location, table)
        assert set(frame["run_id"]) <= {result.run_id}
        assert "run_id" not in pq.read_schema(result.location.table_file(table)).names


def test_every_query_metric_pair_is_stored_and_undefined_is_null(smoke_runs):
    metrics = smoke_runs["baseline"].metrics
    per_query = metrics.groupby("query_id")["metric"].count()
    assert per_query.nunique() == 1  # dense: every query has every metric
    ranking = metrics[metrics["metric"].isin([str(m) for m in ranking_measures(DEFAULT_KS)])]
    refuse = ranking[ranking["category"] == "unanswerable"]
    assert len(refuse) and refuse["value"].isna().all() and (refuse["status"] == "undefined").all()
    assert ranking[ranking["category"] != "unanswerable"]["value"].notna().all()
    wide = metrics.pivot(index="query_id", columns="metric", values="value")
    unanswerable = set(metrics.loc[metrics["category"] == "unanswerable", "query_id"])
    is_unanswerable = wide.index.isin(unanswerable)
    assert wide.loc[is_unanswerable, "correct_refusal"].notna().all()
    assert wide.loc[is_unanswerable, "over_refusal"].isna().all()
    assert wide.loc[~is_unanswerable, "over_refusal"].notna().all()
    assert (metrics["status"] == "undefined").equals(metrics["value"].isna())


def test_retrieved_keeps_chunk_stages_and_the_document_ranking(smoke_runs):
    retrieved = smoke_runs["hybrid_rerank"].tables["retrieved"]
    assert set(retrieved["stage"]) == {"bm25", "dense", "fusion", "rerank", "documents"}
    docs = retrieved[retrieved["stage"] == "documents"]
    assert not docs.duplicated(["query_id", "doc_id"]).any()
    chunks = retrieved[retrieved["stage"] == "bm25"]
    assert chunks["chunk_id"].str.contains("#").all()


def test_same_command_gives_identical_traces(smoke_runs, tmp_path):
    again = run_variant(  # in a cache of its own: indexes built afresh
        "hybrid_rerank", SHIPPED, selection=Selection(tag="smoke"), runs_dir=tmp_path
    )
    first = smoke_runs["hybrid_rerank"]
    for table in ("metrics", "retrieved", "claims"):
        a = first.tables[table].drop(columns="run_id")
        b = again.tables[table].drop(columns="run_id")
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    keep = ["query_id", "answer", "refused"]
    pd.testing.assert_frame_equal(first.queries[keep], again.queries[keep])


def test_sample_is_seeded_and_recorded(tmp_path):
    a = run_variant("baseline", SHIPPED, selection=Selection(sample=12, seed=3), runs_dir=tmp_path)
    b = run_variant("baseline", SHIPPED, selection=Selection(sample=12, seed=3), runs_dir=tmp_path)
    c = run_variant("baseline", SHIPPED, selection=Selection(sample=12, seed=4), runs_dir=tmp_path)
    assert a.manifest["selection"]["query_ids"] == b.manifest["selection"]["query_ids"]
    assert a.manifest["selection"]["query_ids"] != c.manifest["selection"]["query_ids"]
    assert len(a.queries) == 12 and a.run_id != b.run_id


def test_recorded_variant_replays_answers(smoke_runs):
    """Every query of the run (every smoke query with a recorded answer) has its recorded answer
    and its recorded ranking, deduplicated, as the stored document ranking: all rows, not one."""
    from rag_bench.data.dataset import load_dataset

    data = load_dataset(SHIPPED)
    recorded = smoke_runs["recorded"].queries.set_index("query_id")
    smoke = {q for q, query in data.queries.items() if "smoke" in query.tags}
    assert len(recorded) > 1 and set(recorded.index) == smoke & set(data.answers)
    assert recorded["answer"].to_dict() == {q: data.answers[q].answer for q in recorded.index}
    docs = smoke_runs["recorded"].tables["retrieved"]
    docs = docs[docs["stage"] == "documents"].sort_values(["query_id", "rank"])
    replayed = docs.groupby("query_id")["doc_id"].agg(list).to_dict()
    assert replayed == {q: list(dict.fromkeys(data.answers[q].ranking)) for q in recorded.index}


def test_cli_run_prints_summary_and_stores(rag_bench, tmp_path):
    out = rag_bench(
        "run",
        "--variant",
        "baseline,hybrid",
        "--tag",
        "smoke",
        "--runs-dir",
        tmp_path,
        "--format",
        "csv",
    )
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == (
        "category,variant,n,recall@10,mrr@10,ndcg@10,faithfulness,citation_precision,key_fact_recall,"
        "correct_refusal,over_refusal"
    )
    assert {line.split(",")[0] for line in lines[1:]} == {
        "literal",
        "paraphrase",
        "multi-hop",
        "unanswerable",
        "all",
    }
    assert len(committed_ids(tmp_path)) == 2
    assert out.stderr.count("stored run") == 2


def test_cli_run_takes_a_shipped_dataset_by_name_from_any_folder(rag_bench, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ("--dataset", "seed-example", "--k", "2,3", "--runs-dir", tmp_path / "runs")
    out = rag_bench("run", "--variant", "recorded", *args, "--format", "json")
    assert out.exit_code == 0, out.stderr
    [run_id] = committed_ids(tmp_path / "runs")
    manifest = json.loads(manifest_file(tmp_path / "runs", run_id).read_text())
    assert manifest["dataset"]["name"] == "seed-example"
    assert Path(manifest["dataset"]["path"]) == SHIPPED.parent / "seed-example"


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--k", "0,5"], ["--k 0 is out of range"]),
        (["--k", "five"], ["whole numbers"]),
        (["--tag", "nightly"], ["'nightly'", "smoke"]),
        (["--sample", "0"], ["--sample 0"]),
        (["--depth", "5"], ["--depth 5", "largest cutoff 100"]),
        (["--dataset", "/nonexistent"], ["no such dataset folder"]),
    ],
)
def test_bad_run_options(rag_bench, tmp_path, args, fragments):
    out = rag_bench("run", "--variant", "baseline", "--runs-dir", tmp_path / "runs", *args)
    assert_one_line_error(out, *fragments)
    assert not (tmp_path / "runs").exists() or not [
        p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")
    ]


def test_progress_off_a_terminal_is_a_line_now_and_then(rag_bench, tmp_path, monkeypatch):
    """CI logs see the run advance (one line per interval) instead of minutes of silence."""
    from rag_bench.cli import options

    monkeypatch.setattr(options, "PROGRESS_EVERY_S", 0.0)
    out = rag_bench(
        "run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", tmp_path, "--format", "csv"
    )
    assert out.exit_code == 0, out.stderr
    assert "rag-bench: baseline: 1/1 blocks answered" in out.stderr
