"""The run store: hive-partitioned Parquet per trace table, and one manifest per run.

A runs folder (a local path or an object-store URL, see :mod:`rag_bench.runs.folder`) holds::

    queries/variant=<variant>/run_id=<run_id>/part-0.parquet     one root per trace table,
    metrics/variant=<variant>/run_id=<run_id>/part-0.parquet     partitioned the way DuckDB,
    retrieved/variant=<variant>/run_id=<run_id>/part-0.parquet   Spark and Trino read in place
    claims/variant=<variant>/run_id=<run_id>/part-0.parquet
    _manifests/<run_id>.json                                     the run's manifest: its commit

The partition columns (``variant``, ``run_id``) live in the paths only, not in the files (Spark
and Trino take them from the path; :func:`read_table` and the DuckDB views put them back).
Values in paths are escaped as Hive does (``%2F`` for ``/``).

A run is committed by its manifest: the tables are written and synced in a hidden staging
folder, moved (or, remotely, uploaded) into place, and the manifest is written last, atomically.
rag-bench lists a run only when its manifest exists, so a crash, Ctrl-C, ``kill -9`` or a full
disk never leaves a visible partial run; deleting a run removes its manifest first. Partitions
without a manifest (left by a process that died while committing) are removed by
:func:`clean_stale` once they are older than a minute and their run id is not locked.

Runs of the first layout (``runs/<run_id>/{manifest.json,*.parquet}``, schema version 1) are not
read; they are reported by name with the fix, ``rag-bench runs --upgrade``, which rewrites them
into this layout (:mod:`rag_bench.runs.upgrade`).

Next to the tables, a local runs folder holds hidden bookkeeping that every reader ignores (for
a remote folder it lives in a local folder under the cache directory, keyed by the URL):

- ``.<run_id>.lock`` claims a run id for one process, which holds an exclusive ``flock`` on it
  while it lives; a lock nobody holds belongs to a process that ended (even by ``kill -9``).
- ``.tmp-<run_id>-<random>/`` is a run being written.
- ``.partial-<run_id>/`` is the checkpoint of a run in progress (:class:`Checkpoint`), which
  ``rag-bench run --resume <run_id>`` continues after an interruption.
- ``.rm-<run_id>-<random>/`` is a run of the first layout being deleted.

When a run starts, :func:`clean_stale` removes what dead processes left behind; checkpoints
that hold answered queries stay until they are resumed (or deleted by hand).

Testing aid: ``RAG_BENCH_TEST_PAUSE=<stage>:<seconds>`` (stage ``index``, ``answer``, ``write``
(tables staged, nothing in place) or ``commit`` (tables in place, manifest not yet written))
makes a run print ``rag-bench: paused at <stage>`` on stderr and sleep there once, so tests can
interrupt it at a known point; see :func:`rag_bench.io.pause.pause_point`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pandas as pd

from rag_bench.errors import RagBenchError
from rag_bench.io.durable import fsync, fsync_tree
from rag_bench.io.pause import pause_point
from rag_bench.runs.folder import RunsFolder, bookkept_folder, note_bookkeeping, runs_folder

SCHEMA_VERSION = 2  # 2: hive-partitioned tables without run_id inside, _manifests/<run_id>.json
MANIFEST = "manifest.json"
CHECKPOINT = "checkpoint.json"
PROGRESS = "progress.json"
PARTIAL = ".partial-"
STALE_AFTER_S = 60.0  # hidden leftovers younger than this are never judged stale
# an upload to an object store can take long, and its writer's lock is on another machine
REMOTE_STALE_AFTER_S = 24 * 3600.0
MANIFESTS = "_manifests"
PART = "part-0.parquet"
PARTITION_KEYS = ("variant", "run_id")


def default_runs_dir() -> RunsFolder:
    """``$RAG_BENCH_RUNS_DIR`` (a path or URL), else ``runs/`` under the working directory."""
    return runs_folder(None)


def _schemas():
    import pyarrow as pa

    latency = [
        (f"latency_ms_{s}", pa.float64())
        for s in ("retrieve", "fusion", "rerank", "generate", "judge", "total")
    ]
    return {
        "queries": pa.schema(
            [
                ("run_id", pa.string()),
                ("query_id", pa.string()),
                ("category", pa.string()),
                ("tags", pa.list_(pa.string())),
                ("should_refuse", pa.bool_()),
                ("query", pa.string()),
                ("answer", pa.string()),
                ("refused", pa.bool_()),
                ("failure_class", pa.string()),
                ("failure_stage", pa.string()),
                ("failure_fix", pa.string()),
                ("n_relevant", pa.int64()),
                *latency,
            ]
        ),
        "metrics": pa.schema(
            [
                ("run_id", pa.string()),
                ("query_id", pa.string()),
                ("category", pa.string()),
                ("metric", pa.string()),
                ("value", pa.float64()),
                ("status", pa.string()),
            ]
        ),
        "retrieved": pa.schema(
            [
                ("run_id", pa.string()),
                ("query_id", pa.string()),
                ("stage", pa.string()),
                ("rank", pa.int32()),
                ("chunk_id", pa.string()),
                ("doc_id", pa.string()),
                ("score", pa.float64()),
                ("relevance", pa.int32()),
            ]
        ),
        "claims": pa.schema(
            [
                ("run_id", pa.string()),
                ("query_id", pa.string()),
                ("claim_id", pa.int32()),
                ("text", pa.string()),
                ("citations", pa.list_(pa.string())),
                ("supported", pa.bool_()),
                ("support_grade", pa.int32()),
                ("supported_by", pa.list_(pa.string())),
                ("judge", pa.string()),
                ("reason", pa.string()),
            ]
        ),
    }


TABLES = ("queries", "metrics", "retrieved", "claims")


def file_schema(table: str):
    """The columns a table's Parquet file holds: its schema without the partition columns."""
    schema = _schemas()[table]
    return schema.remove(schema.get_field_index("run_id"))


