"""Sentence boundaries in English, Chinese and mixed text, as character spans."""

from __future__ import annotations

import re

from rag_bench.text.scripts import HAN

# Sentence ends: English punctuation followed by space and a capital, digit, opening bracket or
# Han character; a blank line; Chinese end punctuation (。．！？；, an ellipsis or ASCII .!? right
# after a Han character), together with the closing quotes and brackets that follow it; and a
# line break next to Chinese text (list items and table rows rarely end in 。, and Chinese is
# seldom hard-wrapped).
CLOSERS = "”’」』）)】》〕］"
SENTENCE_END = re.compile(
    f"(?<=[.!?])\\s+(?=[\"'(\\[【“「‘]|[A-Z0-9]|[{HAN}])"
    "|\\n\\s*\\n"
    f"|(?P<cjk>(?:[。．！？；]|(?<=[{HAN}])[.!?…])[。．！？；.!?…]*[{CLOSERS}]*)\\s*"
    f"|(?<=[{HAN}：，、{CLOSERS}])[ \\t|｜]*\\n\\s*|[ \\t]*\\n\\s*(?=[ \\t|｜]*[{HAN}])"
)


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text``: English end punctuation, blank lines, and
    Chinese end punctuation with its closing quotes (``他说：“可以。”`` is one sentence)."""
    spans = []
    start = 0
    for match in SENTENCE_END.finditer(text):
        end = match.start() + len(match.group("cjk") or "")
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
