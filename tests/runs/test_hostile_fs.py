"""A shared runs folder is a trust boundary: whatever another user plants in it (a symbolic link
in place of a lock, a checkpoint, a table folder, a partition or a Parquet part; a manifests
folder moved away) never makes the next command write, delete or read outside the folder, and
the clean-up at the start of a run deletes only its own leftovers. Each data-loss case here
failed before the runs folder was treated so (the lock's target truncated, a folder outside
deleted, every older run's tables removed)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from processes import interrupted_run
from runs_helpers import committed_ids, fingerprint, partitions

from conftest import assert_one_line_error
from rag_bench.runs import TABLES, open_runs

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX symbolic links and flock"),
]


@pytest.fixture
def outside(tmp_path):
    """A folder beside the runs folder holding a file nobody may touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("keep me\n")
    return folder


@pytest.fixture
def stored(tmp_path, clean):
    """A runs folder holding a copy of one good run."""
    runs = tmp_path / "runs"
    shutil.copytree(clean.runs.root, runs)
    return runs


def _aged(folder: Path) -> None:
    past = time.time() - 3600
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (past, past), follow_symlinks=False)


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# --- locks and checkpoints --------------------------------------------------------------------


@pytest.fixture
def interrupted(tmp_path, monkeypatch, index_cache):
    runs = tmp_path / "runs"
    return runs, interrupted_run(monkeypatch, runs, index_cache).run_id


def test_a_linked_lock_is_not_written_through(interrupted, outside, rag_bench):
    runs, run_id = interrupted
    (runs / f".{run_id}.lock").symlink_to(outside / "victim.txt")
    out = rag_bench("run", "--resume", run_id, "--runs-dir", runs)
    assert_one_line_error(out, f".{run_id}.lock", "is a symbolic link", "not touched")
    assert (outside / "victim.txt").read_text() == "keep me\n"  # was truncated to a pid


def test_a_hard_linked_lock_is_not_written_through(interrupted, tmp_path, rag_bench):
    runs, run_id = interrupted
    victim = runs / "victim.txt"  # same file system: a hard link is possible
    victim.write_text("keep me\n")
    os.link(victim, runs / f".{run_id}.lock")
    out = rag_bench("run", "--resume", run_id, "--runs-dir", runs)
    assert_one_line_error(out, f".{run_id}.lock", "is not a plain file of its own")
    assert victim.read_text() == "keep me\n"


def test_a_linked_checkpoint_folder_is_refused(interrupted, outside, rag_bench):
    runs, run_id = interrupted
    partial = runs / f".partial-{run_id}"
    shutil.move(partial, outside / "partial")
    partial.symlink_to(outside / "partial")
    before = fingerprint(outside, mtimes=True)
    for ref in (run_id, str(partial)):
        out = rag_bench("run", "--resume", ref, "--runs-dir", runs)
        assert_one_line_error(out, "is unreadable", "symbolic link", "without --resume")
    assert fingerprint(outside, mtimes=True) == before  # no answers written there
    assert open_runs(runs).clean_stale() == [] and partial.is_symlink()


def test_a_linked_answers_file_is_not_read(interrupted, outside, clean, rag_bench):
    """A checkpoint's files are read without following links: the linked block is recomputed,
    and the resumed run still ends with an uninterrupted run's traces."""
    from processes import assert_same_traces
    from runs_helpers import locate

    runs, run_id = interrupted
    [first, *_] = sorted((runs / f".partial-{run_id}").glob("answers-*.jsonl"))
    shutil.move(first, outside / "answers.jsonl")
    first.symlink_to(outside / "answers.jsonl")
    out = rag_bench("run", "--resume", run_id, "--runs-dir", runs, "--format", "json")
    assert out.exit_code == 0, out.stderr
    assert_same_traces(locate(runs, run_id), clean)
    manifest = json.loads((runs / "_manifests" / f"{run_id}.json").read_text())
    assert manifest["resumed"]["queries_from_checkpoint"] == 8  # one block of 8, not 16


# --- rm, readers and writers never pass a link ---------------------------------------------------


