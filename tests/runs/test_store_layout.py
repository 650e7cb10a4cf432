"""The run store's layout: hive-partitioned tables that DuckDB (and any Hive-style reader) read in
place, the manifest as the commit marker, leftovers of a commit cut short, runs of the first
layout and their upgrade, and a runs folder given as a ``file://`` URL."""

from __future__ import annotations

import json
import shutil
import signal
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from processes import Process, age, assert_same_traces, hidden, visible
from runs_helpers import committed_ids, locate, manifest_file, partitions, read_table, table_file

from conftest import assert_one_line_error
from rag_bench.experiment.runner import Selection
from rag_bench.runs import TABLES, open_runs

SMOKE = Selection(tag="smoke")


@pytest.fixture(scope="module")
def written(tmp_path_factory, index_cache):
    """A runs folder written by `rag-bench run`: two baseline runs and one hybrid run."""
    from click.testing import CliRunner

    from rag_bench.cli.main import cli

    runs = tmp_path_factory.mktemp("layout") / "runs"
    for variant in ("baseline", "baseline", "hybrid"):
        args = ["run", "--variant", variant, "--tag", "smoke", "--runs-dir", str(runs)]
        out = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert out.exit_code == 0, out.stderr
    return runs


# --- read in place ---------------------------------------------------------------------------


def test_duckdb_reads_the_partitioned_traces_in_place(written):
    ids = committed_ids(written)
    variants = {i: json.loads(manifest_file(written, i).read_text())["variant"] for i in ids}
    assert sorted(variants.values()) == ["baseline", "baseline", "hybrid"]
    for table in TABLES:
        counts = duckdb.sql(
            "SELECT variant, run_id, count(*) AS n FROM read_parquet("
            f"'{written}/{table}/*/*/*.parquet', hive_partitioning=true) GROUP BY ALL"
        ).df()
        expected = {(variants[i], i): len(read_table(locate(written, i), table)) for i in ids}
        assert dict(zip(zip(counts["variant"], counts["run_id"]), counts["n"])) == expected
        assert all(n > 0 for n in expected.values()) or table == "claims"
    queries = duckdb.sql(
        f"SELECT DISTINCT run_id, query_id FROM read_parquet('{written}/queries/*/*/*.parquet', "
        "hive_partitioning=true)"
    ).df()
    assert len(queries) == 3 * 30
    manifests = duckdb.sql(f"SELECT run_id, variant FROM read_json('{written}/_manifests/*.json')")
    assert sorted(manifests.fetchall()) == sorted(variants.items())


def test_the_files_hold_no_partition_column_and_a_hive_reader_adds_both(written):
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    for table in TABLES:
        for run_id in committed_ids(written):
            names = pq.read_schema(table_file(locate(written, run_id), table)).names
            assert "run_id" not in names and "variant" not in names
        # what Spark's spark.read.parquet('runs/metrics') and Trino's partitioned table see
        dataset = ds.dataset(written / table, format="parquet", partitioning="hive")
        frame = dataset.to_table(columns=["variant", "run_id"]).to_pandas()
        assert set(frame["run_id"]) <= set(committed_ids(written))


def test_rag_bench_views_carry_run_id_and_variant(rag_bench, written):
    out = rag_bench(
        "sql",
        "SELECT variant, count(DISTINCT run_id) AS runs, count(*) AS n FROM queries "
        "GROUP BY ALL ORDER BY variant",
        "--runs-dir",
        written,
        "--format",
        "csv",
    )
    assert out.stdout.split() == ["variant,runs,n", "baseline,2,60", "hybrid,1,30"]
    columns = open_runs(written).sql("SELECT * FROM metrics LIMIT 1").columns
    assert list(columns[:2]) == ["run_id", "variant"]


def test_a_variant_name_with_path_characters_is_escaped_and_read_back(tmp_path, clean):
    tables = {t: read_table(clean, t) for t in TABLES}
    manifest = json.loads(manifest_file(Path(clean.runs.root), clean.run_id).read_text())
    run_id = "20260101-000000-odd-0001"
    for frame in tables.values():
        frame["run_id"] = run_id
    odd = "team/a=b %x"
    open_runs(tmp_path).write_run(run_id, {**manifest, "run_id": run_id, "variant": odd}, tables)
    folders = [p.name for p in (tmp_path / "metrics").iterdir()]
    assert folders == ["variant=team%2Fa%3Db %25x"]
    found = duckdb.sql(
        f"SELECT DISTINCT variant FROM read_parquet('{tmp_path}/metrics/*/*/*.parquet', "
        "hive_partitioning=true)"
    ).fetchall()
    assert found == [(odd,)]
    store = open_runs(tmp_path)
    assert store.sql("SELECT DISTINCT variant FROM retrieved")["variant"].tolist() == [odd]
    assert_same_traces(store.get(run_id).location, clean)


