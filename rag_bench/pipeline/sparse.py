"""BM25 retrieval on bm25s's sparse score matrices."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag_bench.dataset import Query
from rag_bench.pipeline.hits import Hits, top_k_rows
from rag_bench.plugins import component

METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")


@component(
    "retriever",
    "bm25",
    description="BM25 on bm25s (k1, b, method)",
    k1=1.5,
    b=0.75,
    method="lucene",
)
class BM25Retriever:
    stage = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75, method: str = "lucene"):
        if method not in METHODS:
            from rag_bench.errors import UnknownNameError

            raise UnknownNameError("BM25 method", method, METHODS)
        self.k1, self.b, self.method = k1, b, method
        self.index = None
        self.analyzer = None

    def cache_material(self) -> dict:
        return {"component": "bm25", "k1": self.k1, "b": self.b, "method": self.method}

    def fit(self, texts: list[str], analyzer) -> None:
        import bm25s

        self.analyzer = analyzer
        index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        index.index(analyzer.terms_many(texts), show_progress=False)
        self.index = index

    def save(self, folder: Path) -> None:
        self.index.save(str(folder))

    def load(self, folder: Path, analyzer) -> None:
        import bm25s

        self.analyzer = analyzer
        self.index = bm25s.BM25.load(str(folder))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for one query."""
        ids = self.index.get_tokens_ids(self.analyzer.terms(query))
        if not ids:
            return np.zeros(self.index.scores["num_docs"], dtype=np.float64)
        return self.index.get_scores_from_ids(ids).astype(np.float64)

    def search(self, queries: Sequence[Query], depth: int) -> list[Hits]:
        # Chunks that match no query term score 0 and are not retrieved.
        return [
            top_k_rows(self.scores(q.text)[None, :], depth, positive_only=True)[0] for q in queries
        ]
