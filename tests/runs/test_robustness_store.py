"""The runs folder and the cache under stress: a full disk, a read-only folder, a run with a
missing Parquet file, two processes building one cache entry, a damaged cache entry, and an
interrupted embedding of a big corpus."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from processes import COMMAND, assert_same_traces, hidden, visible
from runs_helpers import copy_run, fingerprint, locate, table_file

from conftest import SHIPPED, assert_one_line_error
from rag_bench.components.base import Capability, Encoder
from rag_bench.components.registry import component, registry, resolve
from rag_bench.data.dataset import load_dataset
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.io.cache import Cache
from rag_bench.pipeline import compose
from rag_bench.pipeline.compose import Pipeline

SMOKE = Selection(tag="smoke")
SMOKE_RUN = ["run", "--variant", "baseline", "--tag", "smoke", "--format", "csv"]


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# --- a full disk ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_full_disk_while_writing_the_run_keeps_nothing_but_the_checkpoint(
    tmp_path, monkeypatch, rag_bench, clean
):
    import pyarrow.parquet as pq

    runs = tmp_path / "runs"
    real = pq.write_table
    written = []

    def fill_up(table, where, *args, **kwargs):
        written.append(where)
        if len(written) == 3:  # two tables fit, the third does not
            Path(where).write_bytes(b"PAR1 half a file")
            no_space()
        return real(table, where, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", fill_up)
    out = rag_bench(*SMOKE_RUN, "--runs-dir", runs)
    [partial] = hidden(runs)
    run_id = partial.removeprefix(".partial-")
    assert_one_line_error(
        out,
        f"could not write run {run_id} to {runs}: No space left on device",
        f"free disk space, then resume with `rag-bench run --resume {run_id} --runs-dir {runs}`",
        "30 of 30 queries are checkpointed",
    )
    assert out.exit_code == 2 and visible(runs) == []
    monkeypatch.setattr(pq, "write_table", real)
    assert rag_bench("run", "--resume", run_id, "--runs-dir", runs).exit_code == 0
    assert_same_traces(locate(runs, run_id), clean)
    assert hidden(runs) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fail_at", "kept"),
    [(1, 0), (4, 8)],  # the checkpoint's header; the second block of answers
)
def test_a_full_disk_while_checkpointing(tmp_path, monkeypatch, rag_bench, fail_at, kept):
    from rag_bench.runs import checkpoint

    runs = tmp_path / "runs"
    monkeypatch.setattr(compose, "BATCH", 8)
    real = checkpoint.atomic_write
    calls = []

    def fill_up(path, data):
        calls.append(path)
        if len(calls) == fail_at:
            no_space()
        real(path, data)

    monkeypatch.setattr(checkpoint, "atomic_write", fill_up)
    out = rag_bench(*SMOKE_RUN, "--runs-dir", runs)
    assert visible(runs) == []
    if not kept:
        assert_one_line_error(out, "could not checkpoint run", "No space left on device")
        assert "free disk space or pass another --runs-dir" in out.stderr
        assert hidden(runs) == []
    else:
        [partial] = hidden(runs)
        assert_one_line_error(
            out,
            "No space left on device",
            "free disk space, then resume with `rag-bench run --resume",
            f"({kept} of 30 queries are checkpointed)",
        )
        monkeypatch.setattr(checkpoint, "atomic_write", real)
        resumed = rag_bench(
            "run", "--resume", partial.removeprefix(".partial-"), "--runs-dir", runs
        )
        assert resumed.exit_code == 0, resumed.stderr


# --- a read-only runs folder ------------------------------------------------------------------


def _read_only_command(runs: Path, args: list) -> list[str] | None:
    """Run `rag-bench args` where ``runs`` is read-only even for root: in a user and mount
    namespace with ``runs`` bind-mounted read-only. None when namespaces are unavailable."""
    if not shutil.which("unshare"):
        return None
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
    )
    if probe.returncode:
        return None
    quoted = " ".join(f"'{a}'" for a in [*COMMAND, *map(str, args)])
    script = f"mount --bind '{runs}' '{runs}' && mount -o remount,bind,ro '{runs}' && exec {quoted}"
    return ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script]


@pytest.mark.slow
def test_a_read_only_runs_folder_is_a_one_line_error_and_stays_readable(tmp_path, rag_bench, clean):
    runs = tmp_path / "runs"
    runs.mkdir()
    copy_run(clean, runs)
    before = fingerprint(runs)
    attempts = [
        [*SMOKE_RUN, "--runs-dir", runs],
        ["runs", "--runs-dir", runs, "--format", "csv"],
        ["rm", clean.run_id, "--yes", "--runs-dir", runs],
    ]
    if os.geteuid() != 0:
        runs.chmod(0o555)
        try:
            results = [rag_bench(*args) for args in attempts]
        finally:
            runs.chmod(0o755)
        failed, listed, removed = results
        error, listing, refused = failed.stderr, listed.stdout, removed.stderr
        codes = (failed.exit_code, listed.exit_code, removed.exit_code)
    else:  # root writes through permission bits: use a read-only mount instead
        commands = [_read_only_command(runs, args) for args in attempts]
        if commands[0] is None:
            pytest.skip("running as root without user namespaces: cannot make a folder read-only")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_BENCH_")}
        env["RAG_BENCH_CACHE_DIR"] = str(tmp_path / "cache")
        done = [subprocess.run(c, capture_output=True, text=True, env=env) for c in commands]
        error, listing, refused = done[0].stderr, done[1].stdout, done[2].stderr
        codes = (done[0].returncode, done[1].returncode, done[2].returncode)
    assert codes == (2, 0, 2), error + refused
    lines = error.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in error
    assert lines[0].startswith(f"error: cannot write to the runs folder {runs}: ")
    reason = lines[0].removeprefix(f"error: cannot write to the runs folder {runs}: ")
    assert reason.split(" (fix")[0] in ("Read-only file system", "Permission denied")
    assert lines[0].endswith("(fix: pass a writable --runs-dir)")
    assert clean.run_id in listing  # reading a read-only folder works
    [line] = refused.strip().splitlines()  # and removing from it is one line
    assert line.startswith(f"error: could not remove run {clean.run_id} from {runs}: ")
    assert fingerprint(runs) == before


def test_an_uncreatable_runs_folder_is_a_one_line_error(tmp_path, rag_bench):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert_one_line_error(
        rag_bench(*SMOKE_RUN, "--runs-dir", blocker / "runs"),
        f"cannot create the runs folder {blocker / 'runs'}",
        "pass a writable --runs-dir",
    )


# --- a run with a missing Parquet file -----------------------------------------------------------


def test_a_run_missing_a_parquet_file_is_reported_and_the_others_stay_usable(
    tmp_path, rag_bench, clean
):
    runs = tmp_path / "runs"
    copy_run(clean, runs)
    broken = "20000101-000000-baseline-beef"
    table_file(copy_run(clean, runs, broken), "retrieved").unlink()
    listed = rag_bench("runs", "--runs-dir", runs, "--format", "json")
    assert listed.exit_code == 0
    rows = {row["run_id"]: row for row in json.loads(listed.stdout)}
    assert rows[clean.run_id]["status"] == "complete" and rows[clean.run_id]["ndcg@10"] > 0
    assert rows[broken]["status"].startswith(f"unreadable: run {broken} is unreadable")
    assert f"retrieved/variant=baseline/run_id={broken}/part-0.parquet" in rows[broken]["status"]
    [warning] = listed.stderr.strip().splitlines()
    assert warning.startswith(f"warning: skipped: run {broken} is unreadable")
    assert f"retrieved/variant=baseline/run_id={broken}" in warning
    sql = rag_bench(
        "sql", "SELECT DISTINCT run_id FROM retrieved", "--runs-dir", runs, "--format", "csv"
    )
    assert sql.stdout.split() == ["run_id", clean.run_id]
    assert_one_line_error(rag_bench("show", broken, "--runs-dir", runs), broken, "unreadable")
    assert_one_line_error(
        rag_bench("compare", clean.run_id, broken, "--runs-dir", runs), broken, "unreadable"
    )
    assert rag_bench("show", clean.run_id, "--runs-dir", runs).exit_code == 0


# --- the cache ------------------------------------------------------------------------------------

BUILDER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from rag_bench.io.cache import Cache

    root, role = Path(sys.argv[1]), sys.argv[2]
    if role == "reader":  # whenever the entry is visible, it is whole
        deadline, seen = time.monotonic() + 3, 0
        while time.monotonic() < deadline:
            for entry in root.glob("index-*"):
                names = sorted(p.name for p in entry.iterdir())
                assert names == [".complete", "part1", "part2"], names
                assert (entry / "part2").read_text() == "two", "half written"
                seen += 1
            time.sleep(0.002)
        print(json.dumps({"seen": seen}))
        sys.exit(0)

    def save(value, folder):
        (folder / "part1").write_text("one")
        time.sleep(0.5)  # both builders are inside save at the same time
        (folder / "part2").write_text("two")

    def load(folder):
        return (folder / "part1").read_text() + (folder / "part2").read_text()

    Path(sys.argv[3]).touch()
    while len(list(Path(sys.argv[3]).parent.glob("ready-*"))) < 2:
        time.sleep(0.001)
    value, hit = Cache(root).fetch("index", {"k": 1}, lambda: "built", save, load)
    print(json.dumps({"value": value, "hit": hit}))
    """
)


