"""The runs folder as a database: DuckDB views over the stored runs' traces, and ad-hoc SQL.

Views ``runs``, ``queries``, ``metrics``, ``retrieved`` and ``claims`` span the chosen runs. The
trace views scan the hive-partitioned Parquet files through pyarrow datasets registered with the
connection (``run_id`` and ``variant`` come from the paths), locally and on an object store
alike, so DuckDB itself never needs to open a file.

That is what makes ad-hoc SQL read-only by construction rather than by reading the statement:
the connection is opened with external access off (no file or network access of any kind: no
``COPY ... TO``, ``ATTACH`` of a file, ``read_csv``, ``INSTALL``), extension auto-install and
auto-load off, and its configuration locked, so no ``SET``, ``RESET`` or ``PRAGMA`` can undo
any of it. ``allow_files`` turns external access on so a query may read other files; the
connection then accepts only SELECT statements and EXPLAIN without ANALYZE (the statements
DuckDB plans without running anything that writes), and the configuration stays locked.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import TypeVar

from rag_bench.errors import RagBenchError, first_line
from rag_bench.io.pause import pause_point
from rag_bench.runs.catalog import StoredRun
from rag_bench.runs.folder import RunsFolder
from rag_bench.runs.layout import REPEAT, REPEATED, TABLES, RunLocation, view_schema

T = TypeVar("T")
READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN", "EXPLAIN ANALYZE")
PLANNED_ONLY = ("SELECT", "EXPLAIN")  # what may run while the connection can reach files
EXAMPLE = "SELECT * FROM runs"  # the statement a hint offers
CHUNK_VECTORS = 16  # a streamed result arrives in DataFrames of up to 16 x 2048 rows
SEALED = {  # set when the connection opens; lock_configuration keeps them so
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
}
RUNS_COLUMNS = (
    "run_id",
    "variant",
    "name",
    "note",
    "customised",
    "dataset",
    "dataset_sha256",
    "n_queries",
    "queries",
    "created_at",
    "duration_s",
    "status",
    "schema_version",
    "judge",
    "params",
    "rag_bench_version",
    "git_commit",
)


def runs_frame(runs: list[StoredRun]):
    """One row per run: what its manifest says, flat (the ``runs`` view)."""
    import pandas as pd

    rows = []
    for run in runs:
        m = run.manifest
        dataset = m.get("dataset", {})
        row = {
            "run_id": run.run_id,
            "variant": m.get("variant"),
            "name": run.name,
            "note": m.get("note") if isinstance(m.get("note"), str) else None,
            "customised": ", ".join(run.customised),
            "dataset": dataset.get("name"),
            "dataset_sha256": dataset.get("sha256"),
            "n_queries": dataset.get("n_queries"),
            "queries": queries_run(m),
            "created_at": m.get("created_at"),
            "duration_s": m.get("duration_s"),
            "status": m.get("status"),
            "schema_version": m.get("schema_version"),
            "judge": (m.get("judge") or {}).get("name"),
            "params": json.dumps(m.get("params", {}), sort_keys=True),
            "rag_bench_version": m.get("rag_bench_version"),
            "git_commit": m.get("git_commit"),
        }
        rows.append(row)
    return pd.DataFrame(rows, columns=list(RUNS_COLUMNS))


def queries_run(manifest: dict) -> int | None:
    """How many queries a run scored: its selection's, else every query of its dataset."""
    selection = manifest.get("selection")
    chosen = selection.get("query_ids") if isinstance(selection, dict) else None
    if isinstance(chosen, list):
        return len(chosen)
    return manifest.get("dataset", {}).get("n_queries")


def connect(
    folder: RunsFolder, listed: list[StoredRun], chosen: list[StoredRun], allow_files: bool
):
    """A locked DuckDB connection with the ``runs`` view over ``listed`` and the trace views
    over ``chosen``; it reads no file at all unless ``allow_files``, and writes none."""
    import duckdb

    config: dict[str, str | bool | int | float | list[str]] = {
        **SEALED,
        "enable_external_access": allow_files,
    }
    con = duckdb.connect(config=config)
    # DuckDB draws a progress bar on stdout for a query past 2 s: a library's output is its
    # caller's (a notebook cell, a child process's stdout), never a bar
    con.execute("SET enable_progress_bar = false")
    con.execute("SET lock_configuration = true")
    con.register("runs_frame", runs_frame(listed))
    con.execute("CREATE VIEW runs AS SELECT * FROM runs_frame")
    for table in TABLES:
        source = _table_source(con, folder, table, [r.location for r in chosen])
        # a file written before repeats existed has no repeat column: its rows are repeat 0
        filled = f' REPLACE (coalesce("{REPEAT}", 0) AS "{REPEAT}")' if table in REPEATED else ""
        con.execute(
            f"CREATE VIEW {table} AS "
            f"SELECT run_id, variant, * EXCLUDE (run_id, variant){filled} FROM {source}"
        )
    return con


def run_sql(con, statement: str, allow_files: bool = False):
    """Run a read-only statement over the views of ``con`` (from :func:`connect` with the same
    ``allow_files``); the whole result as one DataFrame. Ctrl-C stops it at once."""
    _check(con, statement, allow_files)
    with _sql_errors(allow_files):
        return _interruptible(con, lambda: con.sql(statement).df())


