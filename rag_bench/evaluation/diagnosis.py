"""One failure class per query, from the seeds' taxonomy of RAG failures.

The rules are applied in order; "relevant" means graded ≥ 1, and the context is what the
generator was given (its top chunks):

1. an unanswerable query: refused → ``correct_refusal``, otherwise ``answered_unanswerable``;
2. no relevant document in the context → ``retrieval_miss``;
3. a refusal → ``wrongly_refused``;
4. a claim no context document supports → ``fabricated``;
5. a citation that does not support its claim → ``wrong_citation``;
6. no claim supported by a relevant document → ``retrieved_not_used``;
7. otherwise → ``ok``.

Claims a judge could not judge (no label, nothing to check) take part in none of the rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag_bench.model import Claim, Verdict

FAILURE_CLASSES = (
    "ok",
    "correct_refusal",
    "retrieval_miss",
    "retrieved_not_used",
    "fabricated",
    "wrong_citation",
    "wrongly_refused",
    "answered_unanswerable",
)


def diagnose(
    should_refuse: bool,
    refused: bool,
    claims: Sequence[Claim],
    verdicts: Sequence[Verdict],
    context_docs: Sequence[str],
    grades: dict[str, int],
) -> str:
    if should_refuse:
        return "correct_refusal" if refused else "answered_unanswerable"
    relevant = {d for d in context_docs if grades.get(d, 0) >= 1}
    if not relevant:
        return "retrieval_miss"
    if refused:
        return "wrongly_refused"
    judged = [(c, v) for c, v in zip(claims, verdicts) if v.supported is not None]
    if any(not v.supported for _, v in judged):
        return "fabricated"
    if any(d not in v.supported_by for c, v in judged for d in c.citations):
        return "wrong_citation"
    if not any(set(v.supported_by) & relevant for _, v in judged):
        return "retrieved_not_used"
    return "ok"
