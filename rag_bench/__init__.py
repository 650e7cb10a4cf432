"""rag-bench: evaluate RAG pipelines as experiments with persisted, queryable traces.

The public API. Each name is imported on first use (PEP 562), so ``import rag_bench`` loads no
pandas, pyarrow, duckdb or numpy and the command line starts at once.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

# public name -> "module:attribute"
_API = {
    "run": "rag_bench.experiment.session:run",
    "resume": "rag_bench.experiment.session:resume",
    "RunResult": "rag_bench.experiment.runner:RunResult",
    "evaluate": "rag_bench.evaluation.retrieval:evaluate_run",
    "evaluate_run": "rag_bench.evaluation.retrieval:evaluate_run",
    "RankingEvaluation": "rag_bench.evaluation.retrieval:RankingEvaluation",
    "import_outputs": "rag_bench.experiment.importer:import_outputs",
    "evaluate_outputs": "rag_bench.experiment.importer:evaluate_outputs",
    "import_scores": "rag_bench.experiment.importer:import_scores",
    "open_runs": "rag_bench.runs:open_runs",
    "compare": "rag_bench.analysis.compare:compare",
    "diff": "rag_bench.analysis.diff:diff",
    "gate": "rag_bench.analysis.gate:gate",
    "diagnose": "rag_bench.analysis.diagnose:diagnose",
    "report": "rag_bench.report.page:report",
    "load_dataset": "rag_bench.data.dataset:load_dataset",
    "Qrels": "rag_bench.data.qrels:Qrels",
    "load_qrels": "rag_bench.data.qrels:load_qrels",
    "Run": "rag_bench.data.rankings:Run",
    "load_run": "rag_bench.data.rankings:load_run",
    "Measure": "rag_bench.evaluation.measures:Measure",
    "parse_measure": "rag_bench.evaluation.measures:parse_measure",
    "parse_measures": "rag_bench.evaluation.measures:parse_measures",
    "RagBenchError": "rag_bench.errors:RagBenchError",
    "generate_testset": "rag_bench.testsets.generate:generate",
    "accept_testset": "rag_bench.testsets.generate:accept",
    "pool_pairs": "rag_bench.analysis.pool:pool_pairs",
    "sample_claims": "rag_bench.analysis.pool:sample_claims",
    "merge_labels": "rag_bench.data.qrels_versions:merge_labels",
    "rescore": "rag_bench.experiment.rescore:rescore_run",
}

__all__ = ["__version__", *sorted(_API)]

# Importing the folder rag_bench/report/ binds its name here, which would hide the function
# `report` from __getattr__. Import the (empty) package now and free the name: later imports
# of its modules find it loaded and leave the name alone.
importlib.import_module("rag_bench.report")
del globals()["report"]


def __getattr__(name: str) -> Any:
    """Import the module behind a public name on first use and keep the attribute."""
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'rag_bench' has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
