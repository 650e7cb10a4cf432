"""Running ``rag-bench`` in a child process and reading a runs folder as a user would: what the
process-level tests (signals, kill -9, concurrent runs, resume) share."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from runs_helpers import committed_ids, partitions, read_table

from conftest import SHIPPED
from rag_bench.experiment.runner import (
    RunInterrupted,
    Selection,
    run_variant,
)
from rag_bench.io.pause import PAUSE_ENV
from rag_bench.pipeline import compose
from rag_bench.runs import TABLES
from rag_bench.runs.layout import MANIFESTS

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

SMOKE = Selection(tag="smoke")
EXECUTABLE = Path(sys.executable).with_name("rag-bench")
COMMAND = [str(EXECUTABLE)] if EXECUTABLE.exists() else [sys.executable, "-m", "rag_bench.cli.main"]
# The child restores Ctrl-C's default before it becomes rag-bench: an ignored SIGINT (a test
# process started in the background or by a CI runner) would pass down through exec, and Python
# never turns an ignored SIGINT into KeyboardInterrupt. A plain exec, unlike subprocess's
# preexec_fn, is safe while this process runs threads.
DEFAULT_SIGINT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]
VOLATILE = {"run_id"}  # besides the latency columns


# --- helpers shared with the other robustness tests ---------------------------------------------


class Process:
    """A `rag-bench` subprocess whose stderr is read line by line as it comes."""

    def __init__(self, args, *, cache: Path, pause: str | None = None, env: dict | None = None):
        environment = {k: v for k, v in os.environ.items() if not k.startswith("RAG_BENCH_")}
        environment["RAG_BENCH_CACHE_DIR"] = str(cache)
        if pause:
            environment[PAUSE_ENV] = f"{pause}:60"
        environment.update(env or {})
        self.proc = subprocess.Popen(
            [*DEFAULT_SIGINT, *COMMAND, *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        self.stdout = ""
        self._readers = [
            threading.Thread(target=self._read_err, daemon=True),
            threading.Thread(target=self._read_out, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_err(self):
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _read_out(self):
        self.stdout = self.proc.stdout.read()

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                self.proc.kill()
                raise AssertionError(f"no {text!r} within {timeout}s: {self.stderr}") from None
            if line is None:
                raise AssertionError(f"ended before {text!r}: {''.join(self.stderr)}")
            if text in line:
                return

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float = 60) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        for reader in self._readers:
            reader.join(5)
        return code

    def messages(self) -> list[str]:
        """stderr without the pause announcements."""
        return [ln.rstrip("\n") for ln in self.stderr if not ln.startswith("rag-bench: paused")]


def visible(runs: Path) -> list[str]:
    """What an engine reading the folder in place could see: committed runs, runs with table
    partitions (committed or not), and anything else not hidden outside the layout."""
    if not runs.exists():
        return []
    layout = {*TABLES, MANIFESTS}
    others = {p.name for p in runs.iterdir() if not p.name.startswith(".") and p.name not in layout}
    return sorted(others | set(committed_ids(runs)) | set(partitions(runs)))


def hidden(runs: Path) -> list[str]:
    return sorted(p.name for p in runs.iterdir() if p.name.startswith(".")) if runs.exists() else []


def comparable(run) -> dict[str, pd.DataFrame]:
    """A stored run's tables without what legitimately differs between two runs (id, latency)."""
    out = {}
    for table in TABLES:
        frame = read_table(run, table)
        drop = [c for c in frame.columns if c in VOLATILE or c.startswith("latency_ms")]
        out[table] = frame.drop(columns=drop).reset_index(drop=True)
    return out


def assert_same_traces(a, b, atol: float | None = None) -> None:
    """Every trace table equal bit for bit; with ``atol``, numbers within ``atol`` of each other
    (ids, texts and ranks still equal exactly)."""
    left, right = comparable(a), comparable(b)
    for table in TABLES:
        if atol is None:
            pd.testing.assert_frame_equal(left[table], right[table], check_exact=True, obj=table)
        else:
            pd.testing.assert_frame_equal(
                left[table], right[table], check_exact=False, rtol=0, atol=atol, obj=table
            )


def age(runs: Path, seconds: float = 600) -> None:
    """Make every leftover look old (stale leftovers are removed only after a minute)."""
    past = time.time() - seconds
    for path in runs.rglob("*"):
        os.utime(path, (past, past))


# --- fixtures ------------------------------------------------------------------------------------


def interrupt_after_blocks(monkeypatch, n_blocks: int, block: int = 8) -> None:
    """Answer in blocks of ``block`` queries and press Ctrl-C once ``n_blocks`` are saved."""
    saved = []

    def stop(stage):
        if stage == "answer":
            saved.append(stage)
            if len(saved) == n_blocks:
                raise KeyboardInterrupt

    monkeypatch.setattr(compose, "BATCH", block)
    monkeypatch.setattr(compose, "pause_point", stop)


def interrupted_run(monkeypatch, runs: Path, cache: Path, dataset=SHIPPED, **options):
    interrupt_after_blocks(monkeypatch, 2)
    with pytest.raises(RunInterrupted) as info:
        run_variant("baseline", dataset, selection=SMOKE, runs_dir=runs, cache_dir=cache, **options)
    monkeypatch.setattr(compose, "pause_point", lambda stage: None)
    return info.value
