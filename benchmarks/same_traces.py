"""Do two versions of rag-bench store the same traces? A fingerprint of every trace, bit for bit.

Runs a fixed set of commands through the installed ``rag-bench`` (every built-in variant on both
shipped datasets, one run with two workers, one run killed while answering and resumed), then
hashes each stored table with the columns that legitimately differ between two runs left out
(run id, timestamps, latencies, durations). ``--write FILE`` keeps the fingerprints; ``--check
FILE`` runs the same commands with the code at hand and reports every table that differs.

Used to prove that a refactoring changed no number::

    python benchmarks/same_traces.py --write /tmp/before.json    # on the old commit
    python benchmarks/same_traces.py --check /tmp/before.json    # on the new one

``--beir SOURCE`` instead runs a hybrid with the real ``minilm`` encoder on a public BEIR corpus
(a BEIR folder, zip or bare git clone of the public ArguAna copy ``beir_table.py`` names) once
per executor configuration: one local worker, two local workers
(threads), and a local Ray instance of two CPUs, each with an empty cache of its own, so each
embeds the whole corpus, split into blocks over its workers. Every table of the three runs must
be identical. ``--sample N`` runs a seeded subset of the queries (the corpus is always whole);
``--max-seq-length`` truncates texts (fewer tokens, the same splitting). The result goes to
``benchmarks/results/same-traces-beir.json``::

    python benchmarks/same_traces.py --beir ~/arguana.zip --sample 100
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


# (executor, workers) of the runs that must store the same traces on a BEIR corpus
CONFIGURATIONS = (("local", 1), ("local", 2), ("ray", 2))


def beir_runs(folder: Path, work: Path, sample: int, max_seq_length: int) -> dict:
    """The hybrid with minilm on ``folder`` under every configuration; fingerprints, times."""
    found, seconds = {}, {}
    for executor, workers in CONFIGURATIONS:
        name = f"{executor}-{workers}"
        env = {**os.environ, "RAG_BENCH_CACHE_DIR": str(work / f"cache-{name}")}
        started = time.monotonic()
        rag_bench(
            "run", "--variant", "hybrid", "--dataset", str(folder),
            "--runs-dir", str(work / name), "--sample", str(sample), "--seed", "0",
            "--executor", executor, "--workers", str(workers),
            "--set", "encoder.name=minilm", "--set", "chunker.name=none",
            "--set", f"encoder.max_seq_length={max_seq_length}",
            env=env,
        )  # fmt: skip
        seconds[name] = time.monotonic() - started
        [(_, tables)] = fingerprints(work / name).items()
        found[name] = tables
        print(f"{name}: {seconds[name]:.0f} s", flush=True)
    return {"fingerprints": found, "wall_s": seconds}


def compare_on_beir(args) -> int:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from beir_table import find_dataset
    from common import RESULTS_DIR, machine, source, write_results

    work = Path(tempfile.mkdtemp(prefix="same-traces-beir-"))
    try:
        bare = (Path(args.beir) / "HEAD").is_file()  # a clone of beir_table's known copy
        named = (None, args.beir) if bare else (args.beir, None)
        folder = find_dataset(*named, work / "datasets")
        load_before = os.getloadavg()[0]
        documents = len((folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines())
        runs = beir_runs(folder, work, args.sample, args.max_seq_length)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    first, *others = runs["fingerprints"].values()
    same = all(other == first for other in others)
    results = {
        "machine": machine(("torch", "sentence-transformers", "ray")),
        "source": source(),
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "dataset": folder.name,
        "documents": documents,
        "sample": args.sample,
        "max_seq_length": args.max_seq_length,
        "configurations": [f"{e}-{w}" for e, w in CONFIGURATIONS],
        "identical": same,
        **runs,
    }
    write_results(results, RESULTS_DIR / "same-traces-beir.json")
    print("identical traces" if same else "TRACES DIFFER", "across", results["configurations"])
    return 0 if same else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="store the fingerprints in this file")
    group.add_argument("--check", type=Path, help="compare with fingerprints stored earlier")
    group.add_argument("--beir", help="a public BEIR corpus: 1 vs 2 workers, local vs Ray")
    parser.add_argument("--sample", type=int, default=100, help="--beir: queries run")
    parser.add_argument("--max-seq-length", type=int, default=256, help="--beir: tokens")
    args = parser.parse_args()
    if args.beir:
        return compare_on_beir(args)
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
