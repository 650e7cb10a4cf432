"""Do two versions of rag-bench store the same traces? A fingerprint of every trace, bit for bit.

Runs a fixed set of commands through the installed ``rag-bench`` (every built-in variant on both
shipped datasets, one run with two workers, one run killed while answering and resumed), then
hashes each stored table with the columns that legitimately differ between two runs left out
(run id, timestamps, latencies, durations). ``--write FILE`` keeps the fingerprints; ``--check
FILE`` runs the same commands with the code at hand and reports every table that differs.

Used to prove that a refactoring changed no number::

    python benchmarks/same_traces.py --write /tmp/before.json    # on the old commit
    python benchmarks/same_traces.py --check /tmp/before.json    # on the new one
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "rag-bench"
# the shipped datasets: inside the package since the redesign, at the top before it
SHIPPED = ROOT / "data"
DATASETS = {"kestrel": SHIPPED / "kestrel-kb", "lumen": SHIPPED / "lumen-mall-zh"}
VARIANTS = ("baseline", "hybrid", "hybrid_rerank", "recorded")
# columns that differ between two runs of the same inputs by design
VOLATILE = ("run_id", "variant", "created_at", "duration_s")


def _volatile(column: str) -> bool:
    return column in VOLATILE or column.startswith("latency") or column.endswith("_ms")


def table_fingerprint(folder: Path) -> str:
    """Hash of one run's table (all its part files), rows sorted, volatile columns dropped."""
    parts = sorted(folder.glob("*.parquet"))
    table = pa.concat_tables(pq.read_table(p) for p in parts)
    keep = [c for c in table.column_names if not _volatile(c)]
    rows = table.select(keep).to_pylist()
    # floats by repr: the shortest string that round-trips, so equal strings mean equal bits
    lines = sorted(json.dumps(row, sort_keys=True, default=repr) for row in rows)
    digest = hashlib.sha256()
    digest.update(json.dumps(keep).encode())
    for line in lines:
        digest.update(line.encode() + b"\n")
    return digest.hexdigest()


def manifest_fingerprint(manifest: dict) -> str:
    volatile = {"run_id", "created_at", "duration_s", "git_commit", "rag_bench_version"}
    volatile |= {"packages", "status", "usage", "timings", "cache", "executor", "workers"}
    kept = {k: v for k, v in manifest.items() if k not in volatile}
    dataset = dict(kept.get("dataset") or {})
    dataset.pop("path", None)
    kept["dataset"] = dataset
    index = dict(kept.get("index") or {})
    index.pop("seconds", None)  # how long indexing took
    kept["index"] = index
    if "resumed" in kept:
        kept["resumed"] = {k: v for k, v in kept["resumed"].items() if k != "at"}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def fingerprints(runs: Path) -> dict[str, dict[str, str]]:
    """{run label: {table: hash}} for every committed run of a runs folder."""
    out: dict[str, dict[str, str]] = {}
    for manifest_file in sorted((runs / "_manifests").glob("*.json")):
        manifest = json.loads(manifest_file.read_text())
        run_id = manifest["run_id"]
        label = manifest_file.parent.parent.name + ":" + manifest["variant"]
        tables = {}
        for table in ("queries", "metrics", "retrieved", "claims"):
            hits = list(runs.glob(f"{table}/*/run_id={run_id}"))
            tables[table] = table_fingerprint(hits[0]) if hits else "absent"
        tables["manifest"] = manifest_fingerprint(manifest)
        out[label] = tables
    return out


def rag_bench(*args: str, env: dict | None = None) -> None:
    subprocess.run([str(BIN), *args], check=True, env=env, stdout=subprocess.DEVNULL)


def interrupted_then_resumed(runs: Path, env: dict) -> None:
    """hybrid_rerank on kestrel-kb, SIGINT while answering, then --resume."""
    paused = {**env, "RAG_BENCH_TEST_PAUSE": "answer:30"}
    args = [str(BIN), "run", "--variant", "hybrid_rerank", "--runs-dir", str(runs)]
    # Ctrl-C's default handler in the child: a shell that started this script in the
    # background ignores SIGINT, and an ignored SIGINT would pass down and never interrupt
    child = subprocess.Popen(
        args,
        env=paused,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    for line in child.stderr:
        if "paused at answer" in line:
            break
    child.send_signal(signal.SIGINT)
    child.wait(timeout=60)
    partial = next(runs.glob(".partial-*"))
    run_id = partial.name.removeprefix(".partial-")
    rag_bench("run", "--resume", run_id, "--runs-dir", str(runs), env=env)


def collect(work: Path) -> dict[str, dict[str, str]]:
    env = {**os.environ, "RAG_BENCH_CACHE_DIR": str(work / "cache")}
    for name, dataset in DATASETS.items():
        runs = work / name
        for variant in VARIANTS:
            rag_bench(
                "run",
                "--variant",
                variant,
                "--dataset",
                str(dataset),
                "--runs-dir",
                str(runs),
                env=env,
            )
    workers = work / "workers"
    rag_bench(
        "run", "--variant", "hybrid_rerank", "--workers", "2", "--runs-dir", str(workers), env=env
    )
    resumed = work / "resumed"
    interrupted_then_resumed(resumed, env)
    result: dict[str, dict[str, str]] = {}
    for folder in ("kestrel", "lumen", "workers", "resumed"):
        result.update(fingerprints(work / folder))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="store the fingerprints in this file")
    group.add_argument("--check", type=Path, help="compare with fingerprints stored earlier")
    args = parser.parse_args()
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="same-traces-"))
    try:
        found = collect(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.write:
        args.write.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"{len(found)} runs fingerprinted in {time.monotonic() - started:.0f} s")
        return 0
    expected = json.loads(args.check.read_text())
    differ = [
        f"{run} {table}"
        for run in sorted(set(expected) | set(found))
        for table in sorted(set(expected.get(run, {})) | set(found.get(run, {})))
        if expected.get(run, {}).get(table) != found.get(run, {}).get(table)
    ]
    for line in differ:
        print("differs:", line)
    tables = sum(len(t) for t in expected.values())
    print(
        f"{tables - len(differ)} of {tables} tables identical "
        f"({len(expected)} runs, {time.monotonic() - started:.0f} s)"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
