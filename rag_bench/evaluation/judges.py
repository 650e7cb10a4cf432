"""Judges decide, claim by claim, which documents of the generator's context support it.

A verdict is graded (0 unsupported, 1 partly, 2 fully supported) and names the supporting
documents; ``supported`` is the grade compared with the judge's documented threshold.

- ``lexical`` (default, offline, deterministic): content-word overlap between the claim and a
  sentence window of a context passage, with guards so that a changed number or a flipped
  negation never counts as support.
- ``annotated``: the human labels of the dataset's ``answers.jsonl`` (exact, for recorded answers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rag_bench.dataset import Dataset, Query
from rag_bench.errors import RagBenchError, UsageError
from rag_bench.evaluation.claims import SplitClaim
from rag_bench.pipeline.chunking import Chunk
from rag_bench.plugins import component
from rag_bench.text import split_sentences

NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
NEGATION_CUES = frozenset(
    "not no never none nothing neither nor cannot without can't won't isn't aren't doesn't "
    "don't didn't wasn't weren't shouldn't mustn't".split()
)
NEGATION_SCOPE = 4  # words after a cue that it negates (a NegEx-style window)
RAW_WORD = re.compile(r"[\w'’]+")


@dataclass(frozen=True)
class Verdict:
    grade: int | None  # 0 unsupported, 1 partly, 2 fully; None when the claim cannot be judged
    supported: bool | None
    supported_by: tuple[str, ...]
    reason: str


def numbers(text: str) -> set[str]:
    """Numbers in a text, thousands separators removed (1,200 == 1200)."""
    return {re.sub(r",(?=\d{3}\b)", "", n) for n in NUMBER.findall(text)}


def negated_terms(text: str, analyzer) -> set[str]:
    """Index terms that stand within a few words after a negation cue."""
    words = [w.lower().replace("’", "'") for w in RAW_WORD.findall(text)]
    scoped: set[str] = set()
    for i, word in enumerate(words):
        if word in NEGATION_CUES or word.endswith("n't"):
            scoped.update(analyzer.terms(" ".join(words[i + 1 : i + 1 + NEGATION_SCOPE])))
    return scoped


def polarity_clash(claim: str, window: str, analyzer) -> bool:
    """Whether a term the claim and the window share is negated in one and not the other."""
    shared = set(analyzer.terms(claim)) & set(analyzer.terms(window))
    return bool((negated_terms(claim, analyzer) ^ negated_terms(window, analyzer)) & shared)


def _check_grade(supported_at: int) -> None:
    if supported_at not in (1, 2):
        raise UsageError(
            f"judge.supported_at={supported_at} is not 1 or 2",
            "2 = fully supported, 1 = at least partly",
        )


@component(
    "judge",
    "lexical",
    description="content-word overlap with a sentence window, number and negation guards",
    full=0.75,
    partial=0.5,
    supported_at=1,
)
class LexicalJudge:
    """Grade 2 when ≥ ``full`` of the claim's content words stand in one sentence window of a
    context passage, 1 when ≥ ``partial`` do; a claim counts as supported from grade
    ``supported_at`` on. Numbers must all appear in the passage and no shared word may be
    negated on one side only, else the grade is 0."""

    def __init__(self, full: float = 0.75, partial: float = 0.5, supported_at: int = 1):
        if not 0 < partial <= full <= 1:
            raise UsageError(
                f"judge thresholds partial={partial}, full={full}", "use 0 < partial ≤ full ≤ 1"
            )
        _check_grade(supported_at)
        self.full, self.partial, self.supported_at = full, partial, supported_at
        self.analyzer = None

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.analyzer = analyzer

    def _windows(self, text: str) -> list[str]:
        """Single sentences and neighbouring pairs: a fact may straddle a sentence break."""
        sentences = [text[s:e] for s, e in split_sentences(text)]
        return sentences + [f"{a} {b}" for a, b in zip(sentences, sentences[1:])]

    def grade(self, claim: str, passage: str) -> tuple[int, str]:
        """Best grade of the claim against any sentence window of the passage, and why.

        Content words must be found within one window, the claim's numbers anywhere in the
        passage (a table row or a neighbouring sentence may carry them), and the passage's
        sentence closest to the claim must not negate what the claim asserts (or vice versa).
        """
        wanted = set(self.analyzer.terms(claim))
        if not numbers(claim) <= numbers(passage):
            return 0, "a number of the claim is not in the passage"
        windows = self._windows(passage)
        coverage = [len(wanted & set(self.analyzer.terms(w))) / len(wanted) for w in windows]
        if not coverage or max(coverage) < self.partial:
            return 0, "no sentence shares enough content words"
        closest = max(range(len(windows)), key=lambda i: (coverage[i], -len(windows[i])))
        if polarity_clash(claim, windows[closest], self.analyzer):
            return 0, "the claim and the passage differ in negation"
        best = max(coverage)
        grade = 2 if best >= self.full else 1
        return grade, f"{best:.0%} of the claim's content words in one passage window"

    def judge(
        self, query: Query, claims: Sequence[SplitClaim], context: Sequence[Chunk]
    ) -> list[Verdict]:
        verdicts = []
        for claim in claims:
            if not self.analyzer.terms(claim.text):
                verdicts.append(Verdict(None, None, (), "no content words to check"))
                continue
            grades: dict[str, int] = {}
            reasons: list[str] = []
            for chunk in context:
                grade, reason = self.grade(claim.text, chunk.text)
                grades[chunk.doc_id] = max(grade, grades.get(chunk.doc_id, 0))
                reasons.append(reason)
            best = max(grades.values(), default=0)
            by = tuple(d for d, g in grades.items() if g >= self.supported_at)
            reason = next(
                (r for r in reasons if r.endswith("window")),
                reasons[0] if reasons else "no context",
            )
            verdicts.append(Verdict(best, best >= self.supported_at, by, reason))
        return verdicts


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


@component("judge", "annotated", description="the claim labels of answers.jsonl (supported_by)")
class AnnotatedJudge:
    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.answers = dataset.answers

    def judge(
        self, query: Query, claims: Sequence[SplitClaim], context: Sequence[Chunk]
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
