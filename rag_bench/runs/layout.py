"""The layout of a runs folder: trace tables and their schemas, hive partition paths, names.

A runs folder (a local path or an object-store URL, see :mod:`rag_bench.runs.folder`) holds::

    queries/variant=<variant>/run_id=<run_id>/part-0.parquet     one root per trace table,
    metrics/variant=<variant>/run_id=<run_id>/part-0.parquet     partitioned the way DuckDB,
    retrieved/variant=<variant>/run_id=<run_id>/part-0.parquet   Spark and Trino read in place
    claims/variant=<variant>/run_id=<run_id>/part-0.parquet
    _manifests/<run_id>.json                                     the run's manifest: its commit

The partition columns (``variant``, ``run_id``) live in the paths only, not in the files (Spark
and Trino take them from the path; the store's readers and DuckDB views put them back). Values
in paths are escaped as Hive does (``%2F`` for ``/``).

Next to the tables, a local runs folder holds hidden bookkeeping that every reader ignores (for
a remote folder it lives in a local folder under the cache directory, keyed by the URL):
``.<run_id>.lock`` (:mod:`rag_bench.runs.ids`), ``.tmp-<run_id>-<random>/`` (a run being
written, :mod:`rag_bench.runs.commit`), ``.partial-<run_id>/`` (a checkpoint,
:mod:`rag_bench.runs.checkpoint`) and ``.rm-<run_id>-<random>/`` (a first-layout run being
deleted). This module is the only one that knows these names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from rag_bench.errors import RagBenchError
from rag_bench.pipeline import LATENCY_STAGES
from rag_bench.runs.folder import RunsFolder

SCHEMA_VERSION = 2  # 2: hive-partitioned tables without run_id inside, _manifests/<run_id>.json
# The tables of answers (queries, metrics, claims) end with ``repeat``: which of a run's
# ``--repeats`` a row belongs to. Files written before it existed lack the column, and every
# reader gives their rows repeat 0 (:data:`REPEATED`), so the version did not change.
REPEAT = "repeat"
REPEATED = ("queries", "metrics", "claims")
TABLES = ("queries", "metrics", "retrieved", "claims")
MANIFESTS = "_manifests"
PART = "part-0.parquet"
LEGACY_MANIFEST = "manifest.json"  # a run of the first layout: runs/<run_id>/manifest.json
PARTIAL = ".partial-"
STAGING = ".tmp-"
REMOVING = ".rm-"
CHECKPOINT = "checkpoint.json"
PROGRESS = "progress.json"
ANSWERS = "answers-*.jsonl"


def schema(table: str):
    """The full pyarrow schema of one trace table, ``run_id`` included."""
    import pyarrow as pa

    if table not in TABLES:
        raise KeyError(table)
    if table == "queries":
        latency = [(f"latency_ms_{s}", pa.float64()) for s in (*LATENCY_STAGES, "total")]
        columns = [
            ("query_id", pa.string()),
            ("category", pa.string()),
            ("tags", pa.list_(pa.string())),
            ("should_refuse", pa.bool_()),
            ("query", pa.string()),
            ("answer", pa.string()),
            ("refused", pa.bool_()),
            ("failure_class", pa.string()),
            ("failure_stage", pa.string()),
            ("failure_fix", pa.string()),
            ("n_relevant", pa.int64()),
            *latency,
            ("repeat", pa.int32()),
        ]
    elif table == "metrics":
        columns = [
            ("query_id", pa.string()),
            ("category", pa.string()),
            ("metric", pa.string()),
            ("value", pa.float64()),
            ("status", pa.string()),
            ("repeat", pa.int32()),
        ]
    elif table == "retrieved":
        columns = [
            ("query_id", pa.string()),
            ("stage", pa.string()),
            ("rank", pa.int32()),
            ("chunk_id", pa.string()),
            ("doc_id", pa.string()),
            ("score", pa.float64()),
            ("relevance", pa.int32()),
        ]
    else:
        columns = [
            ("query_id", pa.string()),
            ("claim_id", pa.int32()),
            ("text", pa.string()),
            ("citations", pa.list_(pa.string())),
            ("supported", pa.bool_()),
            ("support_grade", pa.int32()),
            ("supported_by", pa.list_(pa.string())),
            ("judge", pa.string()),
            ("reason", pa.string()),
            ("repeat", pa.int32()),
        ]
    return pa.schema([("run_id", pa.string()), *columns])


def file_schema(table: str):
    """The columns a table's Parquet file holds: its schema without the partition columns."""
    full = schema(table)
    return full.remove(full.get_field_index("run_id"))


def view_schema(table: str):
    """The columns a reader sees: run_id and variant (from the path), then the file's."""
    import pyarrow as pa

    keys = [pa.field("run_id", pa.string()), pa.field("variant", pa.string())]
    return pa.schema([*keys, *file_schema(table)])


# --- paths ----------------------------------------------------------------------------------

_UNSAFE = re.compile(r"[\x00-\x1f\"#%'*/:=?\\\x7f{}\[\]^]")  # what Hive escapes in a path


def hive_value(value: str) -> str:
    """A partition value as a path segment, escaped the way Hive and Spark escape it."""
    return _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", value)


def partition(table: str, variant: str, run_id: str) -> tuple[str, str, str]:
    """The path parts of one run's partition folder of ``table``."""
    return (table, f"variant={hive_value(variant)}", f"run_id={hive_value(run_id)}")


def partition_run_id(name: str) -> str | None:
    """The run id a partition folder's name (``run_id=<escaped id>``) stands for, or None."""
    return unquote(name[len("run_id=") :]) if name.startswith("run_id=") else None


def manifest_parts(run_id: str) -> tuple[str, str]:
    return (MANIFESTS, f"{run_id}.json")


def lock_name(run_id: str) -> str:
    return f".{run_id}.lock"


def partial_name(run_id: str) -> str:
    return f"{PARTIAL}{run_id}"


@dataclass(frozen=True)
class RunLocation:
    """Where one run's files are: its manifest, and one partition per trace table. ``variant``
    is None for a run whose manifest cannot say (a broken run, which can still be removed)."""

    runs: RunsFolder
    run_id: str
    variant: str | None

    def table_parts(self, table: str) -> tuple[str, ...]:
        if self.variant is None:
            raise RagBenchError(f"run {self.run_id} has no readable manifest", "remove the run")
        return (*partition(table, self.variant, self.run_id), PART)

    def table_file(self, table: str) -> str:
        """The table's Parquet file as a path inside ``runs.fs`` (a local path when local)."""
        return self.runs.path(*self.table_parts(table))

    def __str__(self) -> str:
        return str(self.runs)
