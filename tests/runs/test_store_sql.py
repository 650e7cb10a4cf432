"""SQL over the runs folder is read-only by construction: whatever the statement, the connection
cannot write, cannot read outside the views (unless files are allowed, and then only read),
cannot load extensions and cannot change those settings.

Each statement kind runs twice: through :meth:`RunStore.sql` (which may refuse it early with a
message) and straight on the store's DuckDB connection, bypassing every check on the statement's
text; the runs folder and the folder beside it are fingerprinted before and after.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from runs_helpers import fingerprint, table_file

from rag_bench.errors import RagBenchError
from rag_bench.runs import open_runs

SETTINGS = (
    "enable_external_access",
    "lock_configuration",
    "autoload_known_extensions",
    "enable_progress_bar",  # never drawn on the caller's stdout
)
SEALED = (False, True, False, False)

STATEMENTS = {
    "select": "SELECT count(*) FROM metrics",
    "explain": "EXPLAIN SELECT * FROM metrics",
    "explain analyze copy over a part": (
        "EXPLAIN ANALYZE COPY (SELECT query_id, category, metric, 1.0 AS value, status "
        "FROM metrics) TO '{part}' (FORMAT parquet)"
    ),
    "explain analyze copy outside": "EXPLAIN ANALYZE COPY metrics TO '{outside}/x.csv'",
    "copy": "COPY metrics TO '{outside}/x.csv'",
    "cte-wrapped copy": (
        "COPY (WITH m AS (SELECT * FROM metrics) SELECT * FROM m) TO '{part}' (FORMAT parquet)"
    ),
    "export": "EXPORT DATABASE '{outside}/export'",
    "pragma profiling": "PRAGMA enable_profiling = 'json'",
    "pragma output": "PRAGMA profiling_output = '{outside}/profile.json'",
    "set external access": "SET enable_external_access = true",
    "reset lock": "RESET lock_configuration",
    "set allowed directories": "SET allowed_directories = ['/']",
    "attach a file": "ATTACH '{outside}/x.db' AS other",
    "attach in the runs folder": "ATTACH '{runs}/x.db' AS other",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "call": "CALL pragma_version()",
    "several statements": "SELECT 1; COPY metrics TO '{runs}/y.csv'",
    "read outside": "SELECT * FROM read_csv('{outside}/secret.csv')",
    "read a part by path": "SELECT * FROM read_parquet('{part}')",
    "create": "CREATE TABLE t AS SELECT * FROM metrics",
}


@pytest.fixture
def folders(tmp_path, clean):
    """A copy of a stored run, and beside it a folder with one file nobody may read."""
    runs = tmp_path / "runs"
    shutil.copytree(clean.runs.root, runs)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text("secret\n42\n")
    part = table_file(open_runs(runs).get(clean.run_id).location, "metrics")
    return runs, outside, {"runs": runs, "outside": outside, "part": part}


def _state(runs: Path, outside: Path) -> tuple[str, str]:
    return fingerprint(runs, mtimes=True), fingerprint(outside, mtimes=True)


@pytest.mark.parametrize("kind", list(STATEMENTS))
@pytest.mark.parametrize("allow_files", [False, True])
def test_no_statement_changes_anything_through_the_store(folders, kind, allow_files):
    runs, outside, names = folders
    statement = STATEMENTS[kind].format(**names)
    before = _state(runs, outside)
    store = open_runs(runs)
    try:
        found = store.sql(statement, allow_files=allow_files)
    except RagBenchError:
        found = None
    assert _state(runs, outside) == before
    if kind == "read outside" and not allow_files:
        assert found is None
    if kind in ("select", "explain") or (kind == "read outside" and allow_files):
        assert found is not None and len(found)


@pytest.mark.parametrize("kind", list(STATEMENTS))
def test_the_connection_itself_is_sealed(folders, kind):
    """Straight on the connection, past every check of the statement: nothing is written, read
    outside, loaded, or unlocked."""
    runs, outside, names = folders
    statement = STATEMENTS[kind].format(**names)
    before = _state(runs, outside)
    con = open_runs(runs).connect()
    try:
        rows = con.execute(statement).fetchall()
    except duckdb.Error:
        rows = None
    assert _state(runs, outside) == before
    settings = con.execute(
        "SELECT " + ", ".join(f"current_setting('{name}')" for name in SETTINGS)
    ).fetchone()
    assert settings == SEALED
    loaded = con.execute("SELECT count(*) FROM duckdb_settings() WHERE name = 's3_region'")
    assert loaded.fetchone() == (0,)  # httpfs, which adds the s3 settings, is not loaded
    if kind in ("read outside", "read a part by path"):
        assert rows is None


def test_with_allow_files_other_files_are_read_but_nothing_is_written(folders):
    runs, outside, names = folders
    store = open_runs(runs)
    read = store.sql(f"SELECT * FROM read_csv('{outside}/secret.csv')", allow_files=True)
    assert read["secret"].tolist() == [42]
    with pytest.raises(RagBenchError, match="EXPLAIN ANALYZE statements are not allowed"):
        store.sql(STATEMENTS["explain analyze copy over a part"].format(**names), allow_files=True)
    with pytest.raises(RagBenchError, match="SET statements are not allowed"):
        store.sql("SET enable_external_access = false", allow_files=True)


def test_explain_analyze_runs_when_nothing_can_be_reached(folders):
    runs, _, _ = folders
    plan = open_runs(runs).sql("EXPLAIN ANALYZE SELECT count(*) FROM metrics")
    assert "analyzed_plan" in set(plan["explain_key"])


def test_list_columns_render_as_json_lists(folders, rag_bench, clean):
    runs, _, _ = folders
    out = rag_bench(
        "sql",
        "SELECT query_id, tags FROM queries ORDER BY query_id",
        "--runs-dir",
        runs,
        "--format",
        "json",
    )
    assert out.exit_code == 0, out.stderr
    rows = json.loads(out.stdout)
    queries = open_runs(runs).queries([clean.run_id]).sort_values("query_id")
    assert [r["tags"] for r in rows] == [list(t) for t in queries["tags"]]
    assert any(r["tags"] for r in rows)


LARGE = "SELECT range AS n, [range, range + 1] AS pair, 'x' || range AS label FROM range(40000)"


def test_a_large_result_arrives_in_bounded_chunks(folders):
    runs, _, _ = folders
    chunks = list(open_runs(runs).sql_chunks(LARGE))
    assert len(chunks) > 1 and max(len(c) for c in chunks) <= 16 * 2048
    assert sum(len(c) for c in chunks) == 40000


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_streamed_csv_and_json_print_what_the_whole_result_would(folders, rag_bench, fmt):
    from rag_bench.cli.render import render

    runs, _, _ = folders
    out = rag_bench("sql", LARGE, "--runs-dir", runs, "--format", fmt)
    assert out.exit_code == 0 and out.stderr == ""
    assert out.stdout == render(open_runs(runs).sql(LARGE), fmt) + "\n"


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_the_text_formats_show_the_first_rows_with_a_note(folders, rag_bench, fmt):
    from rag_bench.cli.render import render
    from rag_bench.cli.store import ROWS_SHOWN

    runs, _, _ = folders
    out = rag_bench("sql", LARGE, "--runs-dir", runs, "--format", fmt)
    assert out.exit_code == 0
    whole = open_runs(runs).sql(LARGE)
    assert out.stdout == render(whole.head(ROWS_SHOWN), fmt) + "\n"
    left_out = 40000 - ROWS_SHOWN
    assert out.stderr.strip() == (
        f"note: {left_out} more rows not shown; --format csv or json prints every row"
    )
    small = rag_bench("sql", "SELECT 1 AS a WHERE false", "--runs-dir", runs, "--format", fmt)
    assert small.exit_code == 0 and small.stderr == ""


INTERRUPTED = """
import signal
import sys
# Python's own Ctrl-C, as in a library user's process: the test runner may have been started
# in the background with SIGINT ignored, which every child inherits through exec
signal.signal(signal.SIGINT, signal.default_int_handler)
from rag_bench.runs import open_runs
store = open_runs(sys.argv[1])
store.sql("SELECT 1 AS one")  # imports and the catalog read: a Ctrl-C lands in the query below
print("running", flush=True)
try:
    store.sql("SELECT sum(hash(i) % 7) AS s FROM range(100000000000) t(i)")
