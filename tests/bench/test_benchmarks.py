"""The benchmarks' own machinery on tiny data: generators are deterministic and produce data
rag-bench reads, the tools compared compute the same answers, and the agreement measures mean
what they say. Nothing here times anything."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_end_to_end  # noqa: E402
import bench_refuse  # noqa: E402
import bench_retrieval  # noqa: E402
import bench_startup  # noqa: E402
import bench_store  # noqa: E402
import corpora  # noqa: E402

SMALL = corpora.Params(seed=3, docs=400, queries=30, mean_words=40, stems=2_000)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return corpora.ensure(SMALL, tmp_path_factory.mktemp("corpus"), quiet=True)


def test_corpus_is_deterministic_and_complete(corpus, tmp_path):
    again = corpora.ensure(SMALL, tmp_path / "again", quiet=True)
    for name in (corpora.DOCS_FILE, corpora.QUERIES_FILE):
        assert pq.read_table(corpus / name).equals(pq.read_table(again / name))
    docs = corpora.load_docs(corpus, ("id", "title", "text"))
    queries = corpora.load_queries(corpus)
    assert len(docs["id"]) == SMALL.docs == len(set(docs["id"]))
    assert len(queries["id"]) == SMALL.queries
    assert set(queries["source"]) <= set(docs["id"])
    assert all(text.endswith(".") and not text[0].islower() for text in docs["text"])
    assert set(queries["category"]) <= set(corpora.CATEGORIES)
    other = corpora.ensure(
        corpora.Params(**{**SMALL.__dict__, "seed": 4}), tmp_path / "other", quiet=True
    )
    assert corpora.load_docs(other)["text"] != docs["text"]


def test_corpus_is_reused_unless_the_parameters_change(corpus):
    stamp = json.loads((corpus / corpora.PARAMS_FILE).read_text())
    assert stamp["generator"] == corpora.GENERATOR
    before = (corpus / corpora.DOCS_FILE).stat().st_mtime_ns
    corpora.ensure(SMALL, corpus, quiet=True)
    assert (corpus / corpora.DOCS_FILE).stat().st_mtime_ns == before


def test_beir_layout_loads_as_a_dataset(corpus):
    from rag_bench.data.dataset import load_dataset

    folder = corpora.ensure_beir(SMALL, corpus, quiet=True)
    data = load_dataset(folder)
    assert len(data.docs) == SMALL.docs
    assert len(data.queries) == SMALL.queries
    queries = corpora.load_queries(corpus)
    for query_id, source in zip(queries["id"], queries["source"]):
        assert data.qrels.to_dict()[query_id] == {source: 1}


def test_rag_bench_and_bm25s_give_the_same_scores(corpus):
    texts = corpora.load_docs(corpus, ("text",))["text"]
    queries = corpora.load_queries(corpus)["text"]
    ours = bench_retrieval.run_rag_bench(texts, queries)
    theirs = bench_retrieval.run_bm25s(texts, queries, numba=False)
    agree = bench_retrieval.agreement(ours, theirs)
    assert agree["identical_scores"] == 1.0
    assert agree["above_cut_ties"] == 1.0
    assert sum(ours["phases"].values()) == pytest.approx(ours["index_s"] + ours["query_s"])


@pytest.mark.skipif(importlib.util.find_spec("rank_bm25") is None, reason="rank_bm25 missing")
def test_rank_bm25_orders_like_bm25s_robertson(corpus):
    texts = corpora.load_docs(corpus, ("text",))["text"]
    queries = corpora.load_queries(corpus)["text"]
    result = bench_retrieval.run_rank_bm25(texts, queries)
    assert result["n_queries"] == min(len(queries), bench_retrieval.RANK_BM25_QUERIES)
    assert result["agreement_robertson"]["mean_overlap"] > 0.99


def test_agreement_tells_ties_from_differences():
    agreement = bench_retrieval.agreement
    ours = {"ids": [[1, 2, 3]], "scores": [[3.0, 2.0, 2.0]]}
    swapped_tie = {"ids": [[1, 3, 2]], "scores": [[3.0, 2.0, 2.0]]}
    result = agreement(ours, swapped_tie)
    assert result["identical_ids"] == 0.0
    assert result["identical_scores"] == result["ties_by_position"] == 1.0
    other_tie_at_cut = {"ids": [[1, 2, 9]], "scores": [[3.0, 2.0, 2.0]]}
    result = agreement(ours, other_tie_at_cut)
    assert result["ties_by_position"] == 0.0
    assert result["above_cut_ties"] == 1.0
    assert result["mean_overlap"] == pytest.approx(2 / 3)
    different = {"ids": [[2, 1, 3]], "scores": [[3.0, 2.0, 2.0]]}
    assert agreement(ours, different)["above_cut_ties"] == 0.0


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("store")
    patch = pytest.MonkeyPatch()
    patch.setattr(bench_store, "WORK", work)
    try:
        yield bench_store.ensure_store({"runs": 10, "queries": 80}, seed=1)
    finally:
        patch.undo()


def test_generated_store_is_readable_and_comparable(store):
    from rag_bench.runs import open_runs

    opened = open_runs(store)
    assert not opened.broken
    assert len(opened.list()) == 10
    assert {r.variant for r in opened.list()} == set(bench_store.VARIANTS)
    counts = opened.sql("SELECT count(*) AS n, count(value) AS defined FROM metrics")
    assert counts["n"].iloc[0] == 10 * 80 * len(bench_store.STORE_METRICS)
    assert 0 < counts["defined"].iloc[0] < counts["n"].iloc[0]  # NULL for undefined values
    result = bench_store.op_compare_library(store, resamples=200)
    assert result["rows"] > 0


def test_store_peers_agree_with_the_library(store):
    for op in ("mean per run and metric", "worst of a slice"):
        tools = bench_store.READ_OPS[op]
        reference = tools[bench_store.LIBRARY](store)
        for name, func in tools.items():
            assert bench_store.same(func(store), reference), (op, name)


def test_synthetic_run_tables_are_written_by_write_run(tmp_path):
    from rag_bench.evaluation.answer import answer_metric_names
    from rag_bench.experiment.runner import DEFAULT_KS
    from rag_bench.experiment.traces import ranking_measures

    frames = bench_store.run_tables(12, seed=0)
    stored = len(ranking_measures(DEFAULT_KS)) + len(answer_metric_names(DEFAULT_KS))
    assert len(frames["metrics"]) == 12 * stored  # every metric at the default cutoffs
    per_query = bench_store.DEPTH + bench_store.DOCS_PER_QUERY
    assert len(frames["retrieved"]) == 12 * per_query
    for tool, write in bench_store.WRITE_OPS.items():
        target = tmp_path / tool.replace(" ", "_")
        target.mkdir()
        write(frames, target)
        variant, run_id = bench_store.WRITTEN_RUN["variant"], bench_store.WRITTEN_RUN["run_id"]
        for name, frame in frames.items():
            path = bench_store.table_file(target, name, variant, run_id)
            assert pq.read_metadata(path).num_rows == len(frame), (tool, name)


def test_end_to_end_reads_the_stages_of_a_run(tmp_path):
    from rag_bench.experiment.runner import Selection, run_variant

    result = run_variant(
        "baseline",
        selection=Selection(tag="smoke"),
        runs_dir=tmp_path / "runs",
        cache_dir=tmp_path / "cache",
    )
    stages = bench_end_to_end.stages_of(result)
    assert stages["n_queries"] == len(result.queries)
    assert stages["retrieve_s"] > 0 and stages["generate_s"] > 0
    assert stages["fusion_s"] is None and stages["rerank_s"] is None
    assert stages["traces_s"] >= 0
    assert stages["cached"] == {"bm25": False, "generator": False}


def test_startup_measures_each_command_against_a_bare_python():
    cases = bench_startup.benchmark(rounds=1)
    assert list(cases) == list(bench_startup.COMMANDS)
    floor = cases[bench_startup.FLOOR]
    assert floor["wall_vs_python"] == floor["cpu_vs_python"] == 1.0
    assert all(case["runs"] == 1 and case["wall_s"] > 0 for case in cases.values())


def test_refuse_compares_files_of_one_size_and_refuses_for_real(tmp_path):
    valid, one_line = bench_refuse.write_files(tmp_path, 100_000)
    assert abs(valid.stat().st_size - one_line.stat().st_size) <= 1
    assert b"\n" not in one_line.read_bytes()
    bench_refuse.refuse(one_line)  # raises unless refused at line 1
    with pytest.raises(RuntimeError, match="was accepted"):
        bench_refuse.refuse(valid)
    result = bench_refuse.benchmark(100_000, repeat=1)
    assert result["cases"]["rag-bench parse (valid file)"]["vs_parse"] == 1.0


def test_dense_memory_steps_build_one_matrix_and_search_it(tmp_path):
    """bench_dense_memory's children: the pipeline's block-by-block fill and the former
    list-then-stack give the same float32 unit vectors; both searches run on them."""
    import bench_dense_memory as memory
    import numpy as np

    n = 2 * memory.BLOCK + 7  # three blocks, the last one short
    filled, stacked = tmp_path / "filled", tmp_path / "stacked"
    for step, folder in (("build", filled), ("build-stacked", stacked)):
        folder.mkdir()
        memory.child(step, n, folder)
    matrix = np.load(filled / "embeddings.npy")
    assert matrix.dtype == np.float32 and matrix.shape == (n, memory.DIMS)
    assert np.array_equal(matrix, np.load(stacked / "embeddings.npy"))
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-5)
    for step in ("search-mapped", "search-loaded"):
        memory.child(step, n, filled)
