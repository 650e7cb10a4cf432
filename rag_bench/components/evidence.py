"""A claim's evidence: the few excerpts of its context that an LLM judge needs to grade it.

A judge that sends an answer's whole context (five whole documents: 6,000 tokens on
kestrel-kb) pays for every word of it on every answer, and a small model loses the one line
that matters among them. :func:`select_evidence` keeps, for each claim,

1. the best unit of each document the claim cites (its own ``[doc_id]`` markers), then
2. the units most similar to the claim anywhere in the context (units sharing no term with it
   are never chosen),

``per_claim`` units in all, each shown with the unit before and after it (a table row keeps its
neighbours, a sentence its lead-in). A *unit* is a sentence of one line: lines are split first,
so a table row is a unit of its own. Similarity is the share of the claim's distinct index
terms (the run's analyzer: stemmed English, Chinese words) that the unit holds; ties go to the
earlier passage and the earlier unit, so the choice is deterministic. The claims take turns (the
best unit of every claim first, then the second, ...) until ``max_chars`` of excerpt text is
used; the first excerpt is always kept. A claim that shares no term with its context and
cites nothing in it gets no excerpt: nothing there could support it. Excerpts of one passage
that touch are merged, and the excerpts keep their passage's document id and title, in
context order.

A context that already fits in ``max_chars`` is returned whole: nothing is gained by cutting it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rag_bench.errors import RagBenchError
from rag_bench.model import Chunk, Claim
from rag_bench.text.sentences import split_sentences

LINE = re.compile(r"[^\n]+")


def units(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of each line of ``text``, in order."""
    spans = []
    for line in LINE.finditer(text):
        for start, end in split_sentences(line.group()):
            spans.append((line.start() + start, line.start() + end))
    return spans


def context_chars(context: Sequence[Chunk]) -> int:
    return sum(len(c.text) for c in context)


def select_evidence(
    claims: Sequence[Claim],
    context: Sequence[Chunk],
    analyzer: Any,
    per_claim: int,
    max_chars: int,
) -> list[Chunk]:
    """The excerpts of ``context`` that the claims are judged against (see the module
    docstring). ``per_claim`` 0, or a context of at most ``max_chars``, gives it whole."""
    if per_claim == 0 or context_chars(context) <= max_chars or not claims:
        return list(context)
    if analyzer is None:
        raise RagBenchError(
            "the judge selects evidence with the run's analyzer, but it was not prepared",
            "call judge.prepare(dataset, chunks, analyzer) first, or set judge.evidence_k=0",
        )
    spans = [units(c.text) for c in context]
    terms = [[set(analyzer.terms(c.text[s:e])) for s, e in spans[i]] for i, c in enumerate(context)]
    rankings = [_ranked(claim, context, terms, analyzer)[:per_claim] for claim in claims]
    chosen: dict[int, set[int]] = {}  # passage → units shown
    used = 0
    for turn in range(per_claim):
        for ranking in rankings:
            if turn >= len(ranking):
                continue
            i, j = ranking[turn]
            window = set(range(max(j - 1, 0), min(j + 2, len(spans[i]))))
            new = window - chosen.get(i, set())
            if not new:
                continue
            size = sum(spans[i][u][1] - spans[i][u][0] for u in new)
            if chosen and used + size > max_chars:
                continue
            chosen.setdefault(i, set()).update(new)
            used += size
    return [
        excerpt
        for i, chunk in enumerate(context)
        if i in chosen
        for excerpt in _excerpts(chunk, spans[i], sorted(chosen[i]))
    ]


def _ranked(claim: Claim, context, terms, analyzer) -> list[tuple[int, int]]:
    """(passage, unit) pairs for one claim: the best unit of each cited passage, then all
    units by similarity."""
    wanted = set(analyzer.terms(claim.text))

    def score(i: int, j: int) -> float:
        return len(wanted & terms[i][j]) / len(wanted) if wanted else 0.0

    order = sorted(
        ((i, j) for i in range(len(context)) for j in range(len(terms[i]))),
        key=lambda ij: (-score(*ij), ij),
    )
    cited = set(claim.citations)
    first: list[tuple[int, int]] = []
    seen_docs: set[str] = set()
    for i, j in order:
        doc = context[i].doc_id
        if doc in cited and doc not in seen_docs:
            seen_docs.add(doc)
            first.append((i, j))
    return first + [ij for ij in order if ij not in first and score(*ij) > 0]


def _excerpts(chunk: Chunk, spans: list[tuple[int, int]], shown: list[int]) -> list[Chunk]:
    """One excerpt per run of consecutive units shown."""
    runs: list[list[int]] = []
    for u in shown:
        if runs and u == runs[-1][-1] + 1:
            runs[-1].append(u)
        else:
            runs.append([u])
    out = []
    for run in runs:
        start, end = spans[run[0]][0], spans[run[-1]][1]
        out.append(
            Chunk(
                f"{chunk.chunk_id}@{start}",
                chunk.doc_id,
                chunk.start + start,
                chunk.start + end,
                chunk.text[start:end],
                chunk.title,
            )
        )
    return out
