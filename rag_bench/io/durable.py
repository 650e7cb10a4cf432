"""Flushing files to disk before a rename makes them visible (best effort where unsupported)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync(path: Path) -> None:
    """Flush a file, or a folder's entries, to disk."""
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
