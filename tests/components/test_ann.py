"""The approximate index (index slot ``hnsw``): deterministic, close to exact search on data
where exact search is computed here by brute force, cached, and measured on every run that
uses it (the recall in the manifest equals the one the stored traces give)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import SHIPPED, assert_one_line_error, require
from rag_bench.components.ann import HNSWIndex, recall, sample_rows
from rag_bench.components.dense import ExactIndex
from rag_bench.errors import MissingBackendError
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.model import Hits
from rag_bench.pipeline.executors import LocalExecutor


def clustered(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 50), d))
    x = centres[rng.integers(0, len(centres), n)] + 0.7 * rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute_force(queries: np.ndarray, chunks: np.ndarray, depth: int) -> list[set[int]]:
    """The reference: every score computed, the best ``depth`` by a full sort."""
    scores = queries @ chunks.T
    return [set(np.argsort(-row, kind="stable")[:depth].tolist()) for row in scores]


def test_two_builds_give_the_same_rankings_and_the_seed_is_used():
    require("faiss", "pip install -e '.[ann]'")
    chunks, queries = clustered(3_000, 32, 0), clustered(60, 32, 1)
    found = []
    for seed in (0, 0, 1):
        index = HNSWIndex(m=8, ef_construction=16, ef_search=20, seed=seed)
        index.build(chunks)
        found.append(index.candidates(queries, 20))
    assert np.array_equal(found[0], found[1])
    assert not np.array_equal(found[0], found[2])  # levels drawn from another seed


def test_hnsw_finds_what_exact_search_finds_and_scores_it_alike():
    require("faiss", "pip install -e '.[ann]'")
    chunks, queries = clustered(2_000, 24, 2), clustered(40, 24, 3)
    index = HNSWIndex(m=16, ef_construction=100, ef_search=200)
    index.build(chunks.astype(np.float32))  # a float32 matrix, as a memory map would be
    approx = index.search(queries, chunks, 10)
    exact = ExactIndex().search(queries, chunks, 10)
    truth = brute_force(queries, chunks, 10)
    assert [set(h.index.tolist()) for h in exact] == truth
    assert [set(h.index.tolist()) for h in approx] == truth  # this graph misses nothing here
    for a, e in zip(approx, exact):
        assert np.array_equal(a.index, e.index)
        np.testing.assert_allclose(a.score, e.score, rtol=0, atol=1e-12)


def test_recall_counts_the_share_of_exact_top_k_found():
    def h(*index):
        return Hits(np.array(index), np.zeros(len(index)))

    # query 1: 2 of 4 found; query 2: all; query 3: nothing to find counts as found
    assert recall([h(1, 2, 9, 8), h(5, 6), h()], [h(1, 2, 3, 4), h(6, 5), h()]) == pytest.approx(
        (0.5 + 1 + 1) / 3
    )


def test_the_recall_sample_is_seeded_sorted_and_never_larger_than_the_queries():
    assert sample_rows(5, 100, 0).tolist() == [0, 1, 2, 3, 4]
    drawn = sample_rows(1_000, 50, 7)
    assert len(set(drawn.tolist())) == 50 and np.all(np.diff(drawn) > 0)
    assert np.array_equal(drawn, sample_rows(1_000, 50, 7))
    assert not np.array_equal(drawn, sample_rows(1_000, 50, 8))


def dense_sets(result, query_ids: list[str]) -> list[set[str]]:
    retrieved = result.tables["retrieved"]
    dense = retrieved[retrieved["stage"] == "dense"]
    by_query = dense.groupby("query_id")["chunk_id"].apply(set)
    return [by_query.get(q, set()) for q in query_ids]


@pytest.mark.slow
def test_a_run_with_hnsw_records_its_recall_as_its_traces_show_it(tmp_path, rag_bench):
    require("faiss", "pip install -e '.[ann]'")
    # a poor graph (2 links per node, 10 candidates searched), so that it misses chunks
    poor = ["index.name=hnsw", "index.m=2", "index.ef_construction=2", "index.ef_search=1"]
    common = {
        "runs_dir": tmp_path / "runs",
        "cache_dir": tmp_path / "cache",
        "depth": 10,
        "ks": (1, 10),
    }
    exact = run_variant("hybrid", SHIPPED, **common)
    approx = run_variant("hybrid", SHIPPED, overrides=[*poor, "index.recall_sample=40"], **common)
    assert "recall" not in exact.manifest["index"] and "index" not in exact.manifest["params"]
    checked = approx.manifest["index"]["recall"]
    ids = approx.manifest["selection"]["query_ids"]
    sampled = [ids[i] for i in sample_rows(len(ids), 40, 0)]
    shares = [
        len(a & e) / len(e) for a, e in zip(dense_sets(approx, sampled), dense_sets(exact, sampled))
    ]
    assert checked == {
        "recall": pytest.approx(float(np.mean(shares)), abs=1e-12),
        "depth": 10,
        "sample": 40,
        "of": len(ids),
        "seed": 0,
    }
    assert checked["recall"] < 1.0  # the poor graph missed something, and it shows
    shown = rag_bench("show", approx.run_id, "--runs-dir", tmp_path / "runs").stdout
    assert f"recall@10 {checked['recall']:.4f} against exact search (40 of {len(ids)}" in shown
    # built once: the second run loads the graph from the cache and ranks alike
    again = run_variant("hybrid", SHIPPED, overrides=[*poor, "index.recall_sample=40"], **common)
    assert again.manifest["index"]["cached"]["dense"] is True
    assert again.manifest["index"]["recall"] == checked
    assert dense_sets(again, ids) == dense_sets(approx, ids)
    # two executor threads search the one graph at once: the same rankings
    threads = run_variant(
        "hybrid",
        SHIPPED,
        overrides=[*poor, "index.recall_sample=40"],
        executor=LocalExecutor(2),
        **common,
    )
    for table in ("retrieved", "metrics"):
        columns = [c for c in threads.tables[table].columns if c != "run_id"]
        assert threads.tables[table][columns].equals(approx.tables[table][columns]), table


def test_an_index_without_an_encoder_is_a_one_line_error(rag_bench, tmp_path):
    outcome = rag_bench(
        "run", "--variant", "baseline", "--set", "index.name=hnsw", "--runs-dir", tmp_path
    )
    assert_one_line_error(outcome, "index")


def test_without_faiss_hnsw_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss now raises ImportError
    with pytest.raises(MissingBackendError, match="faiss"):
        HNSWIndex().build(np.eye(3))


def test_exact_is_the_default_and_searches_as_before(tmp_path):
    chosen = Selection(tag="smoke")
    default = run_variant("hybrid", SHIPPED, runs_dir=tmp_path / "a", selection=chosen)
    named = run_variant(
        "hybrid", SHIPPED, runs_dir=tmp_path / "b", selection=chosen, overrides=["index.name=exact"]
    )
    assert named.manifest["params"]["index"] == {"name": "exact"}
    for table in ("retrieved", "metrics"):
        columns = [c for c in default.tables[table].columns if c != "run_id"]
        assert default.tables[table][columns].equals(named.tables[table][columns]), table


def test_exact_search_over_many_chunks_takes_fewer_queries_at_a_time(monkeypatch):
    from rag_bench.components import dense

    chunks, queries = clustered(300, 16, 5), clustered(20, 16, 6)
    whole = dense.cosine_search(queries, chunks, 7)
    products = []
    real = np.ndarray.__matmul__

    class Counted(np.ndarray):
        def __matmul__(self, other):
            products.append(len(self))
            return real(np.asarray(self), other)

    monkeypatch.setattr(dense, "SCORE_CELLS", 300 * 3)  # three queries' scores at a time
    blocked = dense.cosine_search(queries.view(Counted), chunks, 7)
    assert products == [3] * 6 + [2]
    truth = brute_force(queries, chunks, 7)
    assert [set(h.index.tolist()) for h in blocked] == truth == [set(h.index) for h in whole]
    for a, b in zip(blocked, whole):
        np.testing.assert_allclose(a.score, b.score, rtol=0, atol=1e-12)