# --- the manifest commits ------------------------------------------------------------------


@pytest.mark.signals
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_kill_9_between_placing_tables_and_committing_hides_them_until_cleaned(
    tmp_path, index_cache, clean, rag_bench
):
    runs = tmp_path / "runs"
    args = ["run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", runs]
    process = Process(args, cache=index_cache, pause="commit")
    process.wait_for("paused at commit")
    process.signal(signal.SIGKILL)
    process.finish()
    [run_id] = partitions(runs)  # the tables are in place ...
    assert committed_ids(runs) == []  # ... but not committed
    listing = rag_bench("runs", "--runs-dir", runs, "--format", "json")
    assert json.loads(listing.stdout) == [] and listing.stderr == ""
    assert open_runs(runs).clean_stale() == []  # too young to judge
    age(runs)
    removed = open_runs(runs).clean_stale()
    staging = [n for n in removed if n.startswith(f".tmp-{run_id}-")]  # emptied by the move
    assert sorted(removed) == sorted(
        [f"{t}/variant=baseline/run_id={run_id}" for t in TABLES] + [f".{run_id}.lock", *staging]
    )
    assert len(staging) == 1
    assert visible(runs) == [] and hidden(runs) == [f".partial-{run_id}"]
    resumed = rag_bench("run", "--resume", run_id, "--runs-dir", runs)
    assert resumed.exit_code == 0, resumed.stderr
    assert_same_traces(locate(runs, run_id), clean)
    assert visible(runs) == [run_id] and hidden(runs) == []


@pytest.mark.signals
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_between_placing_tables_and_committing_takes_them_back(tmp_path, index_cache):
    runs = tmp_path / "runs"
    args = ["run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", runs]
    process = Process(args, cache=index_cache, pause="commit")
    process.wait_for("paused at commit")
    process.signal(signal.SIGINT)
    assert process.finish() == 130
    assert visible(runs) == [] and partitions(runs) == {}
    [partial] = hidden(runs)
    assert partial.startswith(".partial-")


def test_rm_uncommits_before_deleting_the_tables(tmp_path, clean, rag_bench, monkeypatch):
    from rag_bench.runs import commit

    runs = tmp_path / "runs"
    shutil.copytree(clean.runs.root, runs)

    def fail(*args):
        raise OSError("the disk went away")

    monkeypatch.setattr(commit, "delete_partition", fail)
    out = rag_bench("rm", clean.run_id, "--yes", "--runs-dir", runs)
    assert_one_line_error(out, f"could not remove run {clean.run_id}", "the disk went away")
    assert committed_ids(runs) == [] and list(partitions(runs)) == [clean.run_id]
    monkeypatch.undo()
    age(runs)
    open_runs(runs).clean_stale()
    assert visible(runs) == []


# --- the first layout --------------------------------------------------------------------------


def _first_layout(runs: Path, run: object) -> Path:
    """``run`` rewritten the way rag-bench stored runs before the partitioned layout."""
    folder = runs / run.run_id
    folder.mkdir(parents=True)
    for table in TABLES:
        read_table(run, table).to_parquet(folder / f"{table}.parquet", index=False)
    manifest = json.loads(manifest_file(Path(run.runs.root), run.run_id).read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 1}))
    return folder


