"""One BLAS thread for every scoring product, whatever other threads of the process do.

A multi-threaded BLAS sums a product in an order that depends on its thread count, so the same
product can differ in its last bits between runs. ``threadpoolctl``'s limits are process-wide
and each ``threadpool_limits`` block restores, on exit, the limit it found on entry: two
threads entering and leaving such blocks interleaved can leave the process at either limit.
:func:`one_blas_thread` counts the blocks open in the process under a lock: the first one sets
BLAS to one thread, the last one restores what was there before, so every product made inside
any of them runs on one thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_open = 0
_limiter: Any = None


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with BLAS limited to one thread (re-entrant, thread-safe)."""
    global _open, _limiter
    from threadpoolctl import threadpool_limits

    with _lock:
        if _open == 0:
            _limiter = threadpool_limits(limits=1, user_api="blas")
        _open += 1
    try:
        yield
    finally:
        with _lock:
            _open -= 1
            if _open == 0:
                _limiter.restore_original_limits()
                _limiter = None
