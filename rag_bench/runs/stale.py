"""Removing what ended processes left in a runs folder.

Staging and deletion folders of dead processes go, as do locks nobody holds, checkpoints without
any answered query (or of a run that was stored after all), and table partitions of a run that
was never committed (no manifest, no live lock). Checkpoints holding answers stay: they are
resumable work. Anything younger than a minute is left alone, and anything whose name holds no
valid run id is not touched at all.

Only what is provably rag-bench's own is deleted: no symbolic link is followed or removed; an
uncommitted partition goes only when the staging folder of its run's write is still there (the
trace of a writer that died between placing its tables and committing), or the marker of its
run's removal (an ``rm`` stopped halfway), and it is a real folder
holding nothing but its one Parquet part; and no partition goes at all while the manifests
folder is missing or not a real folder (moved away, a link), since then no run can be told
committed.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from rag_bench.io.durable import STAGING_PREFIX, is_real_folder
from rag_bench.runs.catalog import committed_ids, is_stored, partitions
from rag_bench.runs.commit import delete_partition
from rag_bench.runs.folder import RunsFolder
from rag_bench.runs.ids import Locks, can_judge_staleness, is_run_id
from rag_bench.runs.layout import ANSWERS, MANIFESTS, PART, PARTIAL, REMOVING, STAGING

STALE_AFTER_S = 60.0  # hidden leftovers younger than this are never judged stale
# an upload to an object store can take long, and its writer's lock is on another machine
REMOTE_STALE_AFTER_S = 24 * 3600.0


def clean_stale(runs: RunsFolder, locks: Locks) -> list[str]:
    """Remove what ended processes left in ``runs``; returns the names removed."""
    uncommitted = _clean_uncommitted(runs, locks)  # first: it needs the staging folders
    return _clean_bookkeeping(runs, locks) + uncommitted


def _age(path: Path) -> float:
    try:
        return time.time() - path.lstat().st_mtime
    except OSError:
        return 0.0


def _is_stale(runs: RunsFolder, locks: Locks, entry: Path) -> bool:
    """Whether a hidden entry of the bookkeeping folder was left by a process that ended."""
    name = entry.name
    if entry.is_symlink():
        return False  # not made by rag-bench: left alone
    if name.startswith(REMOVING) and entry.is_dir():
        return True
    if name.startswith(STAGING) and entry.is_dir():
        run_id = name[len(STAGING) :].rpartition("-")[0]
        return is_run_id(run_id) and not locks.is_held(run_id)
    if name.startswith(PARTIAL) and entry.is_dir():
        run_id = name[len(PARTIAL) :]
        return (
            is_run_id(run_id)
            and not locks.is_held(run_id)
            and (not any(entry.glob(ANSWERS)) or is_stored(runs, run_id))
        )
    return name.startswith(STAGING_PREFIX) and entry.is_file()  # an unfinished atomic write


def _clean_bookkeeping(runs: RunsFolder, locks: Locks) -> list[str]:
    removed: list[str] = []
    local = runs.bookkeeping
    if not local.is_dir():
        return removed
    try:
        entries = list(local.iterdir())
        if runs.local is not None and is_real_folder(local / MANIFESTS):
            entries += [
                p for p in (local / MANIFESTS).iterdir() if p.name.startswith(STAGING_PREFIX)
            ]
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.startswith(".") or _age(entry) < STALE_AFTER_S:
            continue
        if name.endswith(".lock") and entry.is_file() and not entry.is_symlink():
            run_id = name[1 : -len(".lock")]
            if can_judge_staleness() and is_run_id(run_id) and locks.remove_if_free(run_id):
                removed.append(name)
            continue
        if _is_stale(runs, locks, entry):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(name)
    return removed


def _partition_age(runs: RunsFolder, parts: tuple[str, ...]) -> float:
    """Seconds since the partition last changed (0 when the store cannot tell)."""
    if runs.local is not None:
        return _age(runs.local.joinpath(*parts))
    times = [e.mtime for e in runs.list(*parts, recursive=True) if e.mtime is not None]
    return time.time() - max(times) if times else 0.0


def _manifests_there(runs: RunsFolder) -> bool:
    """Whether the manifests folder is there as a real folder, so that a partition without a
    manifest can be told uncommitted (remotely: the prefix holds at least one object)."""
    if runs.local is None:
        return runs.exists(MANIFESTS)
    return is_real_folder(runs.local) and is_real_folder(runs.local / MANIFESTS)


def _staged_ids(runs: RunsFolder) -> set[str]:
    """The run ids whose write (or removal) left its staging folder (or marker) behind."""
    try:
        names = [p.name for p in runs.bookkeeping.iterdir() if is_real_folder(p)]
    except OSError:
        return set()
    return {
        name[len(prefix) :].rpartition("-")[0]
        for name in names
        for prefix in (STAGING, REMOVING)
        if name.startswith(prefix)
    }


def _only_its_part(runs: RunsFolder, parts: tuple[str, ...]) -> bool:
    """Whether a partition holds what rag-bench writes there and nothing else: one regular
    Parquet part (remote partitions are trusted to the object store's listing)."""
    if runs.local is None:
        return True
    listed = runs.list(*parts)
    return [(e.name, e.is_dir, e.link) for e in listed] == [(PART, False, False)]


def _clean_uncommitted(runs: RunsFolder, locks: Locks) -> list[str]:
    """Remove partitions whose run has no manifest, no live lock, and has not changed for a
    while: the leftovers of a process that died between moving tables in and committing."""
    removed: list[str] = []
    if not _manifests_there(runs):
        return removed
    committed = set(committed_ids(runs))
    staged = _staged_ids(runs)
    threshold = STALE_AFTER_S if runs.local is not None else REMOTE_STALE_AFTER_S
    for run_id, found in partitions(runs).items():
        if run_id not in staged or run_id in committed or locks.is_held(run_id):
            continue
        old = [
            parts
            for parts in found
            if _partition_age(runs, parts) >= threshold and _only_its_part(runs, parts)
        ]
        if not old or is_stored(runs, run_id):  # committed meanwhile: keep
            continue
        for parts in old:
            delete_partition(runs, parts)
            removed.append("/".join(parts))
    return removed
