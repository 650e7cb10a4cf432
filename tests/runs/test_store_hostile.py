"""Nothing read from a runs folder is trusted. An identifier from disk (a checkpoint's run id, a
manifest's or a partition folder's name, a variant) never becomes a path outside the runs
folder, and one hostile file (a manifest nested too deep, of the wrong types or truncated; a
Parquet part of the wrong column type) is reported once and skipped while the other runs stay
readable and the bad one stays removable."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runs_helpers import copy_run, fingerprint, manifest_file, partitions, table_file

from conftest import assert_one_line_error
from rag_bench.runs import open_runs

BAD = "20000101-000000-baseline-beef"


@pytest.fixture
def folders(tmp_path, clean):
    """A runs folder holding one good run, and a folder beside it with files nobody may touch."""
    runs = tmp_path / "runs"
    shutil.copytree(clean.runs.root, runs)
    outside = tmp_path / "outside"
    (outside / "name").mkdir(parents=True)
    for victim in ("name.json", "name.lock", "name/answers-000001.jsonl"):
        (outside / victim).write_text("keep me\n")
    return runs, outside


def _aged(path: Path) -> None:
    past = time.time() - 3600
    for each in [path, *path.rglob("*")]:
        os.utime(each, (past, past))


# --- identifiers from disk ------------------------------------------------------------------


def _forged_ids(outside: Path) -> list[str]:
    return [f"/../../../..{outside}/name", "../outside/name", "..", ".hidden", "a b", ""]


@pytest.mark.parametrize("which", range(6))
@pytest.mark.parametrize("by_path", [False, True])
def test_a_forged_checkpoint_run_id_touches_nothing(folders, rag_bench, clean, which, by_path):
    runs, outside = folders
    forged = _forged_ids(outside)[which]
    partial = runs / ".partial-x"
    partial.mkdir()
    header = {"run_id": forged, "variant": "baseline", "params": {}, "ks": [10], "depth": 100}
    (partial / "checkpoint.json").write_text(json.dumps(header))
    (partial / "answers-000001.jsonl").write_text('{"query_id": "q", "key": "k"}\n')
    _aged(partial)
    before = fingerprint(runs, mtimes=True), fingerprint(outside, mtimes=True)
    ref = str(partial) if by_path else "x"
    out = rag_bench("run", "--resume", ref, "--runs-dir", runs)
    assert_one_line_error(out, "the checkpoint", "is unreadable", "without --resume")
    assert (fingerprint(runs, mtimes=True), fingerprint(outside, mtimes=True)) == before


def test_a_checkpoint_naming_another_stored_run_is_refused(folders, rag_bench, clean):
    runs, _ = folders
    partial = runs / ".partial-x"
    partial.mkdir()
    (partial / "checkpoint.json").write_text(json.dumps({"run_id": clean.run_id}))
    before = fingerprint(runs)
    out = rag_bench("run", "--resume", "x", "--runs-dir", runs)
    assert_one_line_error(out, "the checkpoint", clean.run_id)
    assert fingerprint(runs) == before


def test_forged_folder_names_are_left_alone(folders, clean):
    """Partition folders and leftovers whose names hold no valid run id are not ours: the
    clean-up of stale leftovers neither follows nor deletes them."""
    runs, outside = folders
    forged = [
        runs / "metrics" / "variant=baseline" / "run_id=..%2F..%2F..%2Foutside%2Fname",
        runs / ".partial-..",
        runs / ".tmp-..%2Foutside-0000",
    ]
    for folder in forged:
        folder.mkdir(parents=True)
        (folder / "part-0.parquet").write_text("x")
    (runs / "_manifests" / "..json").write_text("{}")
    _aged(runs)
    before = fingerprint(outside)
    store = open_runs(runs)
    store.clean_stale()
    assert fingerprint(outside) == before
    assert all(folder.exists() for folder in forged)
    assert [r.run_id for r in store.list()] == [clean.run_id] and not store.broken


def test_a_variant_with_path_characters_stays_inside(folders, clean):
    runs, outside = folders
    store = open_runs(runs)
    tables = {t: store.table(t, [clean.run_id]) for t in ("queries", "metrics")}
    manifest = {**store.get(clean.run_id).manifest, "run_id": BAD, "variant": "../../outside/x"}
    before = fingerprint(outside)
    store.write_run(BAD, manifest, tables)
    assert store.get(BAD).variant == "../../outside/x"
    store.remove(BAD)
    assert fingerprint(outside) == before
    assert BAD not in partitions(runs)


# --- hostile files --------------------------------------------------------------------------


def _deep(path: Path) -> None:
    path.write_text("[" * 200_000 + "]" * 200_000)


def _edit(**changes):
    def edit(path: Path) -> None:
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))

    return edit


def _truncated(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


HOSTILE_MANIFESTS = {
    "nested 200,000 deep": (_deep, "nested too deep"),
    "schema_version a string": (_edit(schema_version="2"), 'schema_version "2" is not a number'),
    "variant a number": (_edit(variant=5), "names no variant"),
    "dataset a string": (_edit(dataset="x"), "dataset is a str"),
    "ks a string": (_edit(ks="10"), "ks is a str"),
    "judge a list": (_edit(judge=[1]), "judge is a list"),
    "dataset name a list": (_edit(dataset={"name": ["x"]}), "dataset.name is a list"),
    "truncated": (_truncated, "unreadable manifest"),
    "not an object": (lambda p: p.write_text("[1]"), "not a JSON object"),
}


def _string_values(runs: Path) -> None:
    path = table_file(open_runs(runs).get(BAD).location, "metrics")
    table = pq.read_table(path)
    index = table.schema.get_field_index("value")
    pq.write_table(table.set_column(index, "value", table["value"].cast(pa.string())), path)


def _assert_skipped_then_removable(rag_bench, runs: Path, good: str, why: str) -> None:
    listed = rag_bench("runs", "--runs-dir", runs, "--format", "json")
    assert listed.exit_code == 0, listed.stderr
    [warning] = listed.stderr.strip().splitlines()
    assert warning.startswith(f"warning: skipped: run {BAD}") and why in warning, warning
    assert {r["run_id"] for r in json.loads(listed.stdout)} == {good, BAD}
    sql = rag_bench("sql", "SELECT DISTINCT run_id FROM metrics", "--runs-dir", runs)
    assert sql.exit_code == 0 and good in sql.stdout and BAD not in sql.stdout
    assert rag_bench("show", good, "--runs-dir", runs).exit_code == 0
    assert rag_bench("rm", BAD, "--yes", "--runs-dir", runs).exit_code == 0
    assert BAD not in partitions(runs) and not manifest_file(runs, BAD).exists()
    after = rag_bench("runs", "--runs-dir", runs)
    assert after.exit_code == 0 and after.stderr == ""


@pytest.mark.parametrize("kind", list(HOSTILE_MANIFESTS))
def test_a_hostile_manifest_is_skipped_and_removable(folders, rag_bench, clean, kind):
    runs, _ = folders
    copy_run(clean, runs, BAD)
    spoil, why = HOSTILE_MANIFESTS[kind]
    spoil(manifest_file(runs, BAD))
    _assert_skipped_then_removable(rag_bench, runs, clean.run_id, why)


def test_a_part_with_a_text_value_column_is_skipped_and_removable(folders, rag_bench, clean):
    runs, _ = folders
    copy_run(clean, runs, BAD)
    _string_values(runs)
    _assert_skipped_then_removable(rag_bench, runs, clean.run_id, "column value is string")


def test_manifests_being_a_file_is_one_line(folders, rag_bench):
    runs, _ = folders
    shutil.rmtree(runs / "_manifests")
    (runs / "_manifests").write_text("")
    before = fingerprint(runs)
    for command in (["runs"], ["sql", "SELECT 1"], ["show", "latest"], ["rm", "x", "--yes"]):
        out = rag_bench(*command, "--runs-dir", runs)
        assert_one_line_error(out, "_manifests is a file", "move that file away")
    assert fingerprint(runs) == before


# --- the runs folder itself ---------------------------------------------------------------------


def test_a_runs_folder_that_is_a_file_is_one_line(tmp_path, rag_bench):
    runs = tmp_path / "runs"
    runs.write_text("not a folder")
    for command in (["runs"], ["sql", "SELECT 1"], ["show", "latest"]):
        out = rag_bench(*command, "--runs-dir", runs)
        assert_one_line_error(out, f"the runs folder {runs} is a file")
    assert runs.read_text() == "not a folder"


def test_an_empty_runs_folder_name_is_one_line(tmp_path, rag_bench, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in (["runs"], ["run", "--variant", "baseline", "--tag", "smoke"]):
        out = rag_bench(*command, "--runs-dir", "")
        assert_one_line_error(out, "the runs folder is named by an empty string")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_runs_folder_is_named(tmp_path, rag_bench):
    missing = tmp_path / "missing"
    for command in (["runs", "--format", "json"], ["sql", "SELECT count(*) AS n FROM runs"]):
        out = rag_bench(*command, "--runs-dir", missing)
        assert out.exit_code == 0
        warning = f"warning: there is no runs folder {missing} (nothing stored yet)"
        assert out.stderr.strip() == warning
    assert not missing.exists()


def test_a_report_is_never_written_into_the_runs_folder(folders, rag_bench, clean):
    runs, _ = folders
    before = fingerprint(runs)
    for target in (runs / "_manifests" / "x.json", runs / "report.html"):
        out = rag_bench("report", clean.run_id, "--runs-dir", runs, "-o", target)
        assert_one_line_error(out, "would be written into the runs folder", "outside")
    assert fingerprint(runs) == before
