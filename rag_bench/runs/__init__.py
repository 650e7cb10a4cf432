"""The run store: one object (:class:`RunStore`, from :func:`open_runs`) over a runs folder."""

from rag_bench.runs.catalog import StoredRun
from rag_bench.runs.checkpoint import Checkpoint
from rag_bench.runs.commit import WriteError
from rag_bench.runs.layout import SCHEMA_VERSION, TABLES, RunLocation
from rag_bench.runs.store import RunStore, open_runs

__all__ = [
    "SCHEMA_VERSION",
    "TABLES",
    "Checkpoint",
    "RunLocation",
    "RunStore",
    "StoredRun",
    "WriteError",
    "open_runs",
]
