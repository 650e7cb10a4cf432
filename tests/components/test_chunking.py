from __future__ import annotations

import pytest

from rag_bench.components.chunking import (
    FixedChunker,
    RecursiveChunker,
    WholeDocument,
    chunk_corpus,
)
from rag_bench.errors import UsageError
from rag_bench.model import Doc

TEXT = " ".join(f"w{i}" for i in range(25))
LONG = (
    "First paragraph is short.\n\n"
    + " ".join(f"Sentence {i} has five words." for i in range(12))
    + "\n\nEnd."
)


def test_fixed_windows_overlap_and_keep_offsets():
    doc = Doc("d", "Title", TEXT)
    chunks = FixedChunker(size=10, overlap=3).chunk(doc)
    assert [c.chunk_id for c in chunks] == ["d#0", "d#1", "d#2", "d#3"]
    assert [c.text.split()[0] for c in chunks] == ["w0", "w7", "w14", "w21"]
    for chunk in chunks:
        assert doc.text[chunk.start : chunk.end] == chunk.text
        assert chunk.doc_id == "d" and chunk.index_text.startswith("Title\n\n")
    assert chunks[-1].text.split()[-1] == "w24"


def test_fixed_short_document_is_one_chunk():
    chunks = FixedChunker(size=100, overlap=10).chunk(Doc("d", "", "just three words"))
    assert [(c.start, c.end) for c in chunks] == [(0, 16)]


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_windows(size, overlap):
    with pytest.raises(UsageError):
        FixedChunker(size=size, overlap=overlap)


def test_recursive_splits_paragraphs_then_sentences_under_the_limit():
    doc = Doc("d", "", LONG)
    chunks = RecursiveChunker(max_words=20, overlap=0).chunk(doc)
    assert all(len(c.text.split()) <= 20 for c in chunks)
    assert all(doc.text[c.start : c.end] == c.text for c in chunks)
    # sentence boundaries are kept: no chunk starts or ends inside a sentence
    assert all(c.text.endswith(".") for c in chunks)
    covered = " ".join(c.text for c in chunks).split()
    assert covered == doc.text.split()


def test_recursive_falls_back_to_windows_for_a_long_sentence():
    doc = Doc("d", "", TEXT)
    chunks = RecursiveChunker(max_words=10, overlap=2).chunk(doc)
    assert all(len(c.text.split()) <= 10 for c in chunks) and len(chunks) == 3


def test_whole_document_and_empty_documents():
    docs = [Doc("a", "Only a title", ""), Doc("b", "", "body")]
    assert [c.chunk_id for c in chunk_corpus(WholeDocument(), docs)] == ["a", "b"]
    chunks = chunk_corpus(FixedChunker(), docs)
    assert [c.chunk_id for c in chunks] == ["a#0", "b#0"]
    assert chunks[0].index_text == "Only a title"
