"""Judges decide, claim by claim, which documents of the generator's context support it.

A verdict is graded (0 unsupported, 1 partly, 2 fully supported) and names the supporting
documents; ``supported`` is the grade compared with the judge's documented threshold.

- ``lexical`` (default, offline, deterministic): content-word overlap between the claim and a
  sentence window of a context passage, with guards so that a changed number (in any written
  form), a flipped negation, a contrary in the same slot ("pleaded guilty" for "pleaded no
  contest") or an unwarranted generalisation ("any order") never counts as support (English
  read by :mod:`rag_bench.text.polarity`; see docs/claims.md). It reads
  Chinese through the pipeline's analyzer (``zh`` or ``auto``): full-width digits and Chinese
  numerals before a unit count as numbers (``７天`` = ``七天`` = ``7天``), and Chinese negation
  cues (不, 没有, 无法, 未, 禁止, ...; 除外 after what it excludes) are read clause by clause.
- ``annotated``: the human labels of the dataset's ``answers.jsonl`` (exact, for recorded answers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rag_bench.components.base import Capability, Judge
from rag_bench.components.registry import component
from rag_bench.data.dataset import Dataset
from rag_bench.errors import RagBenchError, UsageError
from rag_bench.model import Chunk, Claim, Query, Verdict
from rag_bench.text.numbers import numbers
from rag_bench.text.polarity import (
    NEGATION_CUES,
    NEGATION_SCOPE,
    RAW_WORD,
    UNIVERSAL_EN,
    clauses,
    contrary_clash,
    generalises,
    negation_clash,
)
from rag_bench.text.scripts import HAN, has_han, zh_tokens
from rag_bench.text.sentences import split_sentences

# Clauses (rag_bench.text.polarity.clauses): the polarity of a word is read in the clause of the
# window that matches the claim's clause best, so "7天内可以退货，生鲜商品不支持退货" supports
# "7天内可以退货".

# Chinese negation, on jieba words: a cue negates up to ZH_NEGATION_SCOPE words after it in its
# clause; the scope also ends at a conjunction or a new modal (ZH_SCOPE_END), except right
# after the cue (不可以退货 negates 可以 and 退货; 不满意可以退货 only 满意). 除外/例外 negate the
# words before them (生鲜商品除外), and 除(了) ... 外 what stands between.
ZH_NEGATION_CUES = frozenset(
    "不 没 没有 无 非 未 别 勿 莫 不能 不可 不可以 不会 不得 不要 不用 不必 不需 不需要 无法 "
    "无须 无需 不予 不再 未能 未曾 从未 从不 绝不 决不 并非 并不 并未 毫无 禁止 严禁 请勿 切勿 "
    "不准 不许 不宜 不应 不应该 不该 不是 没法 不支持 不包括 不含".split()
)
ZH_POST_NEGATION = frozenset({"除外", "例外"})
ZH_EXCEPT = (frozenset({"除", "除了"}), frozenset({"外", "以外", "之外"}))
# Words that start with a cue character but do not negate (jieba keeps most, such as 非常 or
# 不锈钢, as one word already).
ZH_PSEUDO_NEGATION = (
    "无理由 不仅 不但 不管 不论 不久 不断 不少 不错 不同 不得不 非常 无论 未来 别人 别的 "
    "差不多 不一定要".split()
)
ZH_SCOPE_END = frozenset(
    "但 但是 而 却 才 则 便 也 就 可以 可 能 即可 并且 而且 或 或者 还是 因为 所以 如果 只要 "
    "只有 否则 需要 须 必须".split()
)
ZH_NEGATION_SCOPE = 5

# Universal quantifiers: a claim that says "any order" or 所有商品 generalises (in English, read
# by rag_bench.text.polarity.generalises: not "do not have any issues", not "all of these"); the
# passage must generalise too (any of these words), else the claim is not supported.
# Distributive each/每 is not among them.
UNIVERSAL = re.compile(
    UNIVERSAL_EN.pattern + "|任何|所有|一切|全部|一律|总是|始终|凡是|无论", re.IGNORECASE
)


def _join(words: list[str]) -> str:
    """Words back into text: no space between Han characters, a space elsewhere."""
    return re.sub(f"(?<=[{HAN}]) (?=[{HAN}])", "", " ".join(words))


def _zh_negated(clause: str, analyzer) -> set[str]:
    """Index terms in the scope of a Chinese negation cue within one clause."""
    words = zh_tokens(clause)
    scoped: set[str] = set()
    for i, word in enumerate(words):
        if word in ZH_NEGATION_CUES:
            ahead = "".join(words[i : i + 3])
            if any(ahead.startswith(p) for p in ZH_PSEUDO_NEGATION):
                continue
            scope: list[str] = []
            for j, following in enumerate(words[i + 1 : i + 1 + ZH_NEGATION_SCOPE]):
                if j and (following in ZH_SCOPE_END or following in ZH_NEGATION_CUES):
                    break
                scope.append(following)
            scoped.update(analyzer.terms(_join(scope)))
        elif word in ZH_POST_NEGATION:
            scope = []
            for preceding in reversed(words[max(0, i - ZH_NEGATION_SCOPE) : i]):
                if preceding in ZH_SCOPE_END or preceding in ZH_EXCEPT[0]:
                    break
                scope.insert(0, preceding)
            scoped.update(analyzer.terms(_join(scope)))
        elif word in ZH_EXCEPT[0]:
            rest = words[i + 1 : i + 1 + 2 * ZH_NEGATION_SCOPE]
            end = next((j for j, w in enumerate(rest) if w in ZH_EXCEPT[1]), None)
            if end is not None:
                scoped.update(analyzer.terms(_join(rest[:end])))
    return scoped


def negated_terms(text: str, analyzer) -> set[str]:
    """Index terms that stand within a few words after a negation cue (English), or in the
    scope of a Chinese cue within their clause."""
    words = [w.lower().replace("’", "'") for w in RAW_WORD.findall(text)]
    scoped: set[str] = set()
    for i, word in enumerate(words):
        if word in NEGATION_CUES or word.endswith("n't"):
            scoped.update(analyzer.terms(" ".join(words[i + 1 : i + 1 + NEGATION_SCOPE])))
    if has_han(text):
        for clause in clauses(text):
            if has_han(clause):
                scoped |= _zh_negated(clause, analyzer)
    return scoped


def polarity_clash(claim: str, window: str, analyzer) -> bool:
    """Whether the claim denies what the window asserts, or asserts what it denies.

    English is read head by head (:func:`rag_bench.text.polarity.negation_clash`): "Water damage
    is not covered by the warranty" agrees with "The warranty does not cover water damage", and
    "Fresh food can be returned" clashes with "Fresh food cannot be returned". Chinese is read
    term by term: a term the two share is in the scope of a negation cue on one side only, its
    polarity in the window read in the window's clause that shares the most terms with the
    claim's clause holding it.
    """
    if not (has_han(claim) or has_han(window)):
        return negation_clash(claim, window, analyzer)
    shared = set(analyzer.terms(claim)) & set(analyzer.terms(window))
    return bool(shared) and _term_polarity_clash(claim, window, shared, analyzer)


def _term_polarity_clash(claim: str, window: str, shared: set[str], analyzer) -> bool:
    parts = [(set(analyzer.terms(c)), negated_terms(c, analyzer)) for c in clauses(window)]
    for clause in clauses(claim):
        terms = set(analyzer.terms(clause))
        negated_here = negated_terms(clause, analyzer)
        for term in terms & shared:
            holders = [p for p in parts if term in p[0]]
            if not holders:
                continue  # split over two clauses by the break; nothing to compare
            best = max(holders, key=lambda p: len(p[0] & terms))
            if (term in negated_here) != (term in best[1]):
                return True
    return False


def check_grade(supported_at: int) -> None:
    if supported_at not in (1, 2):
        raise UsageError(
            f"judge.supported_at={supported_at} is not 1 or 2",
            "2 = fully supported, 1 = at least partly",
        )


@component(
    "judge",
    "lexical",
    description="content-word overlap with a sentence window, number and negation guards",
)
class LexicalJudge(Judge):
    """Grade 2 when ≥ ``full`` of the claim's content words stand in one sentence window of a
    context passage, 1 when ≥ ``partial`` do; a claim counts as supported from grade
    ``supported_at`` on. Numbers must all appear in the passage and no shared word may be
    negated on one side only, else the grade is 0."""

    capabilities = frozenset({Capability.PREPARE})

    def __init__(self, full: float = 0.75, partial: float = 0.5, supported_at: int = 1):
        if not 0 < partial <= full <= 1:
            raise UsageError(
                f"judge thresholds partial={partial}, full={full}", "use 0 < partial ≤ full ≤ 1"
            )
        check_grade(supported_at)
        self.full, self.partial, self.supported_at = full, partial, supported_at
        self.analyzer: Any = None  # the pipeline's analyzer, given by fit, prepare or load
        self._read: dict[str, _Passage] = {}  # passage text → what grading reads of it
        self._read_by: Any = None  # the analyzer that read them

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.analyzer = analyzer

    def _windows(self, text: str) -> list[str]:
        """Single sentences and neighbouring pairs: a fact may straddle a sentence break."""
        sentences = [text[s:e] for s, e in split_sentences(text)]
        return sentences + [f"{a}\n{b}" for a, b in zip(sentences, sentences[1:])]

    def _passage(self, text: str) -> _Passage:
        """What grading reads of a passage whatever the claim, read once per passage: every
        claim of every answer whose context holds it reuses it (a service's whole documents
        are read thousands of times over a run otherwise)."""
        if self._read_by is not self.analyzer:  # read by another analyzer: read again
            self._read, self._read_by = {}, self.analyzer
        found = self._read.get(text)
        if found is None:
            windows = self._windows(text)
            terms = [frozenset(self.analyzer.terms(w)) for w in windows]
            found = _Passage(
                windows=windows,
                terms=terms,
                words=frozenset().union(*terms),
                shortest=min(range(len(windows)), key=lambda i: len(windows[i]), default=0),
                numbers=frozenset(numbers(text, lenient=True)),
                universal=UNIVERSAL.search(text) is not None,
                squeezed=_squeezed(text),
            )
            if len(self._read) >= PASSAGES_KEPT:
                self._read.pop(next(iter(self._read)))  # the oldest first
            self._read[text] = found
        return found

    def grade(self, claim: str, passage: str) -> Grading:
        """Best grade of the claim against any sentence window of the passage, why, and the
        window that decided it.

        Content words must be found within one window, the claim's numbers anywhere in the
        passage (a table row or a neighbouring sentence may carry them), a claim about "any" or
        "all" needs a passage that generalises too, and the passage's sentence closest to the
        claim must not negate what the claim asserts (or vice versa).
        """
        return self._grade(self._claim(claim), self._passage(passage))

    def _claim(self, text: str) -> _Claim:
        """What grading reads of a claim whatever the passage."""
        return _Claim(
            text=text,
            terms=frozenset(self.analyzer.terms(text)),
            numbers=frozenset(numbers(text)),
            universal=bool(UNIVERSAL.search(text) if has_han(text) else generalises(text)),
            squeezed=_squeezed(text).rstrip(".!?。！？；;:："),
        )

    def _grade(self, claim: _Claim, read: _Passage) -> Grading:
        if claim.squeezed and claim.squeezed in read.squeezed:  # a quote, word for word
            return Grading(2, 1.0, "the claim quotes the passage word for word", "")
        windows = read.windows
        if not windows:
            return Grading(0, 0.0, "the passage has no sentence", "")
        if claim.terms.isdisjoint(read.words):  # no window has any: the shortest is closest
            top, closest = 0, read.shortest
        else:
            found = [len(claim.terms & terms) for terms in read.terms]
            top = max(found)  # the window with most of the claim's words, the shortest of those
            ties = (i for i, n in enumerate(found) if n == top)
            closest = min(ties, key=lambda i: len(windows[i]))
        best, evidence = top / len(claim.terms), windows[closest]
        missing = claim.numbers - read.numbers
        if missing:
            return Grading(0, best, f"the passage lacks the number {min(missing)}", evidence)
        if claim.universal and not read.universal:
            reason = "the claim generalises (any, all, 任何, 所有) and the passage does not"
            return Grading(0, best, reason, evidence)
        if best < self.partial:
            return Grading(0, best, f"at most {best:.0%} of the claim's content words", evidence)
        if polarity_clash(claim.text, evidence, self.analyzer):
            return Grading(0, best, "the claim and the passage differ in negation", evidence)
        text = claim.text
        contrary = None if has_han(text) else contrary_clash(text, evidence, self.analyzer)
        if contrary:
            reason = f"the passage says otherwise where the claim says “{contrary}”"
            return Grading(0, best, reason, evidence)
        grade = 2 if best >= self.full else 1
        return Grading(grade, best, f"{best:.0%} of the claim's content words", evidence)

    def judge(
        self, query: Query, claims: Sequence[Claim], context: Sequence[Chunk]
    ) -> list[Verdict]:
        verdicts = []
        for claim in claims:
            if not self.analyzer.terms(claim.text):
                verdicts.append(Verdict(None, None, (), "no content words to check"))
                continue
            grades: dict[str, int] = {}
            deciding: tuple[Grading, Chunk] | None = None
            read = self._claim(claim.text)
            for chunk in context:
                found = self._grade(read, self._passage(chunk.text))
                grades[chunk.doc_id] = max(found.grade, grades.get(chunk.doc_id, 0))
                if deciding is None or (found.grade, found.coverage) > (
                    deciding[0].grade,
                    deciding[0].coverage,
                ):
                    deciding = (found, chunk)
            best = max(grades.values(), default=0)
            by = tuple(d for d, g in grades.items() if g >= self.supported_at)
            reason = _reason(*deciding) if deciding else "no context"
            score = (deciding[0].grade + deciding[0].coverage) / 3 if deciding else 0.0
            verdicts.append(Verdict(best, best >= self.supported_at, by, reason, score))
        return verdicts


@dataclass(frozen=True)
class _Claim:
    """A claim as the lexical judge reads it, whatever the passage."""

    text: str
    terms: frozenset[str]  # its analysed content words
    numbers: frozenset[str]
    universal: bool  # whether it generalises (any, all, 任何, 所有)
    squeezed: str  # lower case, whitespace collapsed, final punctuation off (for a quote)


@dataclass(frozen=True)
class _Passage:
    """A passage as the lexical judge reads it, whatever the claim."""

    windows: list[str]  # sentences and neighbouring pairs
    terms: list[frozenset[str]]  # each window's analysed terms
    words: frozenset[str]  # all of them
    shortest: int  # the first of the shortest windows
    numbers: frozenset[str]  # its numbers, leniently read
    universal: bool  # whether it generalises (any, all, 任何, 所有)
    squeezed: str  # lower case, whitespace collapsed (for a quote)


PASSAGES_KEPT = 4096  # passages whose reading the lexical judge keeps (oldest out first)


@dataclass(frozen=True)
class Grading:
    """The lexical judge's grade of a claim against one passage, and what decided it."""

    grade: int
    coverage: float  # share of the claim's content words in the closest window
    reason: str
    evidence: str  # the passage window the grade was read in ("" for a quote)


