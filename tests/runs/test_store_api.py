"""The run store as a library user sees it: ``open_runs`` once, then list, resolve, read the
trace tables as DataFrames, query with SQL and remove, all through one object."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from runs_helpers import copy_run, partitions, read_table

from rag_bench.errors import RagBenchError, UnknownNameError
from rag_bench.runs import TABLES, RunStore, open_runs
from rag_bench.runs.layout import view_schema

OTHER = "20990101-000000-hybrid-0001"


@pytest.fixture
def two(tmp_path, clean):
    """A runs folder with the clean baseline run and a copy of it stored as variant hybrid."""
    runs = tmp_path / "runs"
    shutil.copytree(clean.runs.root, runs)
    copy_run(clean, runs, OTHER, variant="hybrid", created_at="2099-01-01T00:00:00+00:00")
    return runs, clean.run_id


def test_open_runs_builds_one_store_and_passes_a_store_through(tmp_path, monkeypatch):
    store = open_runs(tmp_path)
    assert isinstance(store, RunStore) and open_runs(store) is store
    monkeypatch.setenv("RAG_BENCH_RUNS_DIR", str(tmp_path / "elsewhere"))
    assert str(open_runs()) == str(tmp_path / "elsewhere") and open_runs().is_default
    assert not store.is_default


def test_list_get_and_resolve(two):
    runs, baseline = two
    store = open_runs(runs)
    assert [r.run_id for r in store.list()] == [baseline, OTHER]
    assert [r.run_id for r in store.list("hybrid")] == [OTHER]
    assert store.resolve("latest") == OTHER
    assert store.resolve("latest:baseline+") == baseline
    assert store.resolve(baseline[:18]) == baseline
    assert store.get(OTHER).manifest["variant"] == "hybrid"
    with pytest.raises(RagBenchError, match="ambiguous"):
        store.resolve("20")
    with pytest.raises(RagBenchError, match="no run of variant 'nope'"):
        store.resolve("latest:nope")


def test_tables_are_dataframes_with_run_id_and_variant_first(two):
    runs, baseline = two
    store = open_runs(runs)
    for table in TABLES:
        both = store.table(table)
        assert list(both.columns) == view_schema(table).names
        assert list(both.drop_duplicates("run_id")["run_id"]) == [baseline, OTHER]
        one = store.table(table, [OTHER])
        assert set(one["variant"]) <= {"hybrid"}
        written = read_table(store.get(OTHER).location, table)
        pd.testing.assert_frame_equal(one.drop(columns=["variant"]), written)
    pd.testing.assert_frame_equal(store.metrics("latest"), store.table("metrics", [OTHER]))
    assert len(store.queries()) == 2 * len(store.queries([baseline]))
    assert len(store.retrieved([baseline])) and len(store.claims([baseline]))


def test_a_table_read_matches_the_sql_view(two):
    runs, _ = two
    store = open_runs(runs)
    frame = store.metrics()
    viewed = store.sql("SELECT * FROM metrics")
    key = ["run_id", "query_id", "metric"]
    left = frame.sort_values(key).reset_index(drop=True)
    right = viewed.sort_values(key).reset_index(drop=True)
    assert list(left.columns) == list(right.columns)
    assert left["value"].equals(right["value"]) and left["run_id"].equals(right["run_id"])


def test_an_empty_store_gives_empty_tables_of_the_right_columns(tmp_path):
    store = open_runs(tmp_path / "none")
    assert store.list() == []
    for table in TABLES:
        frame = store.table(table)
        assert frame.empty and list(frame.columns) == view_schema(table).names
    assert store.sql("SELECT count(*) AS n FROM metrics")["n"].tolist() == [0]
    with pytest.raises(UnknownNameError):
        store.table("answers")


def test_remove_takes_a_run_away_and_the_store_sees_it(two):
    runs, baseline = two
    store = open_runs(runs)
    assert store.list()  # read once
    assert store.remove("latest") == OTHER
    assert [r.run_id for r in store.list()] == [baseline]
    assert OTHER not in partitions(runs) and not store.is_stored(OTHER)
    with pytest.raises(RagBenchError, match="no run"):
        store.get(OTHER)