def view_schema(table: str):
    """The columns a reader sees: run_id and variant (from the path), then the file's."""
    import pyarrow as pa

    keys = [pa.field("run_id", pa.string()), pa.field("variant", pa.string())]
    return pa.schema([*keys, *file_schema(table)])


# --- the layout ---------------------------------------------------------------------------------

_UNSAFE = re.compile(r"[\x00-\x1f\"#%'*/:=?\\\x7f{}\[\]^]")  # what Hive escapes in a path


def hive_value(value: str) -> str:
    """A partition value as a path segment, escaped the way Hive and Spark escape it."""
    return _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", value)


def partition(table: str, variant: str, run_id: str) -> tuple[str, str, str]:
    """The path parts of one run's partition folder of ``table``."""
    return (table, f"variant={hive_value(variant)}", f"run_id={hive_value(run_id)}")


def manifest_parts(run_id: str) -> tuple[str, str]:
    return (MANIFESTS, f"{run_id}.json")


@dataclass(frozen=True)
class RunLocation:
    """Where one run's files are: its manifest, and one partition per trace table. ``variant``
    is None for a run whose manifest cannot say (a broken run, which can still be removed)."""

    runs: RunsFolder
    run_id: str
    variant: str | None

    @property
    def name(self) -> str:
        return self.run_id

    def table_parts(self, table: str) -> tuple[str, ...]:
        if self.variant is None:
            raise RagBenchError(f"run {self.run_id} has no readable manifest", "remove the run")
        return (*partition(table, self.variant, self.run_id), PART)

    def table_file(self, table: str) -> str:
        """The table's Parquet file as a path inside ``runs.fs`` (a local path when local)."""
        return self.runs.path(*self.table_parts(table))

    def __str__(self) -> str:
        return str(self.runs)