def _reason(found: Grading, chunk: Chunk) -> str:
    """The verdict's reason: the deciding chunk (the best-graded one, or for an unsupported
    claim the closest), why, and the window it was read in."""
    where = f"{chunk.chunk_id}: {found.reason}"
    if not found.evidence:
        return where
    window = " ".join(found.evidence.split())
    window = window if len(window) <= 160 else window[:157] + "..."
    return f"{where}: “{window}”"


def _squeezed(text: str) -> str:
    return " ".join(text.lower().split())


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


@component("judge", "annotated", description="the claim labels of answers.jsonl (supported_by)")
class AnnotatedJudge(Judge):
    capabilities = frozenset({Capability.PREPARE})

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.answers = dataset.answers

    def judge(
        self, query: Query, claims: Sequence[Claim], context: Sequence[Chunk]
    ) -> list[Verdict]:
        recorded = self.answers.get(query.id)
        if recorded is None:
            raise RagBenchError(
                f"the annotated judge has no labels for query {query.id!r}",
                "use it with the recorded variant, or pick --judge lexical",
            )
        labelled = {_normal(c.text): c for c in recorded.claims}
        in_context = {c.doc_id for c in context}
        verdicts = []
        for i, claim in enumerate(claims):
            label = labelled.get(_normal(claim.text))
            if label is None and len(claims) == len(recorded.claims):
                label = recorded.claims[i]
            if label is None or label.supported_by is None:
                verdicts.append(Verdict(None, None, (), "no label for this claim"))
                continue
            by = tuple(d for d in label.supported_by if d in in_context)
            verdicts.append(Verdict(2 if by else 0, bool(by), by, "annotated"))
        return verdicts
