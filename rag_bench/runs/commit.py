"""Writing and removing runs so that nothing is ever half-visible.

A run is committed by its manifest: the tables are written and synced in a hidden staging
folder, moved (or, remotely, uploaded) into place, and the manifest is written last,
atomically. rag-bench lists a run only when its manifest exists, so a crash, Ctrl-C, ``kill
-9`` or a full disk never leaves a visible partial run; deleting a run removes its manifest
first. Partitions left without a manifest are removed by :mod:`rag_bench.runs.stale`.

No path below the runs folder is written or deleted through a symbolic link: a linked table or
manifests folder is refused in one line, and a linked partition is unlinked, never descended.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
from pathlib import Path

from rag_bench.errors import RagBenchError
from rag_bench.io.durable import atomic_write, fsync, fsync_tree, symlink_below
from rag_bench.io.jsonl import finite
from rag_bench.io.pause import pause_point
from rag_bench.runs.catalog import is_stored
from rag_bench.runs.folder import RunsFolder, note_bookkeeping
from rag_bench.runs.ids import Locks
from rag_bench.runs.layout import (
    MANIFESTS,
    PART,
    REMOVING,
    REPEAT,
    REPEATED,
    STAGING,
    TABLES,
    RunLocation,
    file_schema,
    manifest_parts,
    partition,
)


class WriteError(RagBenchError):
    """A file of the runs folder could not be written; ``errno`` says why (ENOSPC: disk full)."""

    def __init__(self, message: str, hint: str, errno_: int | None):
        super().__init__(message, hint)
        self.errno = errno_

    @property
    def disk_full(self) -> bool:
        return self.errno in (errno.ENOSPC, errno.EDQUOT)


def write_error(what: str, where: object, exc: OSError) -> WriteError:
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    hint = "free disk space or pass another --runs-dir" if full else "pass a writable --runs-dir"
    return WriteError(f"{what} {where}: {exc.strerror or exc}", hint, exc.errno)


def ensure_folder(runs: RunsFolder) -> None:
    """Create the (local part of the) runs folder; check a remote folder's bucket."""
    try:
        runs.bookkeeping.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error("cannot create the runs folder", runs.bookkeeping, exc) from None
    runs.check()
    note_bookkeeping(runs)


def _is_new(root: Path) -> bool:
    """Whether a local runs folder holds neither manifests nor tables yet."""
    return not any(os.path.lexists(root / name) for name in (MANIFESTS, *TABLES))


def write_run(runs: RunsFolder, locks: Locks, run_id: str, manifest: dict, tables) -> RunLocation:
    """Store a complete run (``tables``: name -> DataFrame) and release the run id's lock.

    The tables are staged and synced, placed, and the manifest is written last, atomically: a
    reader sees the whole run or nothing. On failure (a full disk, a read-only folder, a
    refusing object store) nothing is left behind and the error names the cause.
    """
    variant = str(manifest["variant"])
    run = RunLocation(runs, run_id, variant)
    staging = runs.bookkeeping / f"{STAGING}{run_id}-{secrets.token_hex(4)}"
    placed = False
    try:
        ensure_folder(runs)
        locks.acquire(run_id)
        if is_stored(runs, run_id):
            raise RagBenchError(f"run {run_id} already exists in {runs}", "use a new run id")
        os.mkdir(staging)  # unlike mkdtemp, honours the umask: others may read the run
        _stage_tables(staging, run, tables)
        pause_point("write")
        if runs.local is not None and _is_new(runs.local):  # the clean-up judges partitions
            _make_folders(runs.local, runs.local / MANIFESTS)  # only beside a manifests folder
        placed = True
        _place_tables(staging, run)
        pause_point("commit")
        text = json.dumps(finite(manifest), indent=2, ensure_ascii=False, default=str) + "\n"
        _commit(runs, run_id, text.encode("utf-8"))
        placed = False
    except OSError as exc:
        raise write_error(f"could not write run {run_id} to", runs, exc) from None
    finally:
        if placed:  # failed between placing the tables and committing: take them back
            with contextlib.suppress(OSError, RagBenchError):
                for table in TABLES:
                    delete_partition(runs, partition(table, variant, run_id))
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        locks.release(run_id)
    return run


