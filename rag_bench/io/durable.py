"""Durable writes: a file is replaced whole or not at all, and synced before it becomes visible.

This is the package's one atomic writer. The staging file is ``.~<name>-<random>`` next to the
target, so a reader listing the folder never mistakes it for the real file and a clean-up can
recognise a write that never finished (by its ``.~`` prefix).

A file a person names for output (``-o``) goes through :func:`write_output`: a regular file is
replaced atomically as above (so a failed write leaves the old one as it was), a symbolic
link is followed and its target written the same way (the link stays a link), a character
device or a FIFO is written in place (``-o /dev/stdout`` works, ``/dev/null`` stays a device),
and anything else (a folder, a block device, a socket) is refused.

Paths inside a folder others may write to (a shared runs folder) are read without following
symbolic links: :func:`symlink_below` finds a link on the way down from a trusted root, and
:func:`read_no_follow` opens a file only when it is not a link itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from rag_bench.errors import RagBenchError

STAGING_PREFIX = ".~"


def _staged(path: Path, data: bytes, publish: Callable[[Path, Path], bool]) -> bool:
    """Write ``data`` beside ``path`` under a staging name, synced, then ``publish(staging,
    path)``; the staging file never outlives the call. Returns what ``publish`` returns."""
    staging = path.with_name(f"{STAGING_PREFIX}{path.name}-{secrets.token_hex(4)}")
    try:
        with open(staging, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return publish(staging, path)
    finally:
        with contextlib.suppress(OSError):
            staging.unlink(missing_ok=True)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` so that it either keeps its old content or has all of ``data``, synced."""

    def replace(staging: Path, target: Path) -> bool:
        os.replace(staging, target)
        return True

    _staged(Path(path), data, replace)


def atomic_create(path: Path, data: bytes) -> bool:
    """Create ``path`` with all of ``data``, synced, only if it does not exist yet: an
    append-only write. Returns False (and writes nothing) when ``path`` is already there, so two
    writers racing for one name cannot overwrite each other."""

    def link(staging: Path, target: Path) -> bool:
        try:
            os.link(staging, target)  # fails when the name is taken, unlike os.replace
        except FileExistsError:
            return False
        fsync(target.parent)
        return True

    return _staged(Path(path), data, link)


def fsync(path: Path) -> None:
    """Flush a file, or a folder's entries, to disk (best effort where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_tree(folder: Path) -> None:
    """Flush every file below ``folder``, then the folder itself."""
    for path in [*folder.rglob("*"), folder]:
        fsync(path)


def symlink_below(root: Path, path: Path) -> Path | None:
    """The first symbolic link met going down from ``root`` to ``path`` (``path`` included,
    ``root`` itself trusted), or None; what does not exist is no link."""
    current = Path(root)
    for part in Path(path).relative_to(root).parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(mode):
            return current
    return None


def is_real_folder(path: Path) -> bool:
    """Whether ``path`` is a folder and not a symbolic link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def read_no_follow(path: Path) -> bytes:
    """The bytes of a regular file; OSError (ELOOP) when ``path`` is a symbolic link, and
    when it is no regular file (a FIFO would block, a device never end)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)


def write_output(path: str | Path, data: bytes, what: str) -> None:
    """Write ``data`` to the output file a person named (see the module docstring); an
    impossible write is one :class:`RagBenchError` naming ``what`` and the path, and leaves
    what was there before unchanged."""
    target = Path(os.path.realpath(path))
    try:
        try:
            mode = os.stat(target).st_mode
        except FileNotFoundError:
            mode = stat.S_IFREG  # a new file
        if stat.S_ISREG(mode):
            atomic_write(target, data)
        elif stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            _write_in_place(target, data, fifo=stat.S_ISFIFO(mode))
        else:
            kind = "a folder" if stat.S_ISDIR(mode) else "no file, device or FIFO"
            raise OSError(errno.EINVAL, f"it is {kind}")
    except OSError as exc:
        raise RagBenchError(
            f"cannot write {what} to {path}: {exc.strerror or exc}",
            "name a file in a folder you can write to (nothing was changed)",
        ) from None


def _write_in_place(path: Path, data: bytes, fifo: bool) -> None:
    """Write a device or FIFO as it is (never replaced); a FIFO nobody reads is refused rather
    than waited on."""
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | (os.O_NONBLOCK if fifo else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if fifo and exc.errno == errno.ENXIO:
            raise OSError(exc.errno, "no process reads that FIFO") from None
        raise
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
