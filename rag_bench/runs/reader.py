"""The runs folder as a database: DuckDB views over every stored run's traces.

Views ``runs``, ``queries``, ``metrics``, ``retrieved`` and ``claims`` span every readable run;
a run whose manifest or Parquet files are missing or corrupt is reported and left out, so the
others stay queryable. The trace views read the hive-partitioned files in place
(``read_parquet(..., hive_partitioning=true)``, which adds ``run_id`` and ``variant`` from the
paths); on an object store, DuckDB scans them through pyarrow datasets. Ad-hoc SQL is
read-only: only SELECT-like statements run, and the connection can read nothing outside the
runs folder unless the caller allows it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rag_bench.errors import RagBenchError
from rag_bench.runs.folder import RunsFolder, runs_folder
from rag_bench.runs.store import (
    TABLES,
    RunLocation,
    committed_ids,
    legacy_runs,
    partitions,
    read_manifest,
    view_schema,
)

READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN")


@dataclass(frozen=True)
class StoredRun:
    run_id: str
    path: RunLocation  # where its manifest and table partitions are
    manifest: dict

    @property
    def variant(self) -> str:
        return self.manifest.get("variant", "?")

    @property
    def dataset_sha256(self) -> str | None:
        return self.manifest.get("dataset", {}).get("sha256")


@dataclass
class Store:
    """The runs of one folder: the readable ones and, apart, the broken ones with the reason
    (runs of the first layout among them, until ``rag-bench runs --upgrade`` rewrites them)."""

    root: RunsFolder
    runs: list[StoredRun] = field(default_factory=list)
    broken: dict[str, RagBenchError] = field(default_factory=dict)
    removable: dict[str, RunLocation | Path] = field(default_factory=dict)

    @classmethod
    def open(cls, root: str | Path | RunsFolder | None) -> Store:
        """The committed runs of a folder (path or URL; None: the default runs folder)."""
        store = cls(runs_folder(root))
        store.root.check()  # a missing bucket is a mistake, unlike a missing local folder
        ids = committed_ids(store.root)
        placed = None if store.root.local is not None else partitions(store.root)
        for run_id in ids:
            location = RunLocation(store.root, run_id, None)
            store.removable[run_id] = location
            try:
                manifest = read_manifest(location)
                location = RunLocation(store.root, run_id, str(manifest.get("variant")))
                _check_tables(location, placed)
            except RagBenchError as exc:
                store.broken[run_id] = exc
                continue
            except (OSError, ValueError) as exc:
                reason = f"run {run_id} is unreadable: {_first_line(exc)}"
                store.broken[run_id] = RagBenchError(reason, "remove it with `rag-bench rm --yes`")
                continue
            store.runs.append(StoredRun(run_id, location, manifest))
        for run_id, folder in legacy_runs(store.root).items():
            if run_id in ids:
                continue  # already rewritten; the old folder is a leftover of the upgrade
            store.removable[run_id] = folder
            store.broken[run_id] = RagBenchError(
                f"run {run_id} is stored in the first layout ({folder}), "
                "which this rag-bench does not read",
                "rewrite the runs of that folder with `rag-bench runs --upgrade"
                + ("" if store.root == runs_folder(None) else f" --runs-dir {store.root}")
                + "`",
            )
        return store

    def get(self, ref: str) -> StoredRun:
        """A run by full id, unique prefix, ``latest`` or ``latest:<variant>``."""
        if ref in self.broken:
            raise self.broken[ref]
        if not self.runs:
            raise RagBenchError(
                f"no runs in {self.root}",
                "run `rag-bench run --variant …` first, or pass --runs-dir",
            )
        if ref == "latest" or ref.startswith("latest:"):
            variant = ref.partition(":")[2]
            matching = [r for r in self.runs if not variant or r.variant == variant]
            if not matching:
                stored = ", ".join(sorted({r.variant for r in self.runs}))
                raise RagBenchError(
                    f"no run of variant {variant!r} in {self.root}", f"stored variants: {stored}"
                )
            return max(matching, key=lambda r: (r.manifest.get("created_at", ""), r.run_id))
        exact = [r for r in self.runs if r.run_id == ref]
        matching = exact or [r for r in self.runs if r.run_id.startswith(ref)]
        if len(matching) == 1:
            return matching[0]
        if not matching:
            raise RagBenchError(
                f"no run {ref!r} in {self.root}", "list the runs with `rag-bench runs`"
            )
        names = ", ".join(r.run_id for r in matching[:10])
        raise RagBenchError(f"run id prefix {ref!r} is ambiguous: {names}", "give more of the id")

    def folder(self, ref: str) -> RunLocation | Path:
        """Where a run is, readable or not (``rm`` must be able to remove a broken run)."""
        broken = [name for name in self.broken if name == ref] or [
            name for name in self.broken if name.startswith(ref)
        ]
        try:
            return self.get(ref).path
        except RagBenchError:
            if len(broken) == 1:
                return self.removable[broken[0]]
            raise

    def runs_frame(self) -> pd.DataFrame:
        rows = []
        for run in self.runs:
            m = run.manifest
            dataset = m.get("dataset", {})
            rows.append(
                {
                    "run_id": run.run_id,
                    "variant": m.get("variant"),
                    "dataset": dataset.get("name"),
                    "dataset_sha256": dataset.get("sha256"),
                    "n_queries": dataset.get("n_queries"),
                    "created_at": m.get("created_at"),
                    "duration_s": m.get("duration_s"),
                    "status": m.get("status"),
                    "schema_version": m.get("schema_version"),
                    "judge": (m.get("judge") or {}).get("name"),
                    "params": json.dumps(m.get("params", {}), sort_keys=True),
                    "rag_bench_version": m.get("rag_bench_version"),
                    "git_commit": m.get("git_commit"),
                }
            )
        columns = [
            "run_id",
            "variant",
            "dataset",
            "dataset_sha256",
            "n_queries",
            "created_at",
            "duration_s",
            "status",
            "schema_version",
            "judge",
            "params",
            "rag_bench_version",
            "git_commit",
        ]
        return pd.DataFrame(rows, columns=columns)

    def connect(self, runs: list[StoredRun] | None = None, allow_files: bool = False):
        """A DuckDB connection with the five views over ``runs`` (default: all readable runs)."""
        import duckdb

        chosen = self.runs if runs is None else runs
        con = duckdb.connect()
        con.register("runs_frame", self.runs_frame())
        con.execute("CREATE VIEW runs AS SELECT * FROM runs_frame")
        for table in TABLES:
            source = _table_source(con, table, [r.path for r in chosen])
            con.execute(
                f"CREATE VIEW {table} AS "
                f"SELECT run_id, variant, * EXCLUDE (run_id, variant) FROM {source}"
            )
        if not allow_files:
            allowed = [] if self.root.local is None else [_quoted(self.root.root + "/")]
            con.execute(f"SET allowed_directories=[{', '.join(allowed)}]")
            con.execute("SET enable_external_access=false")
            con.execute("SET lock_configuration=true")
        return con

    def sql(self, query: str, allow_files: bool = False) -> pd.DataFrame:
        """Run a read-only query over the views."""
        import duckdb

        con = self.connect(allow_files=allow_files)
        try:
            statements = con.extract_statements(query)
        except duckdb.Error as exc:
            raise RagBenchError(
                f"SQL error: {_first_line(exc)}",
                "check the query; `rag-bench sql --schema` lists the views",
            ) from None
        if not statements:
            raise RagBenchError("no SQL statement given", 'e.g. rag-bench sql "SELECT * FROM runs"')
        for statement in statements:
            kind = statement.type.name
            if kind not in READ_ONLY_STATEMENTS:
                raise RagBenchError(
                    f"{kind} statements are not allowed: the traces are read-only",
                    "use SELECT; to export, pipe --format csv or --format json into a file",
                )
        try:
            return con.sql(query).df()
        except duckdb.Error as exc:
            hint = (
                "pass --allow-files to read other files"
                if "Permission" in str(exc)
                else "check the query"
            )
            raise RagBenchError(f"SQL error: {_first_line(exc)}", hint) from None

    def schema(self) -> pd.DataFrame:
        con = self.connect()
        frames = []
        for view in ("runs", *TABLES):
            described = con.sql(f"DESCRIBE {view}").df()[["column_name", "column_type"]]
            frames.append(described.assign(view=view))
        return pd.concat(frames, ignore_index=True)[["view", "column_name", "column_type"]]


def _check_tables(run: RunLocation, placed: dict | None) -> None:
    """Fail (OSError, ValueError) when a table of the run is missing or not Parquet: locally by
    reading each footer; remotely against one listing of the partitions."""
    import pyarrow.parquet as pq

    for table in TABLES:
        if placed is None:
            pq.read_metadata(run.table_file(table))
        elif run.table_parts(table)[:3] not in placed.get(run.run_id, []):
            raise FileNotFoundError(f"{run.runs.url(*run.table_parts(table))} is missing")


HIVE_TYPES = "hive_types={'variant': 'VARCHAR', 'run_id': 'VARCHAR'}"


def _table_source(con, table: str, runs: list[RunLocation]) -> str:
    """A FROM clause over one table of ``runs``, with run_id and variant from the paths."""
    import pyarrow as pa

    if not runs:
        con.register(f"{table}_empty", pa.Table.from_pylist([], schema=view_schema(table)))
        return f"{table}_empty"
    folder = runs[0].runs
    files = [run.table_file(table) for run in runs]
    if folder.local is not None:
        listing = ", ".join(_quoted(f) for f in files)
        return (
            f"read_parquet([{listing}], hive_partitioning=true, {HIVE_TYPES}, union_by_name=true)"
        )
    import pyarrow.dataset as ds

    keys = pa.schema([("variant", pa.string()), ("run_id", pa.string())])
    schema = view_schema(table)
    dataset = ds.dataset(
        files,
        schema=schema,
        format="parquet",
        filesystem=folder.fs,
        partitioning=ds.partitioning(keys, flavor="hive"),
        partition_base_dir=folder.path(table),
    )
    con.register(f"{table}_dataset", dataset)
    return f"{table}_dataset"


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0]