def _link_out(runs: Path, outside: Path, *parts: str) -> Path:
    """Move ``runs/<parts>`` to ``outside`` and leave a symbolic link to it in its place."""
    source = runs.joinpath(*parts)
    target = outside / "moved"
    shutil.move(source, target)
    source.symlink_to(target, target_is_directory=target.is_dir())
    return target


@pytest.mark.parametrize("depth", [1, 2, 3], ids=["table", "variant", "partition"])
def test_rm_never_deletes_through_a_link(stored, outside, clean, rag_bench, depth):
    [parts] = [p for p in partitions(stored)[clean.run_id] if p[0] == "queries"]
    target = _link_out(stored, outside, *parts[:depth])
    before = fingerprint(outside, mtimes=True)
    out = rag_bench("rm", clean.run_id, "--yes", "--runs-dir", stored)
    assert out.exit_code == 0, out.stderr
    assert committed_ids(stored) == []
    assert fingerprint(outside, mtimes=True) == before and any(target.rglob("*.parquet"))
    assert "victim.txt" in _files(outside)


def test_readers_skip_a_part_that_is_a_link_with_one_warning(stored, outside, clean, rag_bench):
    store = open_runs(stored)
    frame = store.queries(clean.run_id).drop(columns=["run_id", "variant"]).head(1)
    frame.assign(query="SECRET FROM OUTSIDE").to_parquet(outside / "secret.parquet", index=False)
    part = Path(store.get(clean.run_id).location.table_file("queries"))
    part.unlink()
    part.symlink_to(outside / "secret.parquet")
    out = rag_bench("sql", "SELECT query FROM queries", "--runs-dir", stored, "--format", "csv")
    assert out.exit_code == 0, out.stderr
    assert "SECRET" not in out.stdout and out.stdout.strip() == "query"
    [warning] = out.stderr.strip().splitlines()
    assert warning.startswith("warning: skipped: run ") and "is a symbolic link" in warning
    listing = rag_bench("runs", "--runs-dir", stored, "--format", "json")
    assert "symbolic link" in listing.stdout and "SECRET" not in listing.stdout


def test_a_linked_manifest_is_not_read(stored, outside, clean, rag_bench):
    manifest = stored / "_manifests" / f"{clean.run_id}.json"
    shutil.move(manifest, outside / "m.json")
    manifest.symlink_to(outside / "m.json")
    out = rag_bench("show", clean.run_id, "--runs-dir", stored)
    assert_one_line_error(out, "unreadable manifest", "symbolic link")


@pytest.mark.parametrize("folder", ["queries", "_manifests"])
def test_a_run_is_not_written_through_a_linked_folder(stored, outside, clean, rag_bench, folder):
    target = _link_out(stored, outside, folder)
    before = fingerprint(outside, mtimes=True)
    out = rag_bench("run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", stored)
    assert_one_line_error(out, "symbolic link")
    assert fingerprint(outside, mtimes=True) == before and target.is_dir()


# --- the clean-up at the start of a run -----------------------------------------------------------


def _manifests_gone(runs: Path, outside: Path, how: str) -> None:
    manifests = runs / "_manifests"
    if how == "moved":
        shutil.move(manifests, outside / "manifests")
    elif how == "dangling":
        shutil.rmtree(manifests)
        manifests.symlink_to(outside / "nowhere", target_is_directory=True)
    else:  # a link to an empty folder: no run could be matched to a manifest
        shutil.rmtree(manifests)
        (outside / "empty").mkdir()
        manifests.symlink_to(outside / "empty", target_is_directory=True)


@pytest.mark.parametrize("how", ["moved", "dangling", "linked"])
def test_the_cleanup_deletes_nothing_without_the_manifests_folder(stored, outside, how):
    tables = _files(stored)
    _manifests_gone(stored, outside, how)
    _aged(stored)
    store = open_runs(stored)
    try:
        store.clean_stale()
    except Exception as exc:  # a linked manifests folder is refused in one line
        assert "symbolic link" in str(exc)
    assert [t for t in _files(stored) if not t.startswith("_")] == [
        t for t in tables if not t.startswith("_")
    ]