@pytest.mark.signals
def test_two_processes_build_one_cache_entry_and_readers_never_see_half_of_it(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()

    def spawn(*args):
        return subprocess.Popen(
            [sys.executable, "-c", BUILDER, str(root), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    reader = spawn("reader")
    builders = [spawn("builder", tmp_path / f"ready-{i}") for i in range(2)]
    outcomes = [p.communicate(timeout=60) for p in (*builders, reader)]
    assert [p.returncode for p in (*builders, reader)] == [0, 0, 0], outcomes
    built = [json.loads(out) for out, _ in outcomes[:2]]
    assert built == [{"value": "built", "hit": False}] * 2  # neither waited, both succeeded
    assert json.loads(outcomes[2][0])["seen"] > 0
    assert [p.name for p in root.iterdir()] == [next(root.glob("index-*")).name]  # no leftovers
    value, hit = Cache(root).fetch("index", {"k": 1}, lambda: 1 / 0, None, lambda f: "loaded")
    assert (value, hit) == ("loaded", True)


@pytest.mark.slow
def test_a_damaged_cache_entry_is_rebuilt(tmp_path, clean):
    cache = tmp_path / "cache"
    first = run_variant("baseline", SHIPPED, selection=SMOKE, runs_dir=tmp_path, cache_dir=cache)
    entries = sorted(cache.iterdir())  # the BM25 index and the generator's term weights
    assert [p.name.split("-")[0] for p in entries] == ["bm25", "prepared"]
    for entry in entries:
        for path in entry.iterdir():
            if path.name != ".complete":
                path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    second = run_variant("baseline", SHIPPED, selection=SMOKE, runs_dir=tmp_path, cache_dir=cache)
    third = run_variant("baseline", SHIPPED, selection=SMOKE, runs_dir=tmp_path, cache_dir=cache)
    for slot in ("bm25", "generator"):
        cached = [r.manifest["index"]["cached"][slot] for r in (first, second, third)]
        assert cached == [False, False, True], slot
    for result in (first, second, third):
        assert_same_traces(result.location, clean)
    assert sorted(p.name.split("-")[0] for p in cache.iterdir()) == ["bm25", "prepared"]


@component("encoder", "counting", description="test encoder")
class CountingEncoder(Encoder):
    """Embeds each text on its own (a hash of its words); counts calls; can press Ctrl-C."""

    capabilities = frozenset({Capability.INDEPENDENT_EMBEDDINGS})
    calls: list[int] = []

    def __init__(self, batch_size: int = 4, stop_after: int = 0):
        self.batch_size, self.stop_after = batch_size, stop_after

    def cache_material(self) -> dict:
        return {"component": "counting"}

    def encode(self, texts) -> np.ndarray:
        out = np.zeros((len(texts), 8))
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 8] += 1
        return out

    def fit(self, texts, analyzer) -> np.ndarray:
        CountingEncoder.calls.append(len(texts))
        if self.stop_after and len(CountingEncoder.calls) > self.stop_after:
            raise KeyboardInterrupt
        return self.encode(texts)

    def save(self, folder: Path) -> None:
        pass

    def load(self, folder: Path, analyzer) -> None:
        pass


def test_embedding_a_big_corpus_is_checkpointed_block_by_block(tmp_path, monkeypatch):
    monkeypatch.setitem(registry().components, ("encoder", "counting"), CountingEncoder.spec)
    monkeypatch.setattr(compose, "EMBED_BLOCK", 98)  # rounded up to whole batches of 4: 100
    monkeypatch.setattr(compose, "EMBED_BLOCKS", 1)  # blocks of EMBED_BLOCK, however few
    monkeypatch.setattr(CountingEncoder, "calls", [])
    data = load_dataset(SHIPPED)
    cache = Cache(tmp_path / "cache")
    variant = registry().variant("hybrid")

    def pipeline(stop_after: int) -> Pipeline:
        overrides = ["encoder.name=counting", f"encoder.stop_after={stop_after}"]
        return Pipeline(resolve(variant, overrides), cache)

    with pytest.raises(KeyboardInterrupt):
        pipeline(stop_after=3).index(data)  # Ctrl-C while embedding the fourth block
    [partial] = [p for p in cache.root.iterdir() if p.name.startswith(".partial-dense-")]
    assert sorted(p.name for p in partial.iterdir()) == [f"block-{i:06d}.npy" for i in range(3)]

    CountingEncoder.calls.clear()
    resumed = pipeline(stop_after=0)
    report = resumed.index(data)
    n = report.n_chunks
    assert CountingEncoder.calls == [100] * (n // 100 - 3) + [n % 100]  # only what was missing
    dense = resumed.retrievers[-1]
    texts = [c.index_text for c in resumed.chunks]
    np.testing.assert_array_equal(dense.embeddings, CountingEncoder().encode(texts))
    assert not partial.exists()  # the finished entry replaces the blocks
    assert any(p.name.startswith("dense-") for p in cache.root.iterdir())
    # search reads the stored entry, memory-mapped, in the encoder's dtype; so does a new run
    assert isinstance(dense.embeddings, np.memmap) and dense.embeddings.dtype == np.float64
    CountingEncoder.calls.clear()
    again = Pipeline(resolve(variant, ["encoder.name=counting"]), Cache(cache.root))
    again.index(data)
    assert CountingEncoder.calls == [] and isinstance(again.retrievers[-1].embeddings, np.memmap)
    np.testing.assert_array_equal(again.retrievers[-1].embeddings, dense.embeddings)
