"""The built-in components and variants, registered through the public entry-point groups
(see ``[project.entry-points]`` in pyproject.toml) exactly as a third-party package would."""

from __future__ import annotations

from rag_bench.components.registry import ComponentSpec, VariantSpec


def components() -> list[ComponentSpec]:
    from rag_bench.components.analyzers import AutoAnalyzer, ChineseAnalyzer, EnglishAnalyzer
    from rag_bench.components.ann import HNSWIndex
    from rag_bench.components.calibrated import CalibratedJudge
    from rag_bench.components.chunking import FixedChunker, RecursiveChunker, WholeDocument
    from rag_bench.components.dense import ExactIndex, LSAEncoder
    from rag_bench.components.fusion import ReciprocalRankFusion, WeightedScoreFusion
    from rag_bench.components.generate import (
        DelayedGenerator,
        ExtractiveGenerator,
        RecordedGenerator,
    )
    from rag_bench.components.http_system import HTTPSystemGenerator, HTTPSystemRetriever
    from rag_bench.components.judges import AnnotatedJudge, LexicalJudge
    from rag_bench.components.local_llm import LlamaCppGenerator
    from rag_bench.components.minilm import MiniLMEncoder
    from rag_bench.components.openai.components import OpenAIEncoder, OpenAIGenerator
    from rag_bench.components.openai.judge import LLMJudge, LLMRelevanceJudge
    from rag_bench.components.recorded import RecordedChunker, RecordedRetriever
    from rag_bench.components.rerank import LearnedReranker, ProximityReranker
    from rag_bench.components.sentence_transformers import (
        CrossEncoderReranker,
        NLIJudge,
        SentenceTransformerEncoder,
    )
    from rag_bench.components.sparse import BM25Retriever

    classes = [
        EnglishAnalyzer,
        ChineseAnalyzer,
        AutoAnalyzer,
        FixedChunker,
        RecursiveChunker,
        WholeDocument,
        RecordedChunker,
        BM25Retriever,
        RecordedRetriever,
        HTTPSystemRetriever,
        LSAEncoder,
        OpenAIEncoder,
        SentenceTransformerEncoder,
        MiniLMEncoder,
        ExactIndex,
        HNSWIndex,
        ReciprocalRankFusion,
        WeightedScoreFusion,
        ProximityReranker,
        LearnedReranker,
        CrossEncoderReranker,
        ExtractiveGenerator,
        DelayedGenerator,
        RecordedGenerator,
        OpenAIGenerator,
        LlamaCppGenerator,
        HTTPSystemGenerator,
        LexicalJudge,
        AnnotatedJudge,
        CalibratedJudge,
        LLMJudge,
        LLMRelevanceJudge,
        NLIJudge,
    ]
    return [cls.spec for cls in classes]  # type: ignore[attr-defined]  # set by @component


BASE = {
    "analyzer": {"name": "auto"},
    "chunker": {"name": "fixed"},
    "retriever": {"name": "bm25"},
    "generator": {"name": "extractive"},
}


def variants() -> list[VariantSpec]:
    hybrid = {**BASE, "encoder": {"name": "lsa"}, "fusion": {"name": "rrf"}}
    return [
        VariantSpec("baseline", dict(BASE), "fixed-size chunks, BM25, extractive answer"),
        VariantSpec("hybrid", hybrid, "BM25 and dense retrieval fused by reciprocal rank"),
        VariantSpec(
            "hybrid_rerank",
            {**hybrid, "reranker": {"name": "ltr"}},
            "hybrid retrieval, top candidates reranked",
        ),
        VariantSpec(
            "recorded",
            {
                "chunker": {"name": "none"},
                "retriever": {"name": "recorded"},
                "generator": {"name": "recorded"},
                "judge": {"name": "annotated"},
            },
            "rankings and answers replayed from the dataset's answers.jsonl",
        ),
        VariantSpec(
            "http",
            {
                "chunker": {"name": "none"},
                "retriever": {"name": "http"},
                "generator": {"name": "http"},
            },
            "your own RAG service, called over HTTP ($RAG_SYSTEM_URL)",
            service="the RAG service at $RAG_SYSTEM_URL",
        ),
    ]
