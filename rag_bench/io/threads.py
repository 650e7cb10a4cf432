"""Independent calls on threads. numpy, Arrow and rag-bench's compiled modules release the GIL
in their loops, so threads keep every core busy without the cost of processes."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def in_parallel(calls: Sequence[Callable[[], object]], workers: int = 2) -> list:
    """The results of independent calls, in order, run on ``workers`` threads."""
    if len(calls) < 2 or workers < 2:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=min(workers, len(calls))) as pool:
        return list(pool.map(lambda call: call(), calls))
