"""The run store: ``runs/<run_id>/`` with a manifest and one Parquet file per trace table.

A run is written into a hidden temporary folder and renamed into place only when complete
(files synced to disk first), so a crash, Ctrl-C, ``kill -9`` or a full disk never leaves a
visible partial run. Run ids sort by time and read well: ``20261129-195012-hybrid_rerank-3f2a``.

Next to the run folders, a runs folder holds hidden bookkeeping that every reader ignores:

- ``.<run_id>.lock`` claims a run id for one process, which holds an exclusive ``flock`` on it
  while it lives; a lock nobody holds belongs to a process that ended (even by ``kill -9``).
- ``.tmp-<run_id>-<random>/`` is a run being written.
- ``.partial-<run_id>/`` is the checkpoint of a run in progress (:class:`Checkpoint`), which
  ``rag-bench run --resume <run_id>`` continues after an interruption.
- ``.rm-<run_id>-<random>/`` is a run being deleted.

When a run starts, :func:`clean_stale` removes what dead processes left behind; checkpoints
that hold answered queries stay until they are resumed (or deleted by hand).

Testing aid: ``RAG_BENCH_TEST_PAUSE=<stage>:<seconds>`` (stage ``index``, ``answer`` or
``write``) makes a run print ``rag-bench: paused at <stage>`` on stderr and sleep there once,
so tests can interrupt it at a known point; see :func:`pause_point`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from rag_bench.durable import fsync
from rag_bench.errors import RagBenchError

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
CHECKPOINT = "checkpoint.json"
PROGRESS = "progress.json"
PARTIAL = ".partial-"
PAUSE_ENV = "RAG_BENCH_TEST_PAUSE"
STALE_AFTER_S = 60.0  # hidden leftovers younger than this are never judged stale


def default_runs_dir() -> Path:
    return Path(os.environ.get("RAG_BENCH_RUNS_DIR", Path.cwd() / "runs"))


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


_paused: set[str] = set()


def pause_point(stage: str) -> None:
    """Testing aid, the only reader of ``RAG_BENCH_TEST_PAUSE=<stage>:<seconds>``: at the named
    stage, announce it on stderr and sleep, once per process. Unset, it does nothing."""
    wanted = os.environ.get(PAUSE_ENV)
    if not wanted or stage in _paused:
        return
    name, _, seconds = wanted.partition(":")
    if name == stage:
        _paused.add(stage)
        print(f"rag-bench: paused at {stage}", file=sys.stderr, flush=True)
        time.sleep(float(seconds or 5))


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


def _ensure_folder(runs_dir: Path) -> None:
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _write_error("cannot create the runs folder", runs_dir, exc) from None


def reserve_run_id(runs_dir: Path, variant: str, created: datetime) -> str:
    """A run id no other process holds, claimed by creating its lock file exclusively and held
    until :func:`release_run_id` (or the end of the process). Cleans stale leftovers first."""
    _ensure_folder(runs_dir)
    clean_stale(runs_dir)
    for _ in range(100):
        run_id = new_run_id(variant, created)
        try:
            _open_new_lock(_lock_path(runs_dir, run_id))
        except FileExistsError:
            continue
        except OSError as exc:
            raise _write_error("cannot write to the runs folder", runs_dir, exc) from None
        if not (runs_dir / run_id).exists() and not (runs_dir / f"{PARTIAL}{run_id}").exists():
            return run_id
        release_run_id(runs_dir, run_id)
    raise RagBenchError(f"could not find a free run id in {runs_dir}", "retry in a second")


def acquire_run_id(runs_dir: Path, run_id: str) -> None:
    """Hold the lock of an existing run id (to resume it): take over a lock nobody holds, or
    fail when a live process holds it."""
    path = _lock_path(runs_dir, run_id)
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


def release_run_id(runs_dir: Path, run_id: str) -> None:
    """Give up the lock of ``run_id`` (the lock file goes first, then the flock)."""
    path = _lock_path(runs_dir, run_id)
    fd = _held.pop(path, None)
    if fd is None:
        return
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(fd)


def _lock_is_held(runs_dir: Path, run_id: str) -> bool:
    """Whether a live process (this one included) holds the lock of ``run_id``."""
    path = _lock_path(runs_dir, run_id)
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


def clean_stale(runs_dir: Path) -> list[str]:
    """Remove what ended processes left in ``runs_dir``; returns the names removed.

    Staging and deletion folders of dead processes go, as do locks nobody holds and checkpoints
    without any answered query (or of a run that was stored after all). Checkpoints holding
    answers stay: they are resumable work. Anything younger than a minute is left alone.
    """
    removed = []
    if not runs_dir.is_dir():
        return removed
    try:
        entries = list(runs_dir.iterdir())
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
            stale = not _lock_is_held(runs_dir, run_id)
        elif name.startswith(PARTIAL) and entry.is_dir():
            run_id = name[len(PARTIAL) :]
            stale = not _lock_is_held(runs_dir, run_id) and (
                (runs_dir / run_id).is_dir() or not any(entry.glob("answers-*.jsonl"))
            )
        elif name.endswith(".lock") and entry.is_file() and _can_judge_staleness():
            run_id = name[1 : -len(".lock")]
            path = _lock_path(runs_dir, run_id)
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


# --- writing a run ----------------------------------------------------------------------------


def write_run(runs_dir: Path, run_id: str, manifest: dict, tables: dict[str, pd.DataFrame]) -> Path:
    """Write a complete run folder atomically and release the run id's lock.

    The tables go to a hidden staging folder, each file synced to disk, then the folder is
    renamed into place: a reader sees the whole run or nothing. On failure (a full disk, a
    read-only folder) nothing is left behind and the error names the cause.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    runs_dir = Path(runs_dir)
    schemas = _schemas()
    final = runs_dir / run_id
    staging = runs_dir / f".tmp-{run_id}-{secrets.token_hex(4)}"
    try:
        _ensure_folder(runs_dir)
        acquire_run_id(runs_dir, run_id)
        if final.exists():
            raise RagBenchError(f"run {run_id} already exists in {runs_dir}", "use a new run id")
        os.mkdir(staging)  # unlike mkdtemp, honours the umask: others may read the run
        for name in TABLES:
            frame = tables.get(name, pd.DataFrame(columns=schemas[name].names))
            table = pa.Table.from_pandas(
                frame[schemas[name].names], schema=schemas[name], preserve_index=False
            )
            pq.write_table(table, staging / f"{name}.parquet")
            fsync(staging / f"{name}.parquet")
        pause_point("write")
        text = json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n"
        with open(staging / MANIFEST, "x", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        fsync(staging)
        os.rename(staging, final)
        fsync(runs_dir)
    except OSError as exc:
        raise _write_error(f"could not write run {run_id} to", runs_dir, exc) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        release_run_id(runs_dir, run_id)
    return final


def run_folders(runs_dir: Path) -> list[Path]:
    """Every stored run folder, oldest first (hidden staging folders, checkpoints and locks
    excluded)."""
    if not runs_dir.is_dir():
        return []
    return sorted(p for p in runs_dir.iterdir() if p.is_dir() and not p.name.startswith("."))


def read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RagBenchError(
            f"run {folder.name} has an unreadable manifest ({exc})",
            f"check {path} or remove the run",
        ) from None
    if not isinstance(manifest, dict):
        raise RagBenchError(
            f"run {folder.name} has an unreadable manifest (not a JSON object)",
            f"check {path} or remove the run",
        )
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise RagBenchError(
            f"run {folder.name} uses trace schema version {version}, "
            f"newer than this rag-bench reads ({SCHEMA_VERSION})",
            "upgrade rag-bench",
        )
    return manifest


def remove_run(folder: Path) -> None:
    """Delete a run: hide it first (one rename), then remove the files."""
    hidden = folder.parent / f".rm-{folder.name}-{secrets.token_hex(2)}"
    os.rename(folder, hidden)
    shutil.rmtree(hidden, ignore_errors=True)


# --- checkpoints ------------------------------------------------------------------------------


class Checkpoint:
    """The answered queries of a run in progress, in ``runs/.partial-<run_id>/``.

    ``checkpoint.json`` says what the run is (variant, resolved parameters, dataset hash,
    selection, cutoffs); each block of answered queries is appended as a new JSONL file
    ``answers-<n>.jsonl``, written atomically, so a block is there whole or not at all;
    ``progress.json`` carries the time spent and the components' usage so far. Entries are
    keyed by query id and by a hash of what the answer was computed from, so an entry whose
    inputs changed is not reused.
    """

    def __init__(self, folder: Path, header: dict[str, Any]):
        self.folder = folder
        self.header = header
        self.entries: dict[str, dict] = {}
        self.progress: dict[str, Any] = {}
        self.blocks = 0

    @property
    def run_id(self) -> str:
        return self.header["run_id"]

    @property
    def runs_dir(self) -> Path:
        return self.folder.parent

    def __len__(self) -> int:
        return len(self.entries)

    def _fail(self, exc: OSError) -> WriteError:
        return _write_error(f"could not checkpoint run {self.run_id} in", self.runs_dir, exc)

    @classmethod
    def create(cls, runs_dir: Path, run_id: str, header: dict[str, Any]) -> Checkpoint:
        checkpoint = cls(Path(runs_dir) / f"{PARTIAL}{run_id}", {**header, "run_id": run_id})
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
    def find(cls, runs_dir: Path, ref: str) -> Checkpoint:
        """The checkpoint of an interrupted run by id, unique id prefix, or folder path."""
        given = Path(ref)
        if (given / CHECKPOINT).is_file():
            return cls.open(given)
        partials = {}
        if runs_dir.is_dir():
            partials = {
                p.name[len(PARTIAL) :]: p
                for p in runs_dir.iterdir()
                if p.name.startswith(PARTIAL) and (p / CHECKPOINT).is_file()
            }
        matching = [r for r in partials if r == ref] or [r for r in partials if r.startswith(ref)]
        if len(matching) == 1:
            return cls.open(partials[matching[0]])
        if len(matching) > 1:
            raise RagBenchError(
                f"run id prefix {ref!r} matches several interrupted runs: "
                + ", ".join(sorted(matching)[:10]),
                "give more of the id",
            )
        stored = [p.name for p in run_folders(runs_dir) if p.name == ref or p.name.startswith(ref)]
        if stored:
            raise RagBenchError(
                f"run {stored[0]} is complete: there is nothing to resume",
                f"see it with `rag-bench show {stored[0]}`",
            )
        resumable = ", ".join(sorted(partials)) or "none"
        raise RagBenchError(
            f"no interrupted run {ref!r} in {runs_dir}",
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
