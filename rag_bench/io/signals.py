"""Ctrl-C and ``kill`` during a long command: both interrupt the same way, once.

The command line wraps a run in :func:`interruptible`; the run then cleans up (keeping nothing
half-written) and the process exits with :func:`interrupted_status`.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


@contextmanager
def interruptible(received: list[int] | None = None) -> Iterator[list[int]]:
    """Within the block, SIGTERM (a plain ``kill``) interrupts like Ctrl-C, so the run cleans up
    and reports the same way; once interrupted, further Ctrl-C or ``kill`` signals are noted but
    do not interrupt the clean-up (which keeps nothing half-written). The signal numbers go to
    ``received`` (yielded); the exit status to use is :func:`interrupted_status`. A signal the
    process was started to ignore stays ignored."""
    received = [] if received is None else received

    def on_signal(signum, frame):
        received.append(signum)
        if len(received) == 1:
            raise KeyboardInterrupt

    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, on_signal)
        except ValueError:  # not the main thread: leave signals alone
            break
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def interrupted_status(received: Sequence[int]) -> int:
    """The shell's convention: 128 + the signal (130 for Ctrl-C, 143 for ``kill``)."""
    return 128 + (received[0] if received else signal.SIGINT)