except KeyboardInterrupt:
    print("interrupted", store.sql("SELECT 1 AS one")["one"].tolist(), flush=True)
"""


@pytest.mark.signals
def test_ctrl_c_stops_a_library_query_at_once(folders):
    """SIGINT reaches the caller of ``RunStore.sql`` while DuckDB is mid-query (left alone, the
    query would run for hours), and the store still answers afterwards."""
    import signal
    import subprocess
    import sys
    import time

    runs, _, _ = folders
    child = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED, str(runs)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "running"
        time.sleep(1.5)  # the query is inside DuckDB by now
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=60)
    finally:
        child.kill()
    assert out.strip() == "interrupted [1]"


def test_a_ctrl_c_while_the_query_thread_starts_runs_no_query(monkeypatch):
    """KeyboardInterrupt raised in ``Thread.start`` (after the thread exists, before the wait
    that interrupts DuckDB): the query must never run, or it runs on uninterrupted and the
    process hangs at exit waiting for it."""
    import threading

    from rag_bench.runs.sql import _interruptible

    started = threading.Thread.start

    def start_then_interrupted(thread):
        started(thread)
        raise KeyboardInterrupt

    ran = threading.Event()
    monkeypatch.setattr(threading.Thread, "start", start_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        _interruptible(None, ran.set)
    monkeypatch.undo()
    assert not ran.wait(0.5)
