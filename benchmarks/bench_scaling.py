"""Scaling with workers: queries per second of ``rag-bench run`` with 1 and 2 workers, for the
local executor (threads) and Ray (tasks in worker processes), on this machine.

The dataset is generated (``corpora.py``: 10,000 documents of ~60 words, 320 queries, i.e. 10
blocks of 32; with ``--quick`` 5,000 and 64), one document per chunk (``--set
chunker.name=none``), variant ``baseline``. Two generators:

- ``delayed`` (``--set generator.name=delayed --set generator.delay_ms=50``; 20 ms with
  ``--quick``): the extractive answer after a fixed wait per query, a stand-in for a model
  behind an endpoint. Here the work is waiting, and concurrency is what counts.
- ``extractive`` (not in ``--quick``): no wait; all the work is computing (BM25, generation,
  judging), so what 2 workers gain is bounded by the 2 cores (and, for threads, by the GIL).

Every configuration runs in this process through the library (``run_variant`` with an
executor), after a warm-up run that fills the index cache, so the times are of a warm run:
building the pipeline, loading the cached index, ranking, answering, evaluating and storing.
Ray's start-up (``ray.init`` of a local instance with as many CPUs as workers) is measured
apart and not counted. Each configuration runs ``--repeat`` times (2; quick: 1); the table
shows medians,
queries per second, and the speed-up over the same executor with 1 worker. The benchmark also
checks that every configuration stored the same metric values.

    python benchmarks/bench_scaling.py --quick
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import common
import corpora

from rag_bench.experiment.runner import run_variant
from rag_bench.pipeline.executors import make_executor

DELAY_MS, QUICK_DELAY_MS = 50, 20
DOCS, QUERIES = 10_000, 320
QUICK_DOCS, QUICK_QUERIES = 5_000, 64
CONFIGS = (("local", 1), ("local", 2), ("ray", 1), ("ray", 2))


def generators(quick: bool) -> dict[str, tuple[str, ...]]:
    delay = QUICK_DELAY_MS if quick else DELAY_MS
    delayed = ("generator.name=delayed", f"generator.delay_ms={delay}")
    return {"delayed": delayed} if quick else {"delayed": delayed, "extractive": ()}


PACKAGES = ("ray", "bm25s", "numpy")


def dataset(quick: bool, seed: int) -> Path:
    params = corpora.Params(
        seed=seed,
        docs=QUICK_DOCS if quick else DOCS,
        queries=QUICK_QUERIES if quick else QUERIES,
        mean_words=60,
    )
    return corpora.ensure_beir(params)


def timed_run(data: Path, generator: tuple[str, ...], executor, runs: Path, cache: Path) -> dict:
    overrides = ("chunker.name=none", *generator)
    started = time.perf_counter()
    result = run_variant(
        "baseline", data, overrides=overrides, runs_dir=runs, cache_dir=cache, executor=executor
    )
    wall = time.perf_counter() - started
    metrics = result.metrics.drop(columns="run_id").reset_index(drop=True)
    return {"wall_s": wall, "n_queries": len(result.queries), "metrics": metrics}


def benchmark(data: Path, repeat: int, quick: bool) -> dict:
    work = Path(tempfile.mkdtemp(prefix="rag-bench-scaling-"))
    runs, cache = work / "runs", work / "cache"
    rows: list[dict] = []
    reference: dict = {}  # generator -> the metrics of its first run
    identical = True
    try:
        print("warm-up (fills the index cache) ...", flush=True)
        timed_run(data, (), make_executor("local"), runs, cache)
        for name, workers in CONFIGS:
            started = time.perf_counter()
            executor = make_executor(name, workers=workers)
            executor.start()
            startup = time.perf_counter() - started
            try:
                for generator, overrides in generators(quick).items():
                    measured = []
                    for i in range(repeat):
                        print(f"{name} × {workers}, {generator}: run {i + 1}/{repeat}", flush=True)
                        measured.append(timed_run(data, overrides, executor, runs, cache))
                    first = reference.setdefault(generator, measured[0]["metrics"])
                    identical &= all(m["metrics"].equals(first) for m in measured)
                    wall = common.median_of(measured, "wall_s")
                    rows.append(
                        {
                            "executor": name,
                            "workers": workers,
                            "generator": generator,
                            "startup_s": startup,
                            "wall_s": wall,
                            "n_queries": measured[0]["n_queries"],
                            "qps": measured[0]["n_queries"] / wall,
                            "runs_s": [m["wall_s"] for m in measured],
                        }
                    )
            finally:
                executor.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for row in rows:
        one = next(
            r
            for r in rows
            if r["executor"] == row["executor"]
            and r["generator"] == row["generator"]
            and r["workers"] == 1
        )
        local = next(
            r
            for r in rows
            if r["executor"] == "local" and r["generator"] == row["generator"] and r["workers"] == 1
        )
        row["speedup"] = one["wall_s"] / row["wall_s"]
        row["vs_local_1"] = local["wall_s"] / row["wall_s"]
    return {"rows": rows, "identical_metrics": identical}


COLUMNS = [
    ("generator", "generator", "s"),
    ("executor", "executor", "s"),
    ("workers", "workers", "d"),
    ("n_queries", "queries", "d"),
    ("wall_s", "wall s", ".2f"),
    ("qps", "queries/s", ".1f"),
    ("speedup", "vs 1 worker", "x"),
    ("vs_local_1", "vs local×1", "x"),
    ("startup_s", "start-up s", ".2f"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_DOCS:,} documents")
    parser.add_argument("--repeat", type=int, default=None, help="runs per case (2; quick: 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="results file (default: results/scaling*.json)")
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 2)
    load_before = common.load_average()
    started = time.perf_counter()
    data = dataset(args.quick, args.seed)
    results = benchmark(data, repeat, args.quick)
    results |= {
        "benchmark": "scaling",
        "quick": args.quick,
        "repeat": repeat,
        "delay_ms": QUICK_DELAY_MS if args.quick else DELAY_MS,
        "dataset": str(data),
        "seconds": time.perf_counter() - started,
        "load_average_1min": {"before": load_before, "after": common.load_average()},
        "machine": common.machine(PACKAGES),
        "source": common.source(),
    }
    print("\n" + common.describe(results))
    print(
        f"medians of {repeat} warm runs of baseline; delayed = {results['delay_ms']} ms per "
        "generated answer; start-up (Ray's) not counted in wall s\n"
    )
    print(common.table(results["rows"], COLUMNS))
    print(f"\nsame metric values in every configuration: {results['identical_metrics']}")
    name = "scaling-quick.json" if args.quick else "scaling.json"
    common.write_results(results, args.json or common.RESULTS_DIR / name)
    return 0 if results["identical_metrics"] else 1


if __name__ == "__main__":
    sys.exit(main())
