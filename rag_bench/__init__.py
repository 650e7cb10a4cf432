"""rag-bench: evaluate RAG pipelines as experiments with persisted, queryable traces."""

from __future__ import annotations

__version__ = "0.1.0"

from rag_bench.data.qrels import Qrels, load_qrels
from rag_bench.data.rankings import Run, load_run
from rag_bench.evaluation.measures import Measure, parse_measure, parse_measures
from rag_bench.evaluation.retrieval import RankingEvaluation, evaluate_run

__all__ = [
    "Measure",
    "Qrels",
    "RankingEvaluation",
    "Run",
    "__version__",
    "evaluate_run",
    "load_qrels",
    "load_run",
    "parse_measure",
    "parse_measures",
]
