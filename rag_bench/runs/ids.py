"""Run ids: their grammar, new ones, and the locks that claim them for one process.

A run id names files (``_manifests/<run_id>.json``, ``.partial-<run_id>/``, ``.<run_id>.lock``),
so an id read from disk (a checkpoint, a manifest's or a folder's name) is checked against the
grammar before it becomes part of a path: one path segment, no character Hive escapes, no
leading dot, so it can never climb out of the runs folder.

``.<run_id>.lock`` claims a run id for one process, which holds an exclusive ``flock`` on it
while it lives; a lock nobody holds belongs to a process that ended (even by ``kill -9``). A
lock file is opened without following a symbolic link, and written only when it is a regular
file with no other name (hard link): a lock planted in a shared runs folder cannot make the
next run truncate a file elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from datetime import datetime
from pathlib import Path
from typing import TypeGuard

from rag_bench.errors import RagBenchError
from rag_bench.runs.layout import lock_name

RUN_ID = re.compile(r"[^\s\x00-\x1f\"#%'*/:=?\\\x7f{}\[\]^.][^\s\x00-\x1f\"#%'*/:=?\\\x7f{}\[\]^]*")
MAX_RUN_ID = 200
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def is_run_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a run id that is safe as one path segment."""
    return (
        isinstance(value, str) and len(value) <= MAX_RUN_ID and RUN_ID.fullmatch(value) is not None
    )


def check_run_id(value: object, where: str) -> str:
    """``value`` when it is a valid run id; a one-line error naming ``where`` it came from."""
    if not is_run_id(value):
        raise RagBenchError(
            f"{where} names an invalid run id {str(value)[:80]!r}",
            "a run id is one name without slashes, spaces or a leading dot; remove that file",
        )
    return value


def new_run_id(variant: str, created: datetime) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", variant).strip("-") or "run"
    return f"{created:%Y%m%d-%H%M%S}-{slug}-{secrets.token_hex(2)}"


class Locks:
    """The run-id locks of one bookkeeping folder, and which of them this process holds."""

    _held: dict[Path, int] = {}  # process-wide: lock file -> the descriptor holding the flock

    def __init__(self, folder: Path):
        self.folder = Path(os.path.abspath(folder))

    def path(self, run_id: str) -> Path:
        return self.folder / lock_name(check_run_id(run_id, "a lock"))

    def create(self, run_id: str) -> None:
        """Create the lock file (FileExistsError if it exists), lock it and note the holder."""
        path = self.path(run_id)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | NO_FOLLOW, 0o644)
        try:
            _flock(fd)
            os.write(fd, f"{os.getpid()}\n".encode())  # for people looking: who holds it
        except OSError:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self._held[path] = fd

    def acquire(self, run_id: str) -> None:
        """Hold the lock of an existing run id: take over a lock nobody holds, or fail when a
        live process holds it."""
        path = self.path(run_id)
        if path in self._held:
            return
        for _ in range(10):
            try:
                self.create(run_id)
                return
            except FileExistsError:
                pass
            try:
                fd = os.open(path, os.O_RDWR | NO_FOLLOW)
            except FileNotFoundError:
                continue  # released meanwhile: create it
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                raise _foreign(path, "is a symbolic link") from None
            if not _own_kind(fd):
                os.close(fd)
                raise _foreign(path, "is not a plain file of its own")
            if not can_judge_staleness() or not _flock(fd):
                os.close(fd)
                raise RagBenchError(
                    f"run {run_id} is in use by another rag-bench process",
                    f"wait for it to end; if no process uses it, delete {path}",
                )
            if _same_file(fd, path):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self._held[path] = fd
                return
            os.close(fd)  # replaced meanwhile: try again
        raise RagBenchError(f"could not lock run {run_id} in {self.folder}", "retry in a second")

    def release(self, run_id: str) -> None:
        """Give up the lock of ``run_id`` (the lock file goes first, then the flock)."""
        path = self.path(run_id)
        fd = self._held.pop(path, None)
        if fd is None:
            return
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)

    def is_held(self, run_id: str) -> bool:
        """Whether a live process (this one included) holds the lock of ``run_id``."""
        path = self.path(run_id)
        if path in self._held:
            return True
        try:
            fd = os.open(path, os.O_RDONLY | NO_FOLLOW)
        except FileNotFoundError:
            return False
        except OSError:
            return True  # cannot tell (or a symbolic link): assume it is in use
        try:
            return not can_judge_staleness() or not _flock(fd)
        finally:
            os.close(fd)

    def remove_if_free(self, run_id: str) -> bool:
        """Delete the lock file when nobody holds it (taking it ourselves meanwhile)."""
        if not can_judge_staleness():
            return False
        path = self.path(run_id)
        try:
            fd = os.open(path, os.O_RDONLY | NO_FOLLOW)
        except OSError:
            return False
        try:
            if _own_kind(fd) and _flock(fd):
                path.unlink(missing_ok=True)
                return True
            return False
        finally:
            os.close(fd)


def _own_kind(fd: int) -> bool:
    """Whether an open lock file is one rag-bench could have made: a regular file with one name."""
    info = os.fstat(fd)
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


def _foreign(path: Path, what: str) -> RagBenchError:
    return RagBenchError(
        f"the lock {path} {what}, which rag-bench never makes: not touched",
        "delete it (it is no file of rag-bench's) and run again",
    )


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


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


def can_judge_staleness() -> bool:
    """Whether a lock nobody holds can be told apart (needs ``flock``)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return True
