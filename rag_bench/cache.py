"""A content-addressed on-disk cache for indexes and embeddings.

An entry is a folder named by the hash of everything that determines it (component, parameters,
analyzer, the exact chunk texts). It is built in a temporary folder and renamed into place, so a
reader never sees half an entry and two processes building the same entry at once both succeed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


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
        key = f"{namespace}-{digest(material)[:24]}"
        if key in self._memory:
            return self._memory[key], True
        if self.root is None:
            value = build()
            self._memory[key] = value
            return value, False
        folder = self.root / key
        if (folder / ".complete").exists():
            value = load(folder)
            self._memory[key] = value
            return value, True
        value = build()
        self._store(folder, value, save)
        self._memory[key] = value
        return value, False

    def _store(self, folder: Path, value: Any, save: Callable[[Any, Path], None]) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=self.root))
        except OSError:
            return  # an unwritable cache only costs speed
        try:
            save(value, staging)
            (staging / ".complete").touch()
            os.rename(staging, folder)
        except OSError:
            pass  # another process stored the same entry first, or the disk is full
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)


def corpus_fingerprint(chunks) -> str:
    """Hash of the chunk ids and indexed texts, in order."""
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk.chunk_id.encode())
        h.update(b"\x00")
        h.update(chunk.index_text.encode())
        h.update(b"\x01")
    return h.hexdigest()
