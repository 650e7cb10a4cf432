"""Durable writes: a file is replaced whole or not at all, and synced before it becomes visible.

This is the package's one atomic writer. The staging file is ``.~<name>-<random>`` next to the
target, so a reader listing the folder never mistakes it for the real file and a clean-up can
recognise a write that never finished (by its ``.~`` prefix).
"""

from __future__ import annotations

import contextlib
import os
import secrets
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
