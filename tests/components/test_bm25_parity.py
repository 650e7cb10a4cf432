"""With chunker `none` and the `en` analyzer over title + text, rag-bench's BM25 scores are
bm25s's own scores for the same corpus and queries."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
import Stemmer

from conftest import SHIPPED
from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.components.chunking import WholeDocument, chunk_corpus
from rag_bench.components.sparse import BM25Retriever
from rag_bench.data.dataset import load_dataset


@pytest.mark.parametrize(
    ("k1", "b", "method"), [(1.5, 0.75, "lucene"), (1.2, 0.4, "robertson"), (0.9, 0.9, "atire")]
)
def test_scores_equal_bm25s_direct(k1, b, method):
    data = load_dataset(SHIPPED)
    docs = list(data.docs.values())
    queries = [q.text for q in list(data.queries.values())[:60]]
    stemmer = Stemmer.Stemmer("english")

    reference = bm25s.BM25(k1=k1, b=b, method=method)
    reference.index(
        bm25s.tokenize(
            [d.full_text() for d in docs], stopwords="en", stemmer=stemmer, show_progress=False
        ),
        show_progress=False,
    )
    query_tokens = bm25s.tokenize(
        queries, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
    )

    ours = BM25Retriever(k1=k1, b=b, method=method)
    chunks = chunk_corpus(WholeDocument(), docs)
    assert [c.index_text for c in chunks] == [d.full_text() for d in docs]
    ours.fit([c.index_text for c in chunks], EnglishAnalyzer())

    for text, tokens in zip(queries, query_tokens):
        expected = reference.get_scores(tokens) if tokens else np.zeros(len(docs))
        np.testing.assert_allclose(ours.scores(text), expected, rtol=0, atol=1e-5)
