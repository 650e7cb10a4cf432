"""The runs folder as a database: DuckDB views over every stored run's traces.

Views ``runs``, ``queries``, ``metrics``, ``retrieved`` and ``claims`` span every readable run;
a run whose manifest or Parquet files are missing or corrupt is reported and left out, so the
others stay queryable. Ad-hoc SQL is read-only: only SELECT-like statements run, and the
connection can read nothing outside the runs folder unless the caller allows it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rag_bench.errors import RagBenchError
from rag_bench.store import TABLES, read_manifest, run_folders

READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN")


@dataclass(frozen=True)
class StoredRun:
    run_id: str
    path: Path
    manifest: dict

    @property
    def variant(self) -> str:
        return self.manifest.get("variant", "?")

    @property
    def dataset_sha256(self) -> str | None:
        return self.manifest.get("dataset", {}).get("sha256")


@dataclass
class Store:
    """The runs of one folder: the readable ones and, apart, the broken ones with the reason."""

    root: Path
    runs: list[StoredRun] = field(default_factory=list)
    broken: dict[str, RagBenchError] = field(default_factory=dict)

    @classmethod
    def open(cls, root: str | Path) -> Store:
        import pyarrow.parquet as pq

        store = cls(Path(root))
        for folder in run_folders(store.root):
            try:
                manifest = read_manifest(folder)
                for table in TABLES:
                    pq.read_metadata(folder / f"{table}.parquet")
            except RagBenchError as exc:
                store.broken[folder.name] = exc
                continue
            except (OSError, ValueError) as exc:
                reason = f"run {folder.name} is unreadable: {_first_line(exc)}"
                store.broken[folder.name] = RagBenchError(
                    reason, "remove it with `rag-bench rm --yes`"
                )
                continue
            store.runs.append(StoredRun(folder.name, folder, manifest))
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

    def folder(self, ref: str) -> Path:
        """The folder of a run, readable or not (``rm`` must be able to remove a broken run)."""
        broken = [name for name in self.broken if name == ref] or [
            name for name in self.broken if name.startswith(ref)
        ]
        try:
            return self.get(ref).path
        except RagBenchError:
            if len(broken) == 1:
                return self.root / broken[0]
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
        import pyarrow as pa

        from rag_bench.store import _schemas

        chosen = self.runs if runs is None else runs
        con = duckdb.connect()
        con.register("runs_frame", self.runs_frame())
        con.execute("CREATE VIEW runs AS SELECT * FROM runs_frame")
        schemas = _schemas()
        for table in TABLES:
            files = [str(r.path / f"{table}.parquet") for r in chosen]
            if files:
                listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
                con.execute(
                    f"CREATE VIEW {table} AS "
                    f"SELECT * FROM read_parquet([{listing}], union_by_name=true)"
                )
            else:
                con.register(f"{table}_empty", pa.Table.from_pylist([], schema=schemas[table]))
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM {table}_empty")
        if not allow_files:
            root = str(self.root.resolve())
            con.execute(f"SET allowed_directories=['{root.replace(chr(39), chr(39) * 2)}/']")
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


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0]