def test_a_run_after_the_manifests_moved_away_keeps_the_older_tables(
    stored, outside, index_cache, rag_bench, monkeypatch
):
    tables = [t for t in _files(stored) if not t.startswith("_")]
    _manifests_gone(stored, outside, "moved")
    _aged(stored)
    monkeypatch.setenv("RAG_BENCH_CACHE_DIR", str(index_cache))
    for _ in range(2):  # the second run sees a manifests folder again, holding one manifest
        out = rag_bench("run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", stored)
        assert out.exit_code == 0, out.stderr
        _aged(stored)
    assert set(tables) <= set(_files(stored))


def test_a_table_folder_linked_to_another_runs_folder_is_left_alone(stored, tmp_path, clean):
    other = tmp_path / "other"
    shutil.copytree(stored, other)
    shutil.rmtree(other / "_manifests")  # none of its runs is committed as seen from here
    shutil.rmtree(stored / "metrics")
    (stored / "metrics").symlink_to(other / "metrics", target_is_directory=True)
    _aged(other)
    _aged(stored)
    before = fingerprint(other, mtimes=True)
    open_runs(stored).clean_stale()
    assert fingerprint(other, mtimes=True) == before


def test_a_stray_partition_without_its_write_is_kept(stored, clean):
    """A partition with no manifest is deleted only when its run's staging folder proves a
    write of this folder died there; a partition copied in by hand stays."""
    stray = "20000101-000000-baseline-dead"
    for table in TABLES:
        source = stored / table / "variant=baseline" / f"run_id={clean.run_id}"
        shutil.copytree(source, stored / table / "variant=baseline" / f"run_id={stray}")
    _aged(stored)
    assert open_runs(stored).clean_stale() == []
    assert stray in partitions(stored)
    assert pd.read_parquet(stored / "queries" / "variant=baseline" / f"run_id={stray}").shape[0]


# --- a reader while another process removes, an import stopped by a full disk -------------------


def test_sql_over_a_run_removed_meanwhile_sees_it_or_not(stored, clean):
    """The catalog was read, then another process removed the run: the views are remade over
    what the folder holds now, rather than failing on a vanished Parquet part."""
    from runs_helpers import copy_run, locate

    copy_run(locate(stored, clean.run_id), stored, "20000101-000000-baseline-0c0c")
    reader = open_runs(stored)
    assert len(reader.list()) == 2  # read once, kept
    open_runs(stored).remove(clean.run_id)  # another process's rm
    counted = reader.sql("SELECT count(DISTINCT run_id) AS n FROM queries")
    assert counted["n"].tolist() == [1]
    chunks = list(reader.sql_chunks("SELECT DISTINCT run_id FROM metrics"))
    assert [r for c in chunks for r in c["run_id"]] == ["20000101-000000-baseline-0c0c"]


def test_an_import_stopped_by_a_full_disk_suggests_no_resume(
    tmp_path, clean, rag_bench, monkeypatch, index_cache
):
    import errno

    from rag_bench.runs.commit import WriteError
    from rag_bench.runs.store import RunStore

    outputs = tmp_path / "outputs.jsonl"
    out = rag_bench("export", clean.run_id, "--runs-dir", clean.runs.root, "--format", "jsonl")
    outputs.write_text(out.stdout)

    def full(self, run_id, manifest, tables):
        raise WriteError(f"could not write run {run_id} to {self}: No space", "free disk space",
                         errno.ENOSPC)  # fmt: skip

    monkeypatch.setattr(RunStore, "write_run", full)
    monkeypatch.setenv("RAG_BENCH_CACHE_DIR", str(index_cache))
    runs = tmp_path / "runs"
    out = rag_bench("import", outputs, "--name", "mine", "--runs-dir", runs)
    assert_one_line_error(out, "could not write run", "free disk space")
    assert "--resume" not in out.stderr  # `run --resume` cannot finish an import
    assert not list(runs.glob(".partial-*"))  # and no checkpoint is kept for it
