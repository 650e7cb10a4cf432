"""Sentence boundaries in English, Chinese and mixed text, as character spans."""

from __future__ import annotations

import re

from rag_bench.text.scripts import HAN

# Sentence ends: English punctuation followed by space and a letter (lower-case text has
# sentences too: "it ships in 3 days. returns take 30."), digit, opening bracket or Han
# character; a blank line; Chinese end punctuation (。．！？；, an ellipsis or ASCII .!? right
# after a Han character), together with the closing quotes and brackets that follow it; and a
# line break next to Chinese text (list items and table rows rarely end in 。, and Chinese is
# seldom hard-wrapped).
CLOSERS = "”’」』）)】》〕］"
SENTENCE_END = re.compile(
    f"(?<=[.!?])\\s+(?=[\"'(\\[【“「‘]|[^\\W_]|[{HAN}])"
    "|\\n\\s*\\n"
    f"|(?P<cjk>(?:[。．！？；]|(?<=[{HAN}])[.!?…])[。．！？；.!?…]*[{CLOSERS}]*)\\s*"
    f"|(?<=[{HAN}：，、{CLOSERS}])[ \\t|｜]*\\n\\s*|[ \\t]*\\n\\s*(?=[ \\t|｜]*[{HAN}])"
)


# A full stop that ends no sentence: after an abbreviation (e.g., Dr., Jan., No.), an initial
# (J. R. Smith), a one-letter piece of a dotted abbreviation (U.S.), or the number or letter of a
# list item at the start of a line, after a colon or another item ("Steps: 1. Open the tray.
# 2. Insert the drive."), and "No." before a number.
ABBREVIATIONS = (
    "e.g i.e cf vs al approx ca dr mr mrs ms prof st sr jr fig figs vol ed eds "
    "inc ltd co corp dept est min max jan feb mar apr jun jul aug sep sept oct nov dec "
    "mon tue wed thu fri sat sun"
).split()
NOT_AN_END = re.compile(
    r"(?:(?<![\w.])(?:" + "|".join(re.escape(a) for a in ABBREVIATIONS) + r")"
    r"|(?<!\w)[A-Za-z]"
    r"|(?:^|\n|[:;]|[.!?]\s)\s*(?:\d{1,2}|[a-z]))\.$",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text``: English end punctuation, blank lines, and
    Chinese end punctuation with its closing quotes (``他说：“可以。”`` is one sentence).
    Abbreviations, initials, dotted dates (``Jan. 2024``) and list numbers keep their sentence
    whole; decimals (``3.5``) never end one, as no space follows their point."""
    spans = []
    start = 0
    for match in SENTENCE_END.finditer(text):
        if _abbreviated(text, match):
            continue
        end = match.start() + len(match.group("cjk") or "")
        if text[start:end].strip():
            spans.append(_trim(text, start, end))
        start = match.end()
    if text[start:].strip():
        spans.append(_trim(text, start, len(text)))
    return spans


def _abbreviated(text: str, match: re.Match) -> bool:
    """Whether an English boundary follows a full stop that ends no sentence."""
    if match.group("cjk") is not None or "\n\n" in match.group():
        return False
    before = text[max(0, match.start() - 12) : match.start()]
    following = text[match.end() : match.end() + 1]
    if re.search(r"\bNo\.$", before) and following.isdigit():
        return True
    if following.islower() and re.search(r"\betc\.$", before, re.IGNORECASE):
        return True  # "disks, etc. are covered": etc. ends a sentence only before a capital
    return bool(NOT_AN_END.search(before))


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
