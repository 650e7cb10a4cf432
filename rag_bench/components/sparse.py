"""BM25 retrieval on bm25s's sparse score matrices."""

from __future__ import annotations

import contextlib
import gc
import itertools
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_bench.components.base import Capability, Retriever
from rag_bench.components.hits import top_k_rows
from rag_bench.components.registry import component
from rag_bench.errors import check_number
from rag_bench.model import Hits, Query

METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
ANALYZE_BATCH = 10_000  # texts analyzed at a time; their term lists are dropped once numbered


def term_ids(texts: Sequence[str], analyzer):
    """Each text's terms as ids into a vocabulary numbered in order of first appearance, in the
    form ``bm25s.BM25.index`` takes as is (one dict lookup per term; bm25s doesn't number them
    again)."""
    from bm25s.tokenization import Tokenized

    vocab: dict[str, int] = defaultdict(itertools.count().__next__)  # a new term: the next id
    number = vocab.__getitem__
    ids: list[list[int]] = []
    for start in range(0, len(texts), ANALYZE_BATCH):
        batch = analyzer.terms_many(texts[start : start + ANALYZE_BATCH])
        ids.extend(list(map(number, terms)) for terms in batch)
    return Tokenized(ids=ids, vocab=dict(vocab))


@contextlib.contextmanager
def cycle_collector_paused():
    """Python's cycle collector off for a bulk build. Indexing makes a list per chunk and no
    reference cycles; as the lists pile up, each full collection walks all of them again, which
    costs about a tenth of the indexing time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def top_positive(scores: np.ndarray, depth: int) -> Hits:
    """The best ``depth`` chunks among those scoring above 0, ties by position; the top-k runs
    over the matching chunks only."""
    matching = np.flatnonzero(scores > 0)
    best = top_k_rows(scores[matching].astype(np.float64)[None, :], depth)[0]
    return Hits(matching[best.index], best.score)


MAX_K1 = 1000.0
K1_NOTE = "k1 is 0-3 in practice; beyond 1000 the scores overflow and rank nothing"


@component(
    "retriever",
    "bm25",
    description="BM25 on bm25s (k1, b, method)",
)
class BM25Retriever(Retriever):
    capabilities = frozenset({Capability.INDEX})
    stage = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75, method: str = "lucene"):
        if method not in METHODS:
            from rag_bench.errors import UnknownNameError

            raise UnknownNameError("BM25 method", method, METHODS)
        # k1 < 0 would rank a term's repetitions down, b outside [0, 1] over-normalise length;
        # a huge k1 overflows bm25s's float32 scores (1e308: every score inf, no ranking left)
        check_number("retriever.k1", k1, 0, MAX_K1, range_note=K1_NOTE)
        check_number("retriever.b", b, 0, 1)
        self.k1, self.b, self.method = k1, b, method
        self.index: Any = None  # a bm25s.BM25, made by fit or load
        self.analyzer: Any = None  # the pipeline's analyzer, given by fit, prepare or load

    def cache_material(self) -> dict:
        return {"component": "bm25", "k1": self.k1, "b": self.b, "method": self.method}

    def fit(self, texts: list[str], analyzer) -> None:
        import bm25s

        self.analyzer = analyzer
        index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        with cycle_collector_paused():
            index.index(term_ids(texts, analyzer), show_progress=False)
        self.index = index

    def save(self, folder: Path) -> None:
        self.index.save(str(folder))

    def load(self, folder: Path, analyzer) -> None:
        import bm25s

        self.analyzer = analyzer
        self.index = bm25s.BM25.load(str(folder))

    def bm25_scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for one query, in bm25s's own dtype (float32)."""
        ids = self.index.get_tokens_ids(self.analyzer.terms(query))
        if not ids:
            return np.zeros(self.index.scores["num_docs"], dtype=self.index.dtype)
        return self.index.get_scores_from_ids(ids)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for one query, as float64."""
        return self.bm25_scores(query).astype(np.float64)

    def search(self, queries: Sequence[Query], depth: int) -> list[Hits]:
        # Chunks that match no query term score 0 and are not retrieved.
        return [top_positive(self.bm25_scores(q.text), depth) for q in queries]
