"""A content-addressed on-disk cache for indexes and embeddings.

An entry is a folder named by the hash of everything that determines it (component, parameters,
analyzer, the exact chunk texts). It is built in a hidden staging folder, synced, marked
complete and renamed into place, so a reader never sees half an entry and two processes building
the same entry at once both succeed (the second rename loses and is dropped). An entry that
cannot be loaded (damaged by hand or by a failing disk) is set aside and rebuilt. An unwritable
or full cache only costs speed: the value is built and used without being stored.

Long computations that can be split (embedding a big corpus with an encoder that learns
nothing from it) store their finished blocks under ``.partial-<entry>/`` as they go
(:meth:`Cache.blocks`), so an interrupted run resumes from the last finished block.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rag_bench.errors import RagBenchError
from rag_bench.io.durable import atomic_write, fsync_tree

T = TypeVar("T")
STALE_AFTER_S = 3600.0  # a staging folder this old belongs to a process that ended
log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    return Path(os.environ.get("RAG_BENCH_CACHE_DIR", Path.cwd() / ".cache" / "rag-bench"))


def digest(material: Any) -> str:
    """A stable hash of JSON-able material."""
    text = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Cache:
    def __init__(self, root: Path | None):
        self.root = root  # None disables the cache
        self._memory: dict[str, Any] = {}  # entries already loaded by this process

    def key(self, namespace: str, material: Any) -> str:
        return f"{namespace}-{digest(material)[:24]}"

    def fetch(
        self,
        namespace: str,
        material: Any,
        build: Callable[[], T],
        save: Callable[[T, Path], None],
        load: Callable[[Path], T],
    ) -> tuple[T, bool]:
        """The cached value for ``material``, building and storing it when missing.

        Returns the value and whether it came from the cache.
        """
        key = self.key(namespace, material)
        if key in self._memory:
            return self._memory[key], True
        if self.root is None:
            value = build()
            self._memory[key] = value
            return value, False
        folder = self.root / key
        if (folder / ".complete").exists():
            try:
                value = load(folder)
            except RagBenchError:
                raise
            except Exception as exc:  # a damaged entry: set it aside and rebuild
                log.warning(
                    "warning: cache entry %s is unreadable (%s); rebuilding it", folder, exc
                )
                self._set_aside(folder)
            else:
                self._memory[key] = value
                return value, True
        value = build()
        self._store(folder, value, save)
        self._memory[key] = value
        return value, False

    def stored(self, namespace: str, material: Any) -> Path | None:
        """The folder of the complete entry for ``material`` (None: not stored)."""
        if self.root is None:
            return None
        folder = self.root / self.key(namespace, material)
        return folder if (folder / ".complete").exists() else None

    def _set_aside(self, folder: Path) -> None:
        hidden = folder.with_name(f".bad-{folder.name}-{secrets.token_hex(4)}")
        try:
            os.rename(folder, hidden)
        except OSError:
            return
        shutil.rmtree(hidden, ignore_errors=True)

    def _store(self, folder: Path, value: Any, save: Callable[[Any, Path], None]) -> None:
        assert self.root is not None  # only an enabled cache stores
        staging = self.root / f".{folder.name}-{secrets.token_hex(4)}"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._clean_stale()
            staging.mkdir()
        except OSError:
            return  # an unwritable cache only costs speed
        try:
            save(value, staging)
            (staging / ".complete").touch()
            fsync_tree(staging)
            os.rename(staging, folder)
        except OSError:
            pass  # another process stored the same entry first, or the disk is full
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    def _clean_stale(self) -> None:
        """Remove staging folders that processes which ended (e.g. killed) left behind."""
        assert self.root is not None  # only an enabled cache stores
        now = time.time()
        with contextlib.suppress(OSError):
            for entry in self.root.iterdir():
                if not entry.name.startswith(".") or entry.name.startswith(".partial-"):
                    continue
                with contextlib.suppress(OSError):
                    if entry.is_dir() and now - entry.stat().st_mtime > STALE_AFTER_S:
                        shutil.rmtree(entry, ignore_errors=True)

    def blocks(self, namespace: str, material: Any) -> Blocks:
        """Checkpointed blocks of the computation of the entry ``(namespace, material)``."""
        folder = (
            None if self.root is None else self.root / f".partial-{self.key(namespace, material)}"
        )
        return Blocks(folder)


class Blocks:
    """Finished blocks of a long computation (arrays), each saved atomically as it completes;
    discarded once the whole result is stored as a cache entry. A disabled, unwritable or full
    cache keeps nothing and costs nothing but the checkpoint."""

    def __init__(self, folder: Path | None):
        self.folder = folder

    def _path(self, number: int) -> Path:
        assert self.folder is not None  # a disabled checkpoint reads and writes no block
        return self.folder / f"block-{number:06d}.npy"

    def load(self, number: int) -> np.ndarray | None:
        if self.folder is None:
            return None
        try:
            return np.load(self._path(number), allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None  # missing or damaged: compute it again

    def save(self, number: int, array: np.ndarray) -> None:
        if self.folder is None:
            return
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(array), allow_pickle=False)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write(self._path(number), buffer.getvalue())
        except OSError:
            pass  # no checkpoint, no harm

    def discard(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def corpus_fingerprint(chunks) -> str:
    """Hash of the chunk ids and indexed texts, in order."""
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk.chunk_id.encode())
        h.update(b"\x00")
        h.update(chunk.index_text.encode())
        h.update(b"\x01")
    return h.hexdigest()
