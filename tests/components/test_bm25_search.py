"""rag-bench's BM25 retriever: its top lists are the best positive scores of ``scores()``, ties
by chunk position; terms are numbered once, deterministically; the cycle collector is left as
found."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from conftest import SHIPPED
from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.components.sparse import BM25Retriever, term_ids
from rag_bench.data.dataset import load_dataset
from rag_bench.model import Query


def ranked_by_scores(scores: np.ndarray, depth: int) -> tuple[list[int], list[float]]:
    """The reference ranking: positive scores, best first, ties by position."""
    order = sorted(np.flatnonzero(scores > 0), key=lambda i: (-scores[i], i))[:depth]
    return [int(i) for i in order], [float(scores[i]) for i in order]


@pytest.mark.parametrize("method", ["lucene", "bm25+"])
@pytest.mark.parametrize("depth", [1, 7, 1000])
def test_search_is_the_best_positive_scores_ties_by_position(method, depth):
    data = load_dataset(SHIPPED)
    texts = [d.full_text() for d in data.docs.values()]
    queries = [Query(q.id, q.text) for q in list(data.queries.values())[:40]]
    retriever = BM25Retriever(method=method)
    retriever.fit(texts, EnglishAnalyzer())
    for query, hits in zip(queries, retriever.search(queries, depth)):
        ids, scores = ranked_by_scores(retriever.scores(query.text), depth)
        assert hits.index.dtype == np.int64 and hits.score.dtype == np.float64
        assert hits.index.tolist() == ids
        assert hits.score.tolist() == scores


def test_tied_chunks_come_in_corpus_order_and_unmatched_ones_are_left_out():
    texts = ["green apple pie", "red car", "green apple pie", "apple", "green apple pie"]
    retriever = BM25Retriever()
    retriever.fit(texts, EnglishAnalyzer())
    (hits,) = retriever.search([Query("q", "green apple")], 2)
    assert hits.index.tolist() == [0, 2]
    (hits,) = retriever.search([Query("q", "green apple")], 10)
    assert hits.index.tolist() == [0, 2, 4, 3]
    (none,) = retriever.search([Query("q", "bicycle")], 10)
    assert len(none) == 0


def test_terms_are_numbered_in_order_of_first_appearance():
    texts = ["Red apples, green apples.", "", "green cars"] * 2
    tokenized = term_ids(texts, EnglishAnalyzer())
    assert tokenized.vocab == {"red": 0, "appl": 1, "green": 2, "car": 3}
    assert tokenized.ids == [[0, 1, 2, 1], [], [2, 3]] * 2


@pytest.mark.parametrize("enabled", [True, False])
def test_fit_leaves_the_cycle_collector_as_it_found_it(enabled):
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        BM25Retriever().fit(["one text", "another text"], EnglishAnalyzer())
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError):
            BM25Retriever().fit(["text"], FailingAnalyzer())
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


class FailingAnalyzer(EnglishAnalyzer):
    def terms_many(self, texts):
        raise RuntimeError("analyzer failed")


def test_a_saved_index_searches_like_the_fitted_one(tmp_path):
    data = load_dataset(SHIPPED)
    texts = [d.full_text() for d in data.docs.values()]
    queries = [Query(q.id, q.text) for q in list(data.queries.values())[:20]]
    fitted = BM25Retriever()
    fitted.fit(texts, EnglishAnalyzer())
    fitted.save(tmp_path)
    loaded = BM25Retriever()
    loaded.load(tmp_path, EnglishAnalyzer())
    for a, b in zip(fitted.search(queries, 50), loaded.search(queries, 50)):
        assert a.index.tolist() == b.index.tolist() and a.score.tolist() == b.score.tolist()
