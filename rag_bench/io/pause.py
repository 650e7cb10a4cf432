"""Testing aid: ``RAG_BENCH_TEST_PAUSE=<stage>:<seconds>`` makes a run announce the named stage
(``index``, ``answer``, ``write``, ``commit``; ``sql`` before a query runs) on stderr and sleep
there once, so a test can interrupt it at a known point. Unset, it does nothing."""

from __future__ import annotations

import os
import sys
import time

PAUSE_ENV = "RAG_BENCH_TEST_PAUSE"
_paused: set[str] = set()


def pause_point(stage: str) -> None:
    """Testing aid, the only reader of ``RAG_BENCH_TEST_PAUSE=<stage>:<seconds>``: at the named
    stage, announce it on stderr and sleep, once per process. Unset, it does nothing."""
    wanted = os.environ.get(PAUSE_ENV)
    if not wanted or stage in _paused:
        return
    name, _, seconds = wanted.partition(":")
    if name == stage:
        _paused.add(stage)
        print(f"rag-bench: paused at {stage}", file=sys.stderr, flush=True)
        time.sleep(float(seconds or 5))