# --- writing files safely ---------------------------------------------------------------------


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` so that it either keeps its old content or has all of ``data``."""
    staging = path.with_name(f".~{path.name}-{secrets.token_hex(4)}")
    try:
        with open(staging, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, path)
    finally:
        if staging.exists():
            staging.unlink()


class WriteError(RagBenchError):
    """A file of the runs folder could not be written; ``errno`` says why (ENOSPC: disk full)."""

    def __init__(self, message: str, hint: str, errno_: int | None):
        super().__init__(message, hint)
        self.errno = errno_

    @property
    def disk_full(self) -> bool:
        return self.errno in (errno.ENOSPC, errno.EDQUOT)


def _write_error(what: str, where: Path, exc: OSError) -> WriteError:
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    hint = "free disk space or pass another --runs-dir" if full else "pass a writable --runs-dir"
    return WriteError(f"{what} {where}: {exc.strerror or exc}", hint, exc.errno)


# --- run ids and their locks ------------------------------------------------------------------

_held: dict[Path, int] = {}  # lock files this process holds -> the descriptor holding the flock


def _bookkeeping(runs_dir: str | Path | RunsFolder) -> Path:
    """The local folder of a runs folder's locks and checkpoints."""
    return runs_folder(runs_dir).bookkeeping


def _lock_path(runs_dir: Path, run_id: str) -> Path:
    return Path(os.path.abspath(runs_dir)) / f".{run_id}.lock"  # one key per file in _held


def _flock(fd: int) -> bool:
    """Take the exclusive lock without waiting; True when taken (always, without flock)."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the lock file's existence is the lock
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _can_judge_staleness() -> bool:
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return True


def _open_new_lock(path: Path) -> int:
    """Create the lock file (FileExistsError if it exists), lock it and note the holder."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    try:
        _flock(fd)
        os.write(fd, f"{os.getpid()}\n".encode())  # for people looking: who holds it
    except OSError:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    _held[path] = fd
    return fd


def new_run_id(variant: str, created: datetime) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", variant).strip("-") or "run"
    return f"{created:%Y%m%d-%H%M%S}-{slug}-{secrets.token_hex(2)}"


def _ensure_folder(runs: RunsFolder) -> None:
    """Create the (local part of the) runs folder; check a remote folder's bucket."""
    try:
        runs.bookkeeping.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _write_error("cannot create the runs folder", runs.bookkeeping, exc) from None
    runs.check()
    note_bookkeeping(runs)


def reserve_run_id(runs_dir: str | Path | RunsFolder, variant: str, created: datetime) -> str:
    """A run id no other process holds, claimed by creating its lock file exclusively and held
    until :func:`release_run_id` (or the end of the process). Cleans stale leftovers first."""
    runs = runs_folder(runs_dir)
    local = runs.bookkeeping
    _ensure_folder(runs)
    clean_stale(runs)
    for _ in range(100):
        run_id = new_run_id(variant, created)
        try:
            _open_new_lock(_lock_path(local, run_id))
        except FileExistsError:
            continue
        except OSError as exc:
            raise _write_error("cannot write to the runs folder", runs, exc) from None
        if not is_stored(runs, run_id) and not (local / f"{PARTIAL}{run_id}").exists():
            return run_id
        release_run_id(runs, run_id)
    raise RagBenchError(f"could not find a free run id in {runs}", "retry in a second")


def acquire_run_id(runs_dir: str | Path | RunsFolder, run_id: str) -> None:
    """Hold the lock of an existing run id (to resume it): take over a lock nobody holds, or
    fail when a live process holds it."""
    local = _bookkeeping(runs_dir)
    path = _lock_path(local, run_id)
    if path in _held:
        return
    for _ in range(10):
        try:
            _open_new_lock(path)
            return
        except FileExistsError:
            pass
        except OSError as exc:
            raise _write_error("cannot write to the runs folder", runs_dir, exc) from None
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue  # released meanwhile: create it
        except OSError as exc:
            raise _write_error("cannot write to the runs folder", runs_dir, exc) from None
        if not _can_judge_staleness() or not _flock(fd):
            os.close(fd)
            raise RagBenchError(
                f"run {run_id} is in use by another rag-bench process",
                f"wait for it to end; if no process uses it, delete {path}",
            )
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            _held[path] = fd
            return
        os.close(fd)  # replaced meanwhile: try again
    raise RagBenchError(f"could not lock run {run_id} in {runs_dir}", "retry in a second")


def release_run_id(runs_dir: str | Path | RunsFolder, run_id: str) -> None:
    """Give up the lock of ``run_id`` (the lock file goes first, then the flock)."""
    path = _lock_path(_bookkeeping(runs_dir), run_id)
    fd = _held.pop(path, None)
    if fd is None:
        return
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(fd)


def _lock_is_held(local: Path, run_id: str) -> bool:
    """Whether a live process (this one included) holds the lock of ``run_id``."""
    path = _lock_path(local, run_id)
    if path in _held:
        return True
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: assume it is in use
    try:
        if not _can_judge_staleness():
            return True
        return not _flock(fd)
    finally:
        os.close(fd)


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def clean_stale(runs_dir: str | Path | RunsFolder) -> list[str]:
    """Remove what ended processes left in a runs folder; returns the names removed.

    Staging and deletion folders of dead processes go, as do locks nobody holds, checkpoints
    without any answered query (or of a run that was stored after all), and table partitions
    of a run that was never committed (no manifest, no live lock). Checkpoints holding answers
    stay: they are resumable work. Anything younger than a minute is left alone.
    """
    runs = runs_folder(runs_dir)
    return _clean_bookkeeping(runs) + _clean_uncommitted(runs)


def _clean_bookkeeping(runs: RunsFolder) -> list[str]:
    removed: list[str] = []
    local = runs.bookkeeping
    if not local.is_dir():
        return removed
    try:
        entries = list(local.iterdir())
        if runs.local is not None and (local / MANIFESTS).is_dir():
            entries += [p for p in (local / MANIFESTS).iterdir() if p.name.startswith(".~")]
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.startswith(".") or _age(entry) < STALE_AFTER_S:
            continue
        stale = False
        if name.startswith(".rm-") and entry.is_dir():
            stale = True
        elif name.startswith(".tmp-") and entry.is_dir():
            run_id = name[len(".tmp-") :].rpartition("-")[0]
            stale = not _lock_is_held(local, run_id)
        elif name.startswith(PARTIAL) and entry.is_dir():
            run_id = name[len(PARTIAL) :]
            stale = not _lock_is_held(local, run_id) and (
                not any(entry.glob("answers-*.jsonl")) or is_stored(runs, run_id)
            )
        elif name.endswith(".lock") and entry.is_file() and _can_judge_staleness():
            run_id = name[1 : -len(".lock")]
            path = _lock_path(local, run_id)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                if _flock(fd):  # nobody holds it: remove it while holding it ourselves
                    path.unlink(missing_ok=True)
                    removed.append(name)
            finally:
                os.close(fd)
            continue
        elif name.startswith(".~") and entry.is_file():
            stale = True  # an atomic write that never finished
        if stale:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(name)
    return removed


def partitions(runs: RunsFolder) -> dict[str, list[tuple[str, ...]]]:
    """Every table partition in the folder, committed or not: run id -> partition path parts."""
    found: dict[str, list[tuple[str, ...]]] = {}
    for table in TABLES:
        for variant in runs.list(table):
            if not variant.is_dir or not variant.name.startswith("variant="):
                continue
            for run in runs.list(table, variant.name):
                if run.is_dir and run.name.startswith("run_id="):
                    run_id = unquote(run.name[len("run_id=") :])
                    found.setdefault(run_id, []).append((table, variant.name, run.name))
    return found


def _partition_age(runs: RunsFolder, parts: tuple[str, ...]) -> float:
    """Seconds since the partition last changed (0 when the store cannot tell)."""
    if runs.local is not None:
        return _age(runs.local.joinpath(*parts))
    times = [e.mtime for e in runs.list(*parts, recursive=True) if e.mtime is not None]
    return time.time() - max(times) if times else 0.0


def _clean_uncommitted(runs: RunsFolder) -> list[str]:
    """Remove partitions whose run has no manifest, no live lock, and has not changed for a
    while: the leftovers of a process that died between moving tables in and committing."""
    removed: list[str] = []
    if runs.local is not None and not runs.local.is_dir():
        return removed
    committed = set(committed_ids(runs))
    threshold = STALE_AFTER_S if runs.local is not None else REMOTE_STALE_AFTER_S
    for run_id, found in partitions(runs).items():
        if run_id in committed or _lock_is_held(runs.bookkeeping, run_id):
            continue
        old = [parts for parts in found if _partition_age(runs, parts) >= threshold]
        if not old or is_stored(runs, run_id):  # committed meanwhile: keep
            continue
        for parts in old:
            _delete_partition(runs, parts)
            removed.append("/".join(parts))
    return removed


def _delete_partition(runs: RunsFolder, parts: tuple[str, ...]) -> None:
    if runs.local is not None:
        shutil.rmtree(runs.local.joinpath(*parts), ignore_errors=True)
    else:
        runs.delete_dir(*parts)


# --- reading what is stored ---------------------------------------------------------------------


def committed_ids(runs_dir: str | Path | RunsFolder) -> list[str]:
    """The ids of every committed run (one with a manifest), oldest first."""
    runs = runs_folder(runs_dir)
    return sorted(
        e.name[: -len(".json")]
        for e in runs.list(MANIFESTS)
        if not e.is_dir and e.name.endswith(".json") and not e.name.startswith((".", "_"))
    )


def is_stored(runs_dir: str | Path | RunsFolder, run_id: str) -> bool:
    """Whether ``run_id`` is committed (its manifest exists)."""
    return runs_folder(runs_dir).exists(*manifest_parts(run_id))


def legacy_runs(runs_dir: str | Path | RunsFolder) -> dict[str, Path]:
    """Runs stored in the first layout (``runs/<run_id>/manifest.json``): id -> folder."""
    runs = runs_folder(runs_dir)
    if runs.local is None or not runs.local.is_dir():
        return {}
    return {
        p.name: p
        for p in sorted(runs.local.iterdir())
        if p.is_dir()
        and not p.name.startswith((".", "_"))
        and p.name not in TABLES
        and (p / MANIFEST).is_file()
    }


def read_manifest(where: RunLocation | Path) -> dict:
    """The manifest of a run (or of a folder of the first layout), checked to be readable."""
    if isinstance(where, RunLocation):
        name, shown = where.run_id, where.runs.url(*manifest_parts(where.run_id))
        reading = partial(where.runs.read_bytes, *manifest_parts(where.run_id))
    else:
        name, shown = where.name, str(where / MANIFEST)
        reading = (where / MANIFEST).read_bytes
    try:
        manifest = json.loads(reading().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise RagBenchError(
            f"run {name} has an unreadable manifest ({exc})",
            f"check {shown} or remove the run",
        ) from None
    if not isinstance(manifest, dict):
        raise RagBenchError(
            f"run {name} has an unreadable manifest (not a JSON object)",
            f"check {shown} or remove the run",
        )
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise RagBenchError(
            f"run {name} uses trace schema version {version}, "
            f"newer than this rag-bench reads ({SCHEMA_VERSION})",
            "upgrade rag-bench",
        )
    return manifest


def locate(runs_dir: str | Path | RunsFolder, run_id: str) -> RunLocation:
    """Where the committed run ``run_id`` is (its manifest names the variant)."""
    runs = runs_folder(runs_dir)
    manifest = read_manifest(RunLocation(runs, run_id, None))
    return RunLocation(runs, run_id, str(manifest.get("variant")))


def read_table(run: RunLocation, table: str) -> pd.DataFrame:
    """One trace table of one run as pandas, with its ``run_id`` column first (as written)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with run.runs.errors("cannot read"):
        data = pq.read_table(run.table_file(table), filesystem=run.runs.fs, partitioning=None)
    ids = pa.array([run.run_id] * data.num_rows, pa.string())
    return data.add_column(0, "run_id", ids).to_pandas()


# --- writing a run ----------------------------------------------------------------------------


def write_run(
    runs_dir: str | Path | RunsFolder, run_id: str, manifest: dict, tables: dict[str, pd.DataFrame]
) -> RunLocation:
    """Store a complete run and release the run id's lock; returns where it is.

    The tables are written to a hidden staging folder and synced, moved (remotely: uploaded)
    into their partitions, and the manifest is written last, atomically: a reader sees the
    whole run or nothing. On failure (a full disk, a read-only folder, a refusing object store)
    nothing is left behind and the error names the cause.
    """
    runs = runs_folder(runs_dir)
    run = RunLocation(runs, run_id, str(manifest["variant"]))
    staging = runs.bookkeeping / f".tmp-{run_id}-{secrets.token_hex(4)}"
    placed = False
    try:
        _ensure_folder(runs)
        acquire_run_id(runs, run_id)
        if is_stored(runs, run_id):
            raise RagBenchError(f"run {run_id} already exists in {runs}", "use a new run id")
        os.mkdir(staging)  # unlike mkdtemp, honours the umask: others may read the run
        _stage_tables(staging, run, tables)
        pause_point("write")
        placed = True
        _place_tables(staging, run)
        pause_point("commit")
        text = json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n"
        _commit(runs, run_id, text.encode("utf-8"))
        placed = False
    except OSError as exc:
        raise _write_error(f"could not write run {run_id} to", runs, exc) from None
    finally:
        if placed:  # failed between placing the tables and committing: take them back
            with contextlib.suppress(OSError, RagBenchError):
                for table in TABLES:
                    _delete_partition(runs, partition(table, run.variant, run_id))
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        release_run_id(runs, run_id)
    return run


def _stage_tables(staging: Path, run: RunLocation, tables: dict[str, pd.DataFrame]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in TABLES:
        schema = file_schema(name)
        frame = tables.get(name, pd.DataFrame(columns=schema.names))
        table = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
        target = staging.joinpath(*run.table_parts(name))
        target.parent.mkdir(parents=True)
        pq.write_table(table, str(target))
    fsync_tree(staging)


def _place_tables(staging: Path, run: RunLocation) -> None:
    """Move (or upload) the staged partitions to their places; not yet visible to rag-bench."""
    runs = run.runs
    for table in TABLES:
        parts = partition(table, run.variant, run.run_id)
        source = staging.joinpath(*parts)
        if runs.local is None:
            runs.upload(source / PART, *parts, PART)
            continue
        target = runs.local.joinpath(*parts)
        _make_folders(runs.local, target.parent)
        if target.exists():  # left by an earlier, uncommitted attempt at this run id
            shutil.rmtree(target)
        os.rename(source, target)
        fsync(target.parent)


def _make_folders(root: Path, folder: Path) -> None:
    """``mkdir -p`` below ``root``, each new folder's entry synced to disk."""
    missing = []
    while folder != root and not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(created)
        fsync(created.parent)


def _commit(runs: RunsFolder, run_id: str, manifest: bytes) -> None:
    """Write the manifest: from now on the run exists."""
    if runs.local is None:
        runs.put(manifest, *manifest_parts(run_id))
        return
    folder = runs.local / MANIFESTS
    _make_folders(runs.local, folder)
    atomic_write(folder / f"{run_id}.json", manifest)
    fsync(folder)


def remove_run(run: RunLocation | Path) -> None:
    """Delete a run: its manifest first (un-committing it), then its partitions. A folder of
    the first layout is hidden by one rename, then removed."""
    if isinstance(run, Path):
        hidden = run.parent / f".rm-{run.name}-{secrets.token_hex(2)}"
        os.rename(run, hidden)
        shutil.rmtree(hidden, ignore_errors=True)
        return
    runs = run.runs
    if runs.local is not None:
        (runs.local.joinpath(*manifest_parts(run.run_id))).unlink(missing_ok=True)
        fsync(runs.local / MANIFESTS)
    else:
        runs.delete_file(*manifest_parts(run.run_id))
    for parts in partitions(runs).get(run.run_id, []):
        _delete_partition(runs, parts)


# --- checkpoints ------------------------------------------------------------------------------


class Checkpoint:
    """The answered queries of a run in progress, in ``runs/.partial-<run_id>/`` (for a remote
    runs folder: in its local bookkeeping folder).

    ``checkpoint.json`` says what the run is (variant, resolved parameters, dataset hash,
    selection, cutoffs); each block of answered queries is appended as a new JSONL file
    ``answers-<n>.jsonl``, written atomically, so a block is there whole or not at all;
    ``progress.json`` carries the time spent and the components' usage so far. Entries are
    keyed by query id and by a hash of what the answer was computed from, so an entry whose
    inputs changed is not reused.
    """

    def __init__(self, folder: Path, header: dict[str, Any], runs: RunsFolder | None = None):
        self.folder = folder
        self.runs = runs if runs is not None else bookkept_folder(folder.parent)
        self.header = header
        self.entries: dict[str, dict] = {}
        self.progress: dict[str, Any] = {}
        self.blocks = 0

    @property
    def run_id(self) -> str:
        return self.header["run_id"]

    @property
    def runs_dir(self) -> RunsFolder:
        """The runs folder the run will be stored in."""
        return self.runs

    def __len__(self) -> int:
        return len(self.entries)

    def _fail(self, exc: OSError) -> WriteError:
        return _write_error(f"could not checkpoint run {self.run_id} in", self.runs_dir, exc)

    @classmethod
    def create(
        cls, runs_dir: str | Path | RunsFolder, run_id: str, header: dict[str, Any]
    ) -> Checkpoint:
        runs = runs_folder(runs_dir)
        folder = runs.bookkeeping / f"{PARTIAL}{run_id}"
        checkpoint = cls(folder, {**header, "run_id": run_id}, runs)
        try:
            checkpoint.folder.mkdir(exist_ok=False)
            data = json.dumps(checkpoint.header, indent=1, ensure_ascii=False, default=str)
            atomic_write(checkpoint.folder / CHECKPOINT, data.encode())
        except OSError as exc:
            shutil.rmtree(checkpoint.folder, ignore_errors=True)
            raise checkpoint._fail(exc) from None
        return checkpoint

    @classmethod
    def open(cls, folder: Path) -> Checkpoint:
        """Read a checkpoint folder; unreadable answer files are skipped (recomputed)."""
        try:
            header = json.loads((folder / CHECKPOINT).read_text(encoding="utf-8"))
            if not isinstance(header, dict) or "run_id" not in header:
                raise ValueError("no run_id")
        except (OSError, ValueError) as exc:
            raise RagBenchError(
                f"the checkpoint {folder} is unreadable ({exc})",
                "start the run again without --resume",
            ) from None
        checkpoint = cls(folder, header)
        for path in sorted(folder.glob("answers-*.jsonl")):
            checkpoint.blocks += 1
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
                records = [json.loads(line) for line in lines if line.strip()]
            except (OSError, ValueError):
                continue
            for record in records:
                if isinstance(record, dict) and isinstance(record.get("query_id"), str):
                    checkpoint.entries[record["query_id"]] = record
        try:
            progress = json.loads((folder / PROGRESS).read_text(encoding="utf-8"))
            checkpoint.progress = progress if isinstance(progress, dict) else {}
        except (OSError, ValueError):
            checkpoint.progress = {}
        return checkpoint

    @classmethod
    def find(cls, runs_dir: str | Path | RunsFolder, ref: str) -> Checkpoint:
        """The checkpoint of an interrupted run by id, unique id prefix, or folder path."""
        given = Path(ref)
        if (given / CHECKPOINT).is_file():
            return cls.open(given)
        runs = runs_folder(runs_dir)
        local = runs.bookkeeping
        partials = {}
        if local.is_dir():
            partials = {
                p.name[len(PARTIAL) :]: p
                for p in local.iterdir()
                if p.name.startswith(PARTIAL) and (p / CHECKPOINT).is_file()
            }
        matching = [r for r in partials if r == ref] or [r for r in partials if r.startswith(ref)]
        if len(matching) == 1:
            checkpoint = cls.open(partials[matching[0]])
            checkpoint.runs = runs
            return checkpoint
        if len(matching) > 1:
            raise RagBenchError(
                f"run id prefix {ref!r} matches several interrupted runs: "
                + ", ".join(sorted(matching)[:10]),
                "give more of the id",
            )
        stored = [r for r in committed_ids(runs) if r == ref or r.startswith(ref)]
        if stored:
            raise RagBenchError(
                f"run {stored[0]} is complete: there is nothing to resume",
                f"see it with `rag-bench show {stored[0]}`",
            )
        resumable = ", ".join(sorted(partials)) or "none"
        raise RagBenchError(
            f"no interrupted run {ref!r} in {runs}",
            f"interrupted runs there: {resumable}; pass --runs-dir if it is elsewhere",
        )

    def lookup(self, query_id: str, key: str) -> dict | None:
        entry = self.entries.get(query_id)
        return entry if entry is not None and entry.get("key") == key else None

    def save(self, records: list[dict], progress: dict[str, Any]) -> None:
        """Append one block of answered queries (atomically), then the progress so far."""
        try:
            if records:
                self.blocks += 1
                lines = "".join(
                    json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records
                )
                atomic_write(self.folder / f"answers-{self.blocks:06d}.jsonl", lines.encode())
            data = json.dumps(progress, ensure_ascii=False, default=str)
            atomic_write(self.folder / PROGRESS, data.encode())
        except OSError as exc:
            raise self._fail(exc) from None
        for record in records:
            self.entries[record["query_id"]] = record
        self.progress = progress

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