def test_runs_of_the_first_layout_are_named_with_the_fix_and_upgraded(tmp_path, clean, rag_bench):
    runs = tmp_path / "runs"
    folder = _first_layout(runs, clean)
    listed = rag_bench("runs", "--runs-dir", runs, "--format", "csv")
    assert listed.exit_code == 0
    [warning] = listed.stderr.strip().splitlines()
    assert warning == (
        f"warning: skipped: run {clean.run_id} is stored in the first layout ({folder}), which "
        f"this rag-bench does not read (fix: rewrite the runs of that folder with "
        f"`rag-bench runs --upgrade --runs-dir {runs}`)"
    )
    assert_one_line_error(
        rag_bench("show", clean.run_id, "--runs-dir", runs), "first layout", "--upgrade"
    )
    upgraded = rag_bench("runs", "--upgrade", "--runs-dir", runs, "--format", "csv")
    assert upgraded.exit_code == 0, upgraded.stderr
    assert upgraded.stderr.strip() == f"upgraded run {clean.run_id}"
    assert clean.run_id in upgraded.stdout and not folder.exists()
    assert_same_traces(locate(runs, clean.run_id), clean)
    manifest = json.loads(manifest_file(runs, clean.run_id).read_text())
    assert manifest["schema_version"] == 2 and manifest["upgraded_from_schema"] == 1
    assert rag_bench("show", clean.run_id, "--runs-dir", runs).exit_code == 0
    again = rag_bench("runs", "--upgrade", "--runs-dir", runs, "--format", "csv")
    assert again.exit_code == 0 and again.stderr == ""


def test_an_upgrade_cut_short_after_the_commit_is_finished_by_the_next(tmp_path, clean, rag_bench):
    runs = tmp_path / "runs"
    shutil.copytree(clean.runs.root, runs)
    folder = _first_layout(runs, clean)  # both copies: the old folder outlived its rewrite
    listed = rag_bench("runs", "--runs-dir", runs, "--format", "json")
    assert listed.stderr == "" and [r["run_id"] for r in json.loads(listed.stdout)] == [
        clean.run_id
    ]
    upgraded = rag_bench("runs", "--upgrade", "--runs-dir", runs)
    assert upgraded.exit_code == 0 and upgraded.stderr == "" and not folder.exists()


def test_a_run_of_the_first_layout_can_be_removed(tmp_path, clean, rag_bench):
    runs = tmp_path / "runs"
    folder = _first_layout(runs, clean)
    assert rag_bench("rm", clean.run_id[:-2], "--yes", "--runs-dir", runs).exit_code == 0
    assert not folder.exists() and hidden(runs) == []


# --- a file:// URL -----------------------------------------------------------------------------


def test_a_file_url_runs_folder_end_to_end(tmp_path, rag_bench):
    url = (tmp_path / "runs").as_uri()
    ids = []
    for variant in ("baseline", "hybrid"):
        out = rag_bench("run", "--variant", variant, "--tag", "smoke", "--runs-dir", url)
        assert out.exit_code == 0, out.stderr
        ids.append(out.stderr.split("stored run ")[1].split()[0])
    assert committed_ids(tmp_path / "runs") == sorted(ids)
    listed = json.loads(rag_bench("runs", "--runs-dir", url, "--format", "json").stdout)
    assert [r["run_id"] for r in listed] == sorted(ids)
    shown = rag_bench("show", "latest:hybrid+", "--runs-dir", url, "--format", "json")
    assert json.loads(shown.stdout)["manifest"]["run_id"] == ids[1]
    compared = rag_bench(
        "compare", *ids, "--runs-dir", url, "--format", "csv", "--resamples", "200"
    )
    assert compared.exit_code == 0 and "recall@10" in compared.stdout
    sql = rag_bench(
        "sql", "SELECT count(*) AS n FROM queries", "--runs-dir", url, "--format", "csv"
    )
    assert sql.stdout.split() == ["n", "60"]
    assert rag_bench("rm", ids[0], "--yes", "--runs-dir", url).exit_code == 0
    assert committed_ids(tmp_path / "runs") == [ids[1]]
    assert_one_line_error(
        rag_bench("runs", "--runs-dir", "file://host/x"), "not a local file URL", "file:///"
    )


def test_views_of_a_folder_match_pandas_reads(written):
    store = open_runs(written)
    con = store.connect()
    for run in store.list():
        for table in TABLES:
            viewed = con.execute(
                f"SELECT * EXCLUDE (variant) FROM {table} WHERE run_id = ?", [run.run_id]
            ).df()
            direct = read_table(run.location, table)
            assert list(viewed.columns) == list(direct.columns)
            assert len(viewed) == len(direct)
            pd.testing.assert_series_equal(
                viewed["query_id"].sort_values(ignore_index=True),
                direct["query_id"].sort_values(ignore_index=True),
                check_dtype=False,
            )
