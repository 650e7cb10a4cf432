"""One BLAS thread for every scoring product, whatever other threads of the process do.

A multi-threaded BLAS sums a product in an order that depends on its thread count, so the same
product can differ in its last bits between runs. ``threadpoolctl``'s limits are process-wide,
and each ``threadpool_limits`` block restores, on exit, the limit it found on entry. Blocks that
open and close interleaved in several threads can therefore leave a product running at either
limit; sharing one limit among the open blocks did not help either (measured: with two executor
threads, 20 of kestrel-kb's 275 dense rankings differed in their last bits from a one-thread
run, and the process could be left at one BLAS thread for good). So :func:`one_blas_thread`
runs its block under one process-wide lock, setting the limit on entry and restoring it on exit:
no two scoring products overlap, and each runs on one thread. The products are a small part of
a run (retrieval, generation and judging run outside the lock, in parallel as before).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.RLock()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with BLAS limited to one thread (re-entrant, thread-safe; blocks in
    different threads run one after another)."""
    from threadpoolctl import threadpool_limits

    with _lock, threadpool_limits(limits=1, user_api="blas"):
        yield
