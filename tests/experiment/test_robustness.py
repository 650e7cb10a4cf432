"""Interrupting a real `rag-bench run` process: Ctrl-C (SIGINT), `kill` (SIGTERM) and `kill -9`
while indexing, answering and writing leave no visible partial run, print one line, and the
checkpoint lets `rag-bench run --resume` finish the run with the traces of an uninterrupted one.

The run is stopped at a known point with the testing aid ``RAG_BENCH_TEST_PAUSE`` (see
``rag_bench/io/pause.py``), which makes the process announce the stage on stderr and sleep there.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from processes import SMOKE, Process, age, assert_same_traces, hidden, visible
from runs_helpers import locate, manifest_file

from conftest import SHIPPED
from rag_bench.experiment.runner import run_variant
from rag_bench.io.signals import interrupted_status, interruptible

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]


def start(runs: Path, cache: Path, pause: str) -> Process:
    process = Process(
        ["run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", runs, "--format", "csv"],
        cache=cache,
        pause=pause,
    )
    process.wait_for(f"paused at {pause}")
    return process


def resume_in_process(rag_bench, runs: Path, ref: str):
    out = rag_bench("run", "--resume", ref, "--runs-dir", runs, "--format", "csv")
    assert out.exit_code == 0, out.stderr
    return out


# --- Ctrl-C and kill ------------------------------------------------------------------------


@pytest.mark.signals
@pytest.mark.parametrize(
    ("stage", "signum", "status"),
    [
        ("index", signal.SIGINT, 130),
        ("answer", signal.SIGINT, 130),
        ("write", signal.SIGINT, 130),
        ("answer", signal.SIGTERM, 143),
    ],
)
def test_an_interrupted_run_stores_nothing_visible_and_says_so_in_one_line(
    tmp_path, index_cache, clean, rag_bench, stage, signum, status
):
    runs = tmp_path / "runs"
    process = start(runs, index_cache, stage)
    process.signal(signum)
    assert process.finish() == status
    messages = process.messages()
    assert len(messages) == 1, messages
    assert "Traceback" not in "".join(process.stderr) and process.stdout == ""
    assert visible(runs) == []
    leftovers = hidden(runs)
    assert not [n for n in leftovers if n.endswith(".lock") or n.startswith(".tmp-")], leftovers
    if stage == "index":
        assert messages == ["interrupted; nothing stored"]
        assert leftovers == []
        return
    # answering and writing: every smoke query was answered (one block) and is checkpointed
    [partial] = leftovers
    run_id = partial.removeprefix(".partial-")
    assert messages[0] == (
        f"interrupted; run {run_id} not stored, 30 of 30 queries checkpointed; "
        f"resume with: rag-bench run --resume {run_id} --runs-dir {runs}"
    )
    listing = rag_bench("runs", "--runs-dir", runs, "--format", "json")
    assert listing.exit_code == 0 and json.loads(listing.stdout) == [] and listing.stderr == ""
    resumed = resume_in_process(rag_bench, runs, run_id)
    assert f"stored run {run_id}" in resumed.stderr
    assert visible(runs) == [run_id] and hidden(runs) == []
    assert_same_traces(locate(runs, run_id), clean)
    manifest = json.loads(manifest_file(runs, run_id).read_text())
    assert manifest["resumed"]["queries_from_checkpoint"] == 30


@pytest.mark.signals
def test_ctrl_c_reaches_the_run_when_the_test_process_ignores_it(tmp_path, index_cache):
    """A shell or CI runner may start the tests with SIGINT ignored, which every child inherits
    through exec; Python then never raises KeyboardInterrupt, and the run would sleep on."""
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process = start(tmp_path / "runs", index_cache, "index")
    finally:
        signal.signal(signal.SIGINT, ignored)
    process.signal(signal.SIGINT)
    assert process.finish(timeout=20) == 130
    assert process.messages() == ["interrupted; nothing stored"]


@pytest.mark.signals
@pytest.mark.parametrize("stage", ["index", "answer", "write"])
def test_kill_9_leaves_only_hidden_leftovers_that_disturb_nothing(
    tmp_path, index_cache, clean, rag_bench, stage
):
    runs = tmp_path / "runs"
    process = start(runs, index_cache, stage)
    process.signal(signal.SIGKILL)
    assert process.finish() == -signal.SIGKILL
    assert visible(runs) == []
    leftovers = hidden(runs)
    expected = {"index": 1, "answer": 2, "write": 3}[stage]  # lock, + checkpoint, + staging
    assert len(leftovers) == expected, leftovers
    run_id = next(n for n in leftovers if n.endswith(".lock"))[1 : -len(".lock")]

    # listing and querying ignore the leftovers
    listing = rag_bench("runs", "--runs-dir", runs, "--format", "json")
    assert listing.exit_code == 0 and json.loads(listing.stdout) == [] and listing.stderr == ""
    sql = rag_bench(
        "sql", "SELECT count(*) AS n FROM metrics", "--runs-dir", runs, "--format", "csv"
    )
    assert sql.exit_code == 0 and sql.stdout.split() == ["n", "0"]

    if stage == "index":
        refused = rag_bench("run", "--resume", run_id, "--runs-dir", runs)
        assert refused.exit_code == 2 and "no interrupted run" in refused.stderr
    else:
        # the dead process's lock is taken over; the checkpoint (and, after writing, the staging
        # folder) finish the run with the traces of an uninterrupted one
        resume_in_process(rag_bench, runs, run_id[:-2])
        assert_same_traces(locate(runs, run_id), clean)
        assert visible(runs) == [run_id]

    # the next run removes whatever the killed process left behind
    age(runs)
    after = run_variant("baseline", SHIPPED, selection=SMOKE, runs_dir=runs, cache_dir=index_cache)
    assert hidden(runs) == []
    assert set(visible(runs)) == {after.run_id} | ({run_id} if stage != "index" else set())


@pytest.mark.signals
def test_a_checkpoint_with_answers_survives_the_cleaning_until_resumed(
    tmp_path, index_cache, clean, rag_bench
):
    runs = tmp_path / "runs"
    process = start(runs, index_cache, "answer")
    process.signal(signal.SIGKILL)
    process.finish()
    age(runs)
    run_variant("baseline", SHIPPED, selection=SMOKE, runs_dir=runs, cache_dir=index_cache)
    [partial] = hidden(runs)  # the stale lock went, the resumable checkpoint stayed
    assert partial.startswith(".partial-")
    run_id = partial.removeprefix(".partial-")
    resume_in_process(rag_bench, runs, run_id)
    assert_same_traces(locate(runs, run_id), clean)
    assert hidden(runs) == []


@pytest.mark.signals
def test_two_runs_at_once_on_one_runs_folder_and_a_cold_cache(tmp_path):
    runs, cache = tmp_path / "runs", tmp_path / "cold-cache"
    args = ["run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", runs, "--format", "csv"]
    first, second = Process(args, cache=cache), Process(args, cache=cache)
    assert first.finish() == 0, first.stderr
    assert second.finish() == 0, second.stderr
    ids = visible(runs)
    assert len(ids) == 2 and ids[0] != ids[1]
    assert hidden(runs) == []
    assert_same_traces(locate(runs, ids[0]), locate(runs, ids[1]))
    # both built the same index entries; each entry is stored once and whole
    entries = sorted(p.name for p in cache.iterdir())
    assert [e.split("-")[0] for e in entries] == ["bm25", "prepared"], entries
    assert all((cache / e / ".complete").exists() for e in entries)


def test_a_second_interrupt_does_not_cut_the_clean_up_short():
    """Ctrl-C pressed again (or a `kill` after a Ctrl-C) while a run cleans up after the first
    is noted, not raised: the clean-up finishes and nothing is left half-written."""
    if signal.SIG_IGN in (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)):
        pytest.skip("this process was started with SIGINT or SIGTERM ignored")
    received, cleaned = [], []
    with pytest.raises(KeyboardInterrupt), interruptible(received):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        finally:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handlers run here, and must not raise
            cleaned.append(True)
    assert cleaned == [True]
    assert received == [signal.SIGINT, signal.SIGINT, signal.SIGTERM]
    assert interrupted_status(received) == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