def _stage_tables(staging: Path, run: RunLocation, tables) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in TABLES:
        schema = file_schema(name)
        frame = tables.get(name, pd.DataFrame(columns=schema.names))
        if name in REPEATED and REPEAT not in frame:  # tables made before repeats: repeat 0
            frame = frame.assign(**{REPEAT: 0})
        table = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
        target = staging.joinpath(*run.table_parts(name))
        target.parent.mkdir(parents=True)
        pq.write_table(table, str(target))
    fsync_tree(staging)


def _place_tables(staging: Path, run: RunLocation) -> None:
    """Move (or upload) the staged partitions to their places; not yet visible to rag-bench."""
    runs, variant = run.runs, run.variant
    assert variant is not None  # a run being written knows its variant
    for table in TABLES:
        parts = partition(table, variant, run.run_id)
        source = staging.joinpath(*parts)
        if runs.local is None:
            runs.upload(source / PART, *parts, PART)
            continue
        target = runs.local.joinpath(*parts)
        _refuse_links(runs.local, target)
        _make_folders(runs.local, target.parent)
        if target.exists():  # left by an earlier, uncommitted attempt at this run id
            shutil.rmtree(target)
        os.rename(source, target)
        fsync(target.parent)


def _make_folders(root: Path, folder: Path) -> None:
    """``mkdir -p`` below ``root``, each new folder's entry synced to disk; refused when the
    way down (``folder`` included) goes through a symbolic link."""
    _refuse_links(root, folder)
    missing = []
    while folder != root and not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(created)
        fsync(created.parent)


def _refuse_links(root: Path, path: Path) -> None:
    link = symlink_below(root, path)
    if link is not None:
        raise RagBenchError(
            f"{link} is a symbolic link: rag-bench writes nothing through one",
            f"move it out of the runs folder {root}",
        )


def _commit(runs: RunsFolder, run_id: str, manifest: bytes) -> None:
    """Write the manifest: from now on the run exists."""
    if runs.local is None:
        runs.put(manifest, *manifest_parts(run_id))
        return
    folder = runs.local / MANIFESTS
    _make_folders(runs.local, folder)
    atomic_write(folder / f"{run_id}.json", manifest)
    fsync(folder)


def remove_run(run: RunLocation | Path, found: list[tuple[str, ...]]) -> None:
    """Delete a run: its manifest first (un-committing it), then its partitions ``found``, with
    a ``.rm-<run_id>-`` marker meanwhile that lets the clean-up finish the job. A folder of the
    first layout is hidden by one rename, then removed."""
    if isinstance(run, Path):
        hidden = run.parent / f"{REMOVING}{run.name}-{secrets.token_hex(2)}"
        os.rename(run, hidden)
        shutil.rmtree(hidden, ignore_errors=True)
        return
    runs = run.runs
    marker = runs.bookkeeping / f"{REMOVING}{run.run_id}-{secrets.token_hex(2)}"
    marker.mkdir(parents=True)  # the clean-up's proof, should this stop halfway
    if runs.local is not None:
        (runs.local.joinpath(*manifest_parts(run.run_id))).unlink(missing_ok=True)
        fsync(runs.local / MANIFESTS)
    else:
        runs.delete_file(*manifest_parts(run.run_id))
    for parts in found:
        delete_partition(runs, parts)
    marker.rmdir()


def delete_partition(runs: RunsFolder, parts: tuple[str, ...]) -> None:
    """Delete one partition folder; locally never through a symbolic link (a linked
    partition loses its link, the folder it points to stays)."""
    if runs.local is not None:
        path = runs.local.joinpath(*parts)
        link = runs.symlink(*parts)
        if link == path:
            path.unlink(missing_ok=True)
        elif link is None:
            shutil.rmtree(path, ignore_errors=True)
    else:
        runs.delete_dir(*parts)
