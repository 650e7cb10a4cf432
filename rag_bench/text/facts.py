"""Key facts of a reference answer: its numbers, dates, amounts, codes and named entities.

A sentence-long gold answer ("INC-2025-0211 was a SEV1 incident, and SEV1 postmortem drafts are
due 5 business days after resolution.") is never matched word for word by a good answer, but its
facts are: ``INC-2025-0211``, ``SEV1``, ``5``. A fact is found in a text when its numbers are
among the text's numbers (``1,200`` = ``1200``, ``七天`` = ``7天``) and its words among the text's
words, case and punctuation aside (``September 2025`` is found in "August and September of
2025"); a code when the text names the same code (``KS-440`` = ``ks440``, not ``KS-440R``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_bench.text.numbers import WORD_RUN, numbers
from rag_bench.text.scripts import HAN

# A code: one token holding digits and a capital letter, or a letter right before a digit
# (KS-220, E-4102, KP-R12, INC-2025-0211, SEV1, v2025.1; not 4-hour); dots and hyphens inside it
# belong to it.
CODE = re.compile(r"(?<![\w.-])(?=[\w.-]*\d)(?=[\w.-]*(?:[A-Z]|[a-z]\d))\w(?:[\w.-]*\w)?", re.ASCII)
# An amount: a currency sign or code and its number are one fact, read by the number
# (US$2,999, USD 5,000, €49, 12.50 EUR, $1.2 billion); so are a number and its scale word.
CURRENCY = r"(?:US\$|S\$|C\$|A\$|\$|€|£|¥|USD|EUR|GBP|SGD|CAD|AUD|JPY|CNY|RMB)"
SCALE = r"(?:\s*(?:hundred|thousand|million|billion|trillion)\b)?"
AMOUNT = re.compile(
    rf"{CURRENCY}\s?\d[\d,]*(?:\.\d+)?{SCALE}|\d[\d,]*(?:\.\d+)?{SCALE}\s?{CURRENCY}(?![A-Za-z])"
)
ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
MONTH_DATE = re.compile(
    rf"\b(?:\d{{1,2}}\s+)?(?:{'|'.join(MONTHS)})\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?,?\s+\d{{4}}\b",
    re.IGNORECASE,
)
# Capitalised words in a row (with "of"/"and"/"&" between them): a name.
NAME = re.compile(
    r"(?<!\w)[A-Z][\w’'&-]*(?:\s+(?:(?:of|and|&|de|du)\s+)?[A-Z][\w’'&-]*)*", re.ASCII
)
# Capitalised words that begin a sentence or a name without being one.
FUNCTION_WORDS = frozenset(
    "the a an in on at for to of and or but with by from each every this that these those it "
    "its if when yes no all any some after before within under over until use per i you they "
    "we he she there here what which who how why is are was were be not only also both can could "
    "do does did will would should may might must has have had my our your their".split()
)
WORD = re.compile(f"[{HAN}]|[^\\W_{HAN}]+")
SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n)$")


@dataclass(frozen=True)
class Fact:
    """One fact: its text as written, the numbers it holds and the words a text must hold too
    (none for a bare number)."""

    text: str
    numbers: frozenset[str]
    words: tuple[str, ...]
    code: str | None = None  # a code's canonical form: KS-440, ks440 and KS 440 are one code

    def found_in(self, text: str) -> bool:
        if self.code is not None:
            return mentions(text, self.code)
        if not self.numbers <= numbers(text, lenient=True):
            return False
        return set(self.words) <= set(_words(text))


def key_facts(text: str) -> list[Fact]:
    """The facts of ``text`` in the order they appear, each once: amounts, dates, codes, names
    and the remaining numbers, in digits or words (a number inside a date or a code is part of
    that fact, not one of its own; a capitalised unit after a number, as in ``31.2 W``, is no
    name)."""
    facts: list[tuple[int, Fact]] = []
    taken: list[tuple[int, int]] = []

    def add(start: int, end: int, bare_number: bool = False, code: bool = False) -> None:
        if any(s < end and start < e for s, e in taken):
            return
        taken.append((start, end))
        piece = text[start:end]
        words = () if bare_number else _words(piece)
        canonical = _canonical(piece) if code else None
        facts.append((start, Fact(piece, frozenset(numbers(piece)), words, canonical)))

    for match in AMOUNT.finditer(text):
        add(match.start(), match.end(), bare_number=True)
    for pattern in (ISO_DATE, MONTH_DATE, CODE):
        for match in pattern.finditer(text):
            add(match.start(), match.end(), code=pattern is CODE)
    for match in NAME.finditer(text):
        start, end = _name_span(text, match)
        if start < end:
            add(start, end)
    for match in re.finditer(rf"\d+(?:[.,:]\d+)*{SCALE}", text):
        add(match.start(), match.end(), bare_number=True)
    for match in WORD_RUN.finditer(text.lower()):
        if numbers(match.group()):  # "eight", "twenty-one"; not "one" or "first" alone
            add(match.start(), match.end(), bare_number=True)
    unique = {fact.text.lower(): fact for _, fact in sorted(facts, key=lambda f: f[0])}
    return list(unique.values())


def _name_span(text: str, match: re.Match) -> tuple[int, int]:
    """The span of a capitalised run without leading function words, or an empty span when
    what remains is a lone word that only starts a sentence or is a unit after a number."""
    start, end = match.start(), match.end()
    words = list(re.finditer(r"\S+", match.group()))
    while words and words[0].group().lower() in FUNCTION_WORDS:
        words.pop(0)
    if not words:
        return start, start
    start = match.start() + words[0].start()
    lone = len(words) == 1
    first = words[0].group()
    plain = first[1:].islower() or len(first) == 1
    if lone and plain and SENTENCE_START.search(text[:start]):
        return start, start
    if lone and re.search(r"\d\s*°?$", text[:start]) and len(first) <= 3:
        return start, start  # a unit: 31.2 W, 48 TB, 100 °C
    return start, end


def _words(text: str) -> tuple[str, ...]:
    """Lower-cased words, every Han character one of its own (Chinese has no spaces)."""
    return tuple(WORD.findall(text.lower()))


def codes(text: str) -> set[str]:
    """The codes of a text (product, error, incident and version codes) in a canonical form:
    lower-case letters and digits only, so ``KS-440``, ``ks440`` and ``KS 440`` are one code."""
    return {_canonical(m.group()) for m in CODE.finditer(text)}


def mentions(text: str, code: str) -> bool:
    """Whether ``text`` names the canonical ``code``: as a code, or as two adjacent words
    (``5 GB`` for ``5gb``). A longer code is another code (KS-660R is not KS-660)."""
    if code in codes(text):
        return True
    words = [_canonical(w) for w in text.split()]
    return code in {a + b for a, b in zip(words, words[1:])}


def _canonical(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())
