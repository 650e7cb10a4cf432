"""Durable writes: a file is replaced whole or not at all, and synced before it becomes visible.

This is the package's one atomic writer. The staging file is ``.~<name>-<random>`` next to the
target, so a reader listing the folder never mistakes it for the real file and a clean-up can
recognise a write that never finished (by its ``.~`` prefix).

Paths inside a folder others may write to (a shared runs folder) are read without following
symbolic links: :func:`symlink_below` finds a link on the way down from a trusted root, and
:func:`read_no_follow` opens a file only when it is not a link itself.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

STAGING_PREFIX = ".~"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` so that it either keeps its old content or has all of ``data``, synced."""
    path = Path(path)
    staging = path.with_name(f"{STAGING_PREFIX}{path.name}-{secrets.token_hex(4)}")
    try:
        with open(staging, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, path)
    finally:
        with contextlib.suppress(OSError):
            staging.unlink(missing_ok=True)


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
