"""Approximate nearest-neighbour search over chunk embeddings: an HNSW graph (faiss-cpu).

Exact search (:func:`rag_bench.components.dense.cosine_search`) stays the default and the
reference. The graph only chooses the candidates: each query's ``depth`` candidates are scored
again exactly (the same float64 products exact search makes), so a chunk both searches find
gets the same score, and what the approximation costs is which chunks are missing. That cost is
measured on every run that uses the graph (:func:`sampled_recall`) and kept in its manifest.

The graph is built on one thread with a seeded level generator, so two builds from the same
embeddings and parameters are the same graph and give the same rankings.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_bench.components.base import Index
from rag_bench.components.registry import component
from rag_bench.errors import check_number, import_backend
from rag_bench.model import Hits

INSTALL = "pip install 'rag-bench[ann]'"
INDEX_FILE = "hnsw.faiss"
BUILD_BLOCK = 65_536  # embeddings converted to float32 and added at a time (bounds the copy)


def faiss_module() -> Any:
    """faiss-cpu, or one line saying how to install it."""
    return import_backend("faiss", INSTALL, "index hnsw")


@component("index", "hnsw", requires=INSTALL)
class HNSWIndex(Index):
    """Approximate search: an HNSW graph of the chunk embeddings (faiss), candidates rescored.

    ``m`` links per node, ``ef_construction`` candidates kept while linking, ``ef_search``
    while searching (at least the depth); ``seed`` seeds the levels the nodes are drawn to and
    the queries ``recall_sample`` picks for the recall check against exact search."""

    approximate = True

    def __init__(
        self,
        m: int = 16,
        ef_construction: int = 100,
        ef_search: int = 200,
        seed: int = 0,
        recall_sample: int = 100,
    ):
        self.m = check_number("index.m", m, 2, 512, whole=True)
        self.ef_construction = check_number("index.ef_construction", ef_construction, 1, whole=True)
        self.ef_search = check_number("index.ef_search", ef_search, 1, whole=True)
        self.seed = check_number("index.seed", seed, 0, 2**31 - 1, whole=True)
        self.recall_sample = check_number("index.recall_sample", recall_sample, 1, whole=True)
        self.graph: Any = None

    def cache_material(self) -> dict:
        # the faiss version: another one may link the same embeddings differently
        faiss = faiss_module()
        return {
            "component": "hnsw",
            "m": self.m,
            "ef_construction": self.ef_construction,
            "seed": self.seed,
            "faiss": faiss.__version__,
        }

    def build(self, embeddings: np.ndarray) -> None:
        """Link every row of ``embeddings`` (an array or a memory map; float32 or float64)."""
        faiss = faiss_module()
        graph = faiss.IndexHNSWFlat(embeddings.shape[1], self.m, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = self.ef_construction
        graph.hnsw.rng = faiss.RandomGenerator(self.seed)
        with faiss_threads(1):  # one thread: insertion order, and so the graph, is fixed
            for start in range(0, embeddings.shape[0], BUILD_BLOCK):
                block = embeddings[start : start + BUILD_BLOCK]
                graph.add(np.ascontiguousarray(block, dtype=np.float32))
        self.graph = graph

    def candidates(self, queries: np.ndarray, depth: int) -> np.ndarray:
        """Each query's ``depth`` nearest rows by the graph (-1 pads a short list)."""
        # per call, not on the shared graph: executor threads may search it at once
        asked = faiss_module().SearchParametersHNSW(efSearch=max(self.ef_search, depth))
        vectors = np.ascontiguousarray(queries, dtype=np.float32)
        _, found = self.graph.search(vectors, depth, params=asked)
        return found

    def search(self, queries: np.ndarray, embeddings: np.ndarray, depth: int) -> list[Hits]:
        """Top ``depth`` per query: the graph's candidates, scored exactly against
        ``embeddings`` (ties broken by position, as exact search breaks them)."""
        depth = min(depth, embeddings.shape[0])
        out = []
        for query, rows in zip(queries, self.candidates(queries, depth)):
            rows = np.sort(rows[rows >= 0])
            scores = np.asarray(embeddings[rows], dtype=np.float64) @ np.asarray(
                query, dtype=np.float64
            )
            out.append(Hits.ranked(rows, scores, depth))
        return out

    def save(self, folder: Path) -> None:
        faiss_module().write_index(self.graph, str(folder / INDEX_FILE))

    def load(self, folder: Path) -> None:
        self.graph = faiss_module().read_index(str(folder / INDEX_FILE))


class faiss_threads:
    """``with faiss_threads(n):`` faiss's OpenMP pool at ``n`` threads, restored after."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self) -> None:
        faiss = faiss_module()
        self.before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        faiss_module().omp_set_num_threads(self.before)


def recall(approximate: Sequence[Hits], exact: Sequence[Hits]) -> float:
    """Mean over queries of the share of exact search's top k that the approximate top k
    holds (1.0 for a query whose exact list is empty)."""
    shares = []
    for found, truth in zip(approximate, exact):
        wanted = set(truth.index.tolist())
        shares.append(len(wanted & set(found.index.tolist())) / len(wanted) if wanted else 1.0)
    return float(np.mean(shares)) if shares else float("nan")


def sample_rows(n: int, size: int, seed: int) -> np.ndarray:
    """``size`` of ``n`` positions (all when fewer), drawn from ``seed``, in order."""
    if n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))
