"""The ANN benchmark's machinery on tiny data: the embeddings are generated alike from a seed,
every installed tool runs in its child, and recall is measured against rag-bench's exact search
(the exact peer, faiss, must agree with it). Nothing here times anything."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_ann  # noqa: E402

from conftest import require  # noqa: E402


def test_generated_embeddings_are_unit_length_clustered_and_reproducible(tmp_path):
    chunks, queries = bench_ann.ensure(3_000, 20, seed=4, folder=tmp_path / "a")
    again, _ = bench_ann.ensure(3_000, 20, seed=4, folder=tmp_path / "b")
    x = np.load(chunks)
    assert x.shape == (3_000, bench_ann.DIMS) and x.dtype == np.float32
    assert np.array_equal(x, np.load(again))
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    # clustered: each chunk's best neighbour is far closer than a random chunk
    sample = x[:200] @ x.T
    np.fill_diagonal(sample[:, :200], -1)
    assert np.median(sample.max(axis=1)) > 0.5 > np.median(np.abs(sample))
    assert np.load(queries).shape == (20, bench_ann.DIMS)


def test_every_tool_runs_and_recall_is_measured_against_exact_search(tmp_path):
    require("faiss", "pip install -e '.[ann]'")
    names = [n for n in bench_ann.TOOLS if n != "hnswlib hnsw"]
    size = bench_ann.measure_size(3_000, 30, names, folder=tmp_path)
    rows = {r["tool"]: r for r in size["rows"]}
    assert set(rows) == set(names)
    assert rows["rag-bench exact"]["recall@100"] == 1.0
    assert rows["faiss exact"]["recall@100"] == 1.0  # exact search agrees with exact search
    for name in ("rag-bench hnsw", "faiss hnsw"):
        assert 0.9 < rows[name]["recall@100"] <= 1.0
        assert rows[name]["build_cpu_s"] > 0 and rows[name]["peak_mib"] > 0
    assert rows["faiss hnsw"]["build_cpu_s/faiss hnsw"] == 1.0


def test_recall_at_counts_found_ids_per_query():
    found = np.array([[1, 2, 3, -1], [4, 5, 6, 7]])
    truth = np.array([[1, 2, 9, 8], [7, 6, 5, 4]])
    assert bench_ann.recall_at(found, truth) == (0.5 + 1.0) / 2
