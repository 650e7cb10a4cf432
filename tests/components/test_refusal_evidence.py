"""Whether the extractive generator answers does not depend on the reranker: it decides on the
ranking before any reranker (``refuse_on=retrieval``) and quotes from the final one."""

from __future__ import annotations

import pytest

from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.components.generate import ExtractiveGenerator
from rag_bench.errors import ParameterError
from rag_bench.experiment.runner import Selection, evaluate_variant
from rag_bench.model import Chunk, Context, Query
from tests.conftest import SHIPPED

KB = [
    Chunk("d1#0", "d1", 0, 0, "The KS-660R holds up to 8 drives and 192 TB of raw capacity.", ""),
    Chunk("d2#0", "d2", 0, 0, "The KS-660 holds up to 6 drives and 144 TB of raw capacity.", ""),
    Chunk("d3#0", "d3", 0, 0, "Support in Dublin opens on weekdays from 08:00 to 18:00.", ""),
]
QUESTION = Query("q", "What is the raw capacity of the KS-660R?")


def generator(**params) -> ExtractiveGenerator:
    gen = ExtractiveGenerator(context_k=1, **params)
    gen.prepare(None, KB, EnglishAnalyzer())
    return gen


def test_the_refusal_is_decided_on_the_evidence_and_the_answer_quoted_from_the_context():
    reranked, retrieved = [KB[1], KB[0]], [KB[0], KB[1]]  # the reranker demoted the KS-660R
    answer = generator().generate_with_evidence(QUESTION, reranked, retrieved)
    assert not answer.refused
    assert answer.answer == "The KS-660 holds up to 6 drives and 144 TB of raw capacity [d2]."
    # deciding on the quoted context, the missing KS-660R is a refusal
    assert (
        generator(refuse_on="context").generate_with_evidence(QUESTION, reranked, retrieved).refused
    )
    # and evidence without the KS-660R refuses whatever the context holds
    assert generator().generate_with_evidence(QUESTION, retrieved, reranked).refused


def test_a_context_with_nothing_to_quote_is_still_a_refusal():
    answer = generator().generate_with_evidence(QUESTION, [KB[2]], [KB[0]])
    assert answer.refused


def test_generate_reads_the_evidence_a_context_carries():
    gen = generator()
    reranked = Context([KB[1], KB[0]], evidence=[KB[0], KB[1]])
    assert not gen.generate(QUESTION, reranked).refused
    assert gen.generate(QUESTION, reranked) == gen.generate_with_evidence(
        QUESTION, reranked, [KB[0], KB[1]]
    )
    for chunks in ([KB[0]], [KB[1]], Context([KB[1]])):  # without a reranker: its own evidence
        assert gen.generate(QUESTION, chunks) == gen.generate_with_evidence(
            QUESTION, chunks, chunks
        )


def test_refuse_on_takes_retrieval_or_context():
    with pytest.raises(ParameterError, match="retrieval or context"):
        ExtractiveGenerator(refuse_on="rerank")


def refusals(index_cache, variant: str, *overrides: str) -> dict[str, bool]:
    """Each query's refusal in a run of ``variant`` on the shipped regression tier."""
    tables = evaluate_variant(
        variant,
        SHIPPED,
        overrides=list(overrides),
        selection=Selection(tier="regression"),
        cache_dir=index_cache,
    )
    queries = tables["queries"]
    return dict(zip(queries["query_id"], queries["refused"].astype(bool)))


def test_swapping_the_reranker_keeps_every_refusal(index_cache):
    """``ltr`` (learnt weights), ``proximity`` (fixed weights, another scale) and no reranker at
    all: the same refusals, query by query; deciding on the final context they differ."""
    none = refusals(index_cache, "hybrid")
    ltr = refusals(index_cache, "hybrid_rerank")
    proximity = refusals(
        index_cache, "hybrid_rerank", "reranker.name=proximity", "reranker.prior=5"
    )
    assert ltr == none
    assert proximity == none
    assert 0 < sum(none.values()) < len(none)
    old_ltr = refusals(index_cache, "hybrid_rerank", "generator.refuse_on=context")
    old_none = refusals(index_cache, "hybrid", "generator.refuse_on=context")
    assert old_none == none  # without a reranker nothing changed
    assert old_ltr != none  # the reranker changed refusals when they were decided on its ranking