def stream_sql(con, statement: str, allow_files: bool = False) -> Iterator:
    """Like :func:`run_sql`, the result in DataFrames of at most ``CHUNK_VECTORS`` x 2048 rows,
    so a large result is never held whole; the first (possibly empty) one names the columns."""
    _check(con, statement, allow_files)
    pause_point("sql")
    with _sql_errors(allow_files):
        result = _interruptible(con, lambda: con.execute(statement))
        chunk = _interruptible(con, lambda: result.fetch_df_chunk(CHUNK_VECTORS))
    yield chunk
    while len(chunk):
        with _sql_errors(allow_files):
            chunk = _interruptible(con, lambda: result.fetch_df_chunk(CHUNK_VECTORS))
        if len(chunk):
            yield chunk


def _interruptible(con, work: Callable[[], T]) -> T:
    """``work()``, a DuckDB call on ``con``, which Ctrl-C stops at once. DuckDB looks for
    Python's SIGINT only between its tasks, so a long query would run on (and is then reported
    as an error); here the call runs in a thread while this one waits in Python, where
    KeyboardInterrupt arrives, interrupts the connection and raises it."""
    import threading

    outcome: dict = {}
    go = threading.Event()  # set inside the try below: an interrupt before it starts nothing
    done = threading.Event()  # not Thread.join, which an interrupt can leave returning early

    def call() -> None:
        go.wait()
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc
        finally:
            done.set()

    # a Ctrl-C that lands while the thread starts (before ``go``) leaves it waiting, a daemon
    # that never runs the query; without ``go`` the query would run on with nothing to interrupt
    # it, and the process would hang at exit waiting for it
    threading.Thread(target=call, name="rag-bench-sql", daemon=True).start()
    try:
        go.set()
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        # until the call ends: an interrupt that lands before DuckDB has started the query
        # (a busy machine may not have run the thread yet) does nothing, so say it again
        con.interrupt()
        while not done.wait(0.05):
            con.interrupt()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _check(con, statement: str, allow_files: bool) -> None:
    """Refuse, with a message, what is not a read-only statement (the connection could not
    carry it out anyway, see the module docstring)."""
    import duckdb

    try:
        statements = con.extract_statements(statement)
    except duckdb.Error as exc:
        raise RagBenchError(
            f"SQL error: {first_line(exc)}",
            "check the query; `rag-bench sql --schema` lists the views",
        ) from None
    if not statements:
        raise RagBenchError("no SQL statement given", 'e.g. rag-bench sql "SELECT * FROM runs"')
    for parsed in statements:
        kind = _kind(parsed)
        if kind not in (PLANNED_ONLY if allow_files else READ_ONLY_STATEMENTS):
            raise RagBenchError(
                f"{kind} statements are not allowed"
                + (" when other files may be read" if kind in READ_ONLY_STATEMENTS else "")
                + ": the traces are read-only",
                "use SELECT; to export, pipe --format csv or --format json into a file",
            )


@contextlib.contextmanager
def _sql_errors(allow_files: bool) -> Iterator[None]:
    """A DuckDB error as one line with a fix."""
    import duckdb

    try:
        yield
    except duckdb.Error as exc:
        hint = (
            "the query may read only the views; pass --allow-files to read other files "
            "(nothing may be written)"
            if "Permission" in str(exc) and not allow_files
            else "check the query"
        )
        raise RagBenchError(f"SQL error: {first_line(exc)}", hint) from None


def _kind(parsed) -> str:
    """A statement's kind, with EXPLAIN ANALYZE (which runs the statement) told apart."""
    import duckdb

    kind = parsed.type.name
    if kind != "EXPLAIN":
        return kind
    text = parsed.query
    words = [
        text[start:].split(None, 1)[0].upper()
        for start, token in duckdb.tokenize(text)
        if token == duckdb.token_type.keyword
    ]
    return "EXPLAIN ANALYZE" if words[1:2] in (["ANALYZE"], ["ANALYSE"]) else kind


def describe(con):
    """The views and their columns, as a DataFrame (view, column_name, column_type)."""
    import pandas as pd

    frames = []
    for view in ("runs", *TABLES):
        described = con.sql(f"DESCRIBE {view}").df()[["column_name", "column_type"]]
        frames.append(described.assign(view=view))
    return pd.concat(frames, ignore_index=True)[["view", "column_name", "column_type"]]


def _table_source(con, folder: RunsFolder, table: str, runs: list[RunLocation]) -> str:
    """The name of a registered pyarrow dataset over one table of ``runs``, with run_id and
    variant from the hive paths (an empty table when there are no runs)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    name = f"{table}_files"
    if not runs:
        con.register(name, pa.Table.from_pylist([], schema=view_schema(table)))
        return name
    keys = pa.schema([("variant", pa.string()), ("run_id", pa.string())])
    dataset = ds.dataset(
        [run.table_file(table) for run in runs],
        schema=view_schema(table),
        format="parquet",
        filesystem=folder.fs,
        partitioning=ds.partitioning(keys, flavor="hive"),
        partition_base_dir=folder.path(table),
    )
    con.register(name, dataset)
    return name
