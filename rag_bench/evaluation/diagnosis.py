"""One failure class per query, with the pipeline stage it points at and what to try there
(the bad-case taxonomy of the seeds, extended so that every class names something to change).

The answering documents of a query are its judged documents of the highest grade; a multi-hop
question needs all of them, any other question one. The context is what the generator was
given (its top chunks), the ranking what the retriever and reranker returned (the retrieval
depth). The rules are applied in order; the first that matches decides:

1. an unanswerable query: refused → ``correct_refusal``, otherwise ``answered_unanswerable``;
2. an answer that is correct (it holds the gold answer or all its key facts), with every judged
   claim supported and every citation right → ``ok``;
3. the context lacks what the answer needs: an answering document still in the ranking →
   ``ranking``; a multi-hop question with some of its hops in the context → ``incomplete``;
   otherwise → ``retrieval_miss`` (a lone grade-1 document is not the answer's evidence);
4. a refusal → ``wrongly_refused`` (the context held the answer);
5. a claim no context document supports → ``fabricated``;
6. a citation that does not support its claim → ``wrong_citation``;
7. no claim supported by a relevant document → ``retrieved_not_used``;
8. against the gold answer: some of its facts → ``incomplete``, none → ``grounded_but_wrong``;
9. otherwise (no gold answer to compare with) → ``ok``.

Claims a judge could not judge (no label, nothing to check) take part in none of the rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_bench.model import Claim, Verdict

MULTI_HOP = "multi-hop"


@dataclass(frozen=True)
class Action:
    """Where a failure points and what to try there."""

    stage: str | None
    fix: str | None


FAILURE_ACTIONS: dict[str, Action] = {
    "ok": Action(None, None),
    "correct_refusal": Action(None, None),
    "retrieval_miss": Action(
        "retrieval",
        "no answering document within the retrieval depth: tune the chunk size, add hybrid "
        "(sparse + dense) retrieval, rewrite the query",
    ),
    "ranking": Action(
        "rerank",
        "the answering document was retrieved but ranked out of the generator's context: add "
        "or tune a reranker, or give the generator more chunks (context_k)",
    ),
    "incomplete": Action(
        "retrieval",
        "a hop of the multi-hop question is missing from the context: retrieve per "
        "sub-question (query decomposition), raise the retrieval depth",
    ),
    "wrongly_refused": Action(
        "generation",
        "the context held the answer and the generator refused: loosen the refusal threshold "
        "(min_coverage) or the prompt's refusal rule",
    ),
    "fabricated": Action(
        "generation",
        "claims the context does not support: check citations, lower the temperature, refuse "
        "when the evidence is weak",
    ),
    "wrong_citation": Action(
        "generation",
        "citations to documents that do not support their claim: cite per sentence, verify "
        "citations after generation",
    ),
    "retrieved_not_used": Action(
        "generation",
        "the answer leans on non-relevant documents (a superseded version, another region) "
        "although a relevant one was in the context: prompt to prefer the current and specific "
        "source, add citation constraints",
    ),
    "grounded_but_wrong": Action(
        "generation",
        "every claim is grounded yet the gold facts are missing: the answer took a neighbouring "
        "fact (another product, version or region); make the generator answer the asked "
        "attribute, filter superseded documents",
    ),
    "answered_unanswerable": Action(
        "generation",
        "answered a question no document answers: raise the refusal threshold, require "
        "support for every claim",
    ),
}
# ``incomplete`` from the answer itself (the context was complete) points at the generator.
PARTIAL_ANSWER = Action(
    "generation",
    "the answer states only part of the gold facts: allow more sentences (max_sentences), ask "
    "the generator to answer every part of the question",
)
FAILURE_CLASSES = tuple(FAILURE_ACTIONS)


@dataclass(frozen=True)
class Diagnosis:
    failure_class: str | None  # None: a query without labels whose claims show no failure
    action: Action

    @property
    def stage(self) -> str | None:
        return self.action.stage

    @property
    def fix(self) -> str | None:
        return self.action.fix


@dataclass(frozen=True)
class Case:
    """What the diagnosis of one query looks at."""

    should_refuse: bool
    refused: bool
    claims: Sequence[Claim]
    verdicts: Sequence[Verdict]
    context_docs: Sequence[str]  # documents of the generator's context
    grades: dict[str, int]  # judged documents of the query
    ranked_docs: Sequence[str] = field(default=())  # documents of the final ranking
    multi_hop: bool = False
    correctness: str | None = None  # correct / partial / wrong; None without a gold answer
    labelled: bool = True  # False: the qrels judge nothing of the query (a user's query)


def _found(name: str) -> Diagnosis:
    return Diagnosis(name, FAILURE_ACTIONS[name])


def answering_docs(grades: dict[str, int]) -> set[str]:
    """The judged documents of the query's highest grade (≥ 1)."""
    top = max(grades.values(), default=0)
    return {d for d, g in grades.items() if g == top} if top >= 1 else set()


def evidence_gap(case: Case) -> str | None:
    """``ranking``, ``incomplete`` or ``retrieval_miss`` when the context lacks what the answer
    needs, else None."""
    needed = answering_docs(case.grades)
    present = needed & set(case.context_docs)
    if present and (present == needed or not case.multi_hop):
        return None
    missing = needed - present
    if missing & set(case.ranked_docs):
        return "ranking"
    return "incomplete" if present else "retrieval_miss"


def diagnose(case: Case) -> Diagnosis:
    if case.should_refuse:
        return _found("correct_refusal" if case.refused else "answered_unanswerable")
    judged = [(c, v) for c, v in zip(case.claims, case.verdicts) if v.supported is not None]
    fabricated = any(not v.supported for _, v in judged)
    miscited = any(d not in v.supported_by for c, v in judged for d in c.citations)
    if not case.refused and case.correctness == "correct" and not (fabricated or miscited):
        return _found("ok")
    if not case.labelled:  # no judgement: only what the claims themselves show can be said
        if not case.refused and (fabricated or miscited):
            return _found("fabricated" if fabricated else "wrong_citation")
        return Diagnosis(None, Action(None, None))
    gap = evidence_gap(case)
    if gap is not None:
        return _found(gap)
    if case.refused:
        return _found("wrongly_refused")
    if fabricated:
        return _found("fabricated")
    if miscited:
        return _found("wrong_citation")
    relevant = {d for d in case.context_docs if case.grades.get(d, 0) >= 1}
    if not any(set(v.supported_by) & relevant for _, v in judged):
        return _found("retrieved_not_used")
    if case.correctness == "partial":
        return Diagnosis("incomplete", PARTIAL_ANSWER)
    if case.correctness == "wrong":
        return _found("grounded_but_wrong")
    return _found("ok")
