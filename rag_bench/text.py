"""Analyzers turn text into index terms; they are shared by retrievers, generators and judges.

The ``en`` analyzer tokenises like scikit-learn's CountVectorizer (words of two or more word
characters), lower-cases, drops English stopwords and applies the Snowball stemmer, which is
exactly what ``bm25s.tokenize(stopwords="en", stemmer=Stemmer("english"))`` does; so a BM25 index
built through rag-bench scores like bm25s used directly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag_bench.plugins import component

TOKEN = re.compile(r"(?u)\b\w\w+\b")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[【]|[A-Z0-9])|\n\s*\n|(?<=[。！？；])")


@component(
    "analyzer",
    "en",
    description="lowercase, English stopwords, Snowball stemming",
    stopwords=True,
    stem=True,
)
class EnglishAnalyzer:
    def __init__(self, stopwords: bool = True, stem: bool = True):
        from bm25s.stopwords import STOPWORDS_EN

        self.stopwords = frozenset(STOPWORDS_EN) if stopwords else frozenset()
        self.stemmer = None
        if stem:
            import Stemmer

            self.stemmer = Stemmer.Stemmer("english")
        self._stems: dict[str, str] = {}

    def words(self, text: str) -> list[str]:
        """Lower-cased words without stopwords, before stemming."""
        return [t for t in TOKEN.findall(text.lower()) if t not in self.stopwords]

    def _stem(self, words: list[str]) -> list[str]:
        if self.stemmer is None:
            return words
        missing = [w for w in set(words) if w not in self._stems]
        if missing:
            self._stems.update(zip(missing, self.stemmer.stemWords(missing)))
        return [self._stems[w] for w in words]

    def terms(self, text: str) -> list[str]:
        """Index terms of one text."""
        return self._stem(self.words(text))

    def terms_many(self, texts: Sequence[str]) -> list[list[str]]:
        return [self.terms(text) for text in texts]


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (end punctuation, blank lines, CJK stops)."""
    spans = []
    start = 0
    for match in SENTENCE_END.finditer(text):
        end = match.start()
        if text[start:end].strip():
            spans.append(_trim(text, start, end))
        start = match.end()
    if text[start:].strip():
        spans.append(_trim(text, start, len(text)))
    return spans


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
