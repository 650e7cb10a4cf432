"""Chunkers split documents into passages that keep their document id and character offsets."""

from __future__ import annotations

import re
from collections.abc import Iterable

from rag_bench.components.base import Chunker
from rag_bench.components.registry import component
from rag_bench.errors import UsageError
from rag_bench.model import Chunk, Doc
from rag_bench.text.scripts import HAN
from rag_bench.text.sentences import split_sentences

# What a window counts: a run of non-space characters, except that every Han character is a
# word of its own (with the punctuation that follows it), since Chinese has no spaces. English
# text is counted exactly as before: whitespace-separated words.
WORD = re.compile(f"[{HAN}][^\\w\\s]*|[^\\s{HAN}]+")
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def _make(doc: Doc, spans: Iterable[tuple[int, int]]) -> list[Chunk]:
    return [
        Chunk(f"{doc.id}#{i}", doc.id, start, end, doc.text[start:end], doc.title)
        for i, (start, end) in enumerate(spans)
    ]


def _windows(words: list[tuple[int, int]], size: int, overlap: int) -> list[tuple[int, int]]:
    """Spans of windows of ``size`` words, each starting ``size - overlap`` words later."""
    if not words:
        return []
    step = size - overlap
    spans = []
    for first in range(0, len(words), step):
        last = min(first + size, len(words)) - 1
        spans.append((words[first][0], words[last][1]))
        if last == len(words) - 1:
            break
    return spans


def _words(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    end = len(text) if end is None else end
    return [(start + m.start(), start + m.end()) for m in WORD.finditer(text[start:end])]


def _check_window(size: int, overlap: int) -> None:
    if size < 1:
        raise UsageError(
            f"chunk size {size} is below 1", "set chunker.size to a positive number of words"
        )
    if not 0 <= overlap < size:
        raise UsageError(
            f"chunk overlap {overlap} must be ≥ 0 and below the size {size}",
            "lower chunker.overlap",
        )


@component(
    "chunker",
    "fixed",
    description="windows of `size` words (a Han character counts as one) overlapping by `overlap`",
)
class FixedChunker(Chunker):
    def __init__(self, size: int = 128, overlap: int = 32):
        _check_window(size, overlap)
        self.size, self.overlap = size, overlap

    def chunk(self, doc: Doc) -> list[Chunk]:
        return _make(doc, _windows(_words(doc.text), self.size, self.overlap))


@component(
    "chunker",
    "recursive",
    description="paragraphs, then sentences, then windows, up to `max_words`",
)
class RecursiveChunker(Chunker):
    def __init__(self, max_words: int = 128, overlap: int = 16):
        _check_window(max_words, overlap)
        self.max_words, self.overlap = max_words, overlap

    def chunk(self, doc: Doc) -> list[Chunk]:
        pieces = self._split(doc.text, _paragraphs(doc.text), level=0)
        return _make(doc, self._pack(doc.text, pieces))

    def _split(self, text: str, spans: list[tuple[int, int]], level: int) -> list[tuple[int, int]]:
        """Break every span longer than the limit with the next finer separator."""
        out = []
        for start, end in spans:
            words = _words(text, start, end)
            if len(words) <= self.max_words:
                out.append((start, end))
            elif level == 0:
                sentences = [(start + s, start + e) for s, e in split_sentences(text[start:end])]
                out.extend(self._split(text, sentences, level=1))
            else:
                out.extend(_windows(words, self.max_words, self.overlap))
        return out

    def _pack(self, text: str, pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Merge neighbouring pieces while the merged span stays within the limit."""
        packed: list[tuple[int, int]] = []
        count = 0
        for start, end in pieces:
            n = len(_words(text, start, end))
            if packed and count + n <= self.max_words:
                packed[-1] = (packed[-1][0], end)
                count += n
            else:
                packed.append((start, end))
                count = n
        return packed


def _paragraphs(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for match in PARAGRAPH_BREAK.finditer(text):
        if text[start : match.start()].strip():
            spans.append((start, match.start()))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


@component("chunker", "none", description="the whole document as one chunk")
class WholeDocument(Chunker):
    def chunk(self, doc: Doc) -> list[Chunk]:
        return [Chunk(doc.id, doc.id, 0, len(doc.text), doc.text, doc.title)]


def chunk_corpus(chunker, docs: Iterable[Doc]) -> list[Chunk]:
    """Chunk every document, in corpus order; a document without words gets one empty chunk
    so that it stays retrievable by its title."""
    chunks: list[Chunk] = []
    for doc in docs:
        pieces = chunker.chunk(doc)
        chunks.extend(pieces or [Chunk(f"{doc.id}#0", doc.id, 0, 0, "", doc.title)])
    return chunks
