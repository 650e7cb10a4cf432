"""Answer-side metrics of one query: what the generator did with the evidence.

Which metrics exist, their direction and the queries they apply to are declared in the metric
catalogue (:mod:`rag_bench.evaluation.measures`); this module computes them.

Every metric is NULL (None) where it is undefined, never a silent 0: faithfulness without
claims, citation precision without citations, retrieval-context metrics without a gold answer
or relevant documents, the refusal metrics on the kind of query they do not apply to.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag_bench.evaluation.correctness import (
    best_fact_recall,
    best_over,
    contains,
    exact_match,
    token_f1,
)
from rag_bench.evaluation.measures import answer_metric_names
from rag_bench.model import Chunk, Claim, Query, Relevance, Verdict
from rag_bench.text.asked import asked_kind, gives
from rag_bench.text.claims import strip_markers
from rag_bench.text.scripts import HAN

# a word of answer_length: one Han character, or a run of other letters and digits
LENGTH_WORD = re.compile(f"[{HAN}]|[^\\W_{HAN}]+")


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


@dataclass(frozen=True)
class AnswerEvidence:
    """Everything the answer metrics of one query look at."""

    query: Query
    answer: str
    refused: bool
    claims: Sequence[Claim]
    verdicts: Sequence[Verdict]
    ranking: Sequence[Chunk]  # the final chunk ranking, best first
    grades: dict[str, int]  # judged documents of the query
    judged_relevance: Relevance | None = None  # the judge's grade, when it gives one
    labelled: bool = True  # False: the qrels judge none of the query's documents (a user's)


def claim_metrics(e: AnswerEvidence) -> dict[str, float | None]:
    judged = [(c, v) for c, v in zip(e.claims, e.verdicts) if v.supported is not None]
    links = [(d, v) for c, v in judged for d in c.citations]
    return {
        "faithfulness": _ratio(sum(bool(v.supported) for _, v in judged), len(judged)),
        "citation_precision": _ratio(sum(d in v.supported_by for d, v in links), len(links)),
        "citation_coverage": _ratio(sum(1 for c in e.claims if c.citations), len(e.claims)),
    }


def lexical_relevance(query: str, answer: str, analyzer) -> float | None:
    """The share of the query's content terms the answer contains, 0 when the query asks for a
    kind of fact (a phone number, an address, ...) the answer does not give; None without
    content terms."""
    wanted = set(analyzer.terms(query))
    if not wanted:
        return None
    kind = asked_kind(query)
    if kind is not None and not gives(kind, answer):
        return 0.0  # on topic, but without the phone number, address, ... asked for
    return len(wanted & set(analyzer.terms(answer))) / len(wanted)


def answer_length(answer: str) -> int:
    """The words of an answer (citation markers removed first): each Han character is one word,
    as is each run of other letters and digits (``KS-660`` is two, ``2.5`` two)."""
    return len(LENGTH_WORD.findall(strip_markers(answer)))


def response_metrics(e: AnswerEvidence, analyzer) -> dict[str, float | None]:
    refuse = e.query.should_refuse
    golds = e.query.gold_answers
    text = strip_markers(e.answer)
    relevance = None
    if e.judged_relevance is not None:  # the judge graded it: its grade, or NULL if unusable
        relevance = e.judged_relevance.value
    elif not e.refused:
        relevance = lexical_relevance(e.query.text, text, analyzer)
    exact = f1 = within = facts = None
    if golds and not refuse:  # each the best over the gold answers, as SQuAD scores them
        exact = 0.0 if e.refused else best_over(exact_match, text, golds)
        f1 = 0.0 if e.refused else best_over(token_f1, text, golds)
        within = 0.0 if e.refused else best_over(lambda t, g: float(contains(t, g)), text, golds)
        facts = best_fact_recall(text, golds, e.query.text)
        facts = 0.0 if e.refused and facts is not None else facts
    return {
        "answer_relevance": relevance,
        "answer_length": None if e.refused else float(answer_length(e.answer)),
        "answer_exact": exact,
        "answer_f1": f1,
        "answer_contains": within,
        "key_fact_recall": facts,
        "correct_refusal": float(e.refused) if refuse else None,
        "over_refusal": None if refuse else float(e.refused),
        "answered_unanswerable": float(not e.refused) if refuse else None,
    }


def context_metrics(e: AnswerEvidence, ks: Sequence[int], analyzer) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    gold = None if e.query.should_refuse else e.query.answer
    gold_terms = set(analyzer.terms(gold)) if gold else set()
    ranking = e.ranking[: max(ks, default=0)]
    # running counts down the ranking, so every cutoff reads them instead of recomputing
    relevant = np.cumsum([e.grades.get(c.doc_id, 0) >= 1 for c in ranking], dtype=np.int64)
    found_upto: list[int] = []  # gold terms found within the first i + 1 chunks
    found: set[str] = set()
    spans = np.zeros(len(ranking), dtype=bool)
    for i, chunk in enumerate(ranking):
        if gold_terms and len(found) < len(gold_terms):
            found |= gold_terms & set(analyzer.terms(chunk.text))
        found_upto.append(len(found))
        spans[i] = contains(chunk.text, gold) if gold else False
    spans = np.logical_or.accumulate(spans) if len(spans) else spans
    for k in ks:
        n = min(k, len(ranking))
        precision = (
            None
            if e.query.should_refuse or not e.labelled
            else _ratio(int(relevant[n - 1]) if n else 0, n)
        )
        recall = (found_upto[n - 1] if n else 0) / len(gold_terms) if gold_terms else None
        span = (float(spans[n - 1]) if n else 0.0) if gold else None
        out[f"context_precision@{k}"] = precision
        out[f"context_recall@{k}"] = recall
        out[f"answer_span_recall@{k}"] = span
    return out


def answer_metrics(e: AnswerEvidence, ks: Sequence[int], analyzer) -> dict[str, float | None]:
    values = {
        **claim_metrics(e),
        **response_metrics(e, analyzer),
        **context_metrics(e, ks, analyzer),
    }
    return {name: values[name] for name in answer_metric_names(ks)}
