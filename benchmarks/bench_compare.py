"""compare's statistics at scale: two runs of 10,000 queries, 10,000 resamples.

Two workloads over a generated store (benchmarks/bench_store.py's generator: five runs of
``--queries`` queries, 20 metrics, four categories):

- ``20 metrics``: ``compare(latest:baseline, latest:hybrid_rerank)`` over all 20 metrics, no
  slices (a randomization test and a bootstrap interval per metric);
- ``3 metrics x 4 slices``: ndcg@10, recall@10 and faithfulness, ``slice_by="category"``.

compare draws the sign flips once for every row (one matrix product per block), one bootstrap
resampling of the shared queries for every slice and metric (the domain bootstrap), and runs
the products on one BLAS thread; the digest (the sum of the p-values) shows the p-values
unchanged.

Each is timed through the library in a fresh process (a warm-up call with 100 resamples, then
``--repeat`` calls), with wall and CPU seconds: CPU seconds stay meaningful on a busy machine.
Peers, on the very difference vectors compare tests (read back from the store): SciPy's
``permutation_test`` (paired, ``permutation_type="samples"``, vectorised) and ``bootstrap``
(percentile) with the same number of resamples. Ratio = peer time / rag-bench's time for the
statistics of the same vectors.

    python benchmarks/bench_compare.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import bench_store
import common

RESULTS = common.RESULTS_DIR / "compare.json"
QUICK_RESULTS = common.RESULTS_DIR / "compare-quick.json"
REFS = ("latest:baseline", "latest:hybrid_rerank")
WORKLOADS = {
    "20 metrics": {"metrics": list(bench_store.STORE_METRICS), "slice_by": None},
    "3 metrics x 4 slices": {
        "metrics": ["ndcg@10", "recall@10", "faithfulness"],
        "slice_by": "category",
    },
}
GOALS_S = {"20 metrics": 3.0, "3 metrics x 4 slices": 1.5}  # issue 30's targets, wall seconds


def _compare(root: Path, workload: dict, resamples: int):
    from rag_bench.analysis.compare import compare

    return compare(root, list(REFS), resamples=resamples, **workload)


def _vectors(root: Path, workload: dict) -> list:
    """The paired difference vectors compare tests for ``workload`` (its own pairing)."""
    import numpy as np

    from rag_bench.runs import open_runs

    store = open_runs(root)
    a, b = (store.resolve(ref) for ref in REFS)
    values = store.metrics([a, b])
    values = values[values["metric"].isin(workload["metrics"])]
    wide = values.pivot_table(index=["metric", "query_id"], columns="run_id", values="value")
    wide = wide.dropna()
    ds = [(group[b] - group[a]).to_numpy() for _, group in wide.groupby(level="metric")]
    return [np.asarray(d, dtype=float) for d in ds]


def child(root: Path, name: str, resamples: int, repeat: int) -> None:
    workload = WORKLOADS[name]
    _compare(root, workload, 100)  # imports, file cache
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = _compare(root, workload, resamples)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    rows = result.rows
    digest = {"rows": len(rows), "p_sum": float(rows["p_value"].sum())}
    out = {"times": walls, "cpu_times": cpus, "digest": digest}
    print(common.RESULT_MARK + json.dumps(out))


def child_peers(root: Path, name: str, resamples: int) -> None:
    import numpy as np
    from scipy import stats as scipy_stats

    from rag_bench.evaluation.stats import bootstrap_cis, randomization_tests

    ds = _vectors(root, WORKLOADS[name])
    timings = {}

    def timed(label, func):
        wall, cpu = time.perf_counter(), time.process_time()
        func()
        timings[label] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}

    def scipy_permutation():
        for d in ds:
            scipy_stats.permutation_test(
                (d,),
                lambda x, axis: np.mean(x, axis=axis),
                permutation_type="samples",
                vectorized=True,
                n_resamples=resamples,
                random_state=0,
            )

    def scipy_bootstrap():
        for d in ds:
            scipy_stats.bootstrap(
                (d,), np.mean, n_resamples=resamples, method="percentile", random_state=0
            )

    timed("rag-bench randomization_tests", lambda: randomization_tests(ds, resamples, 0))
    timed("rag-bench bootstrap_cis", lambda: bootstrap_cis(ds, resamples=resamples, seed=0))
    timed("scipy permutation_test", scipy_permutation)
    timed("scipy bootstrap", scipy_bootstrap)
    out = {"vectors": len(ds), "lengths": sorted({len(d) for d in ds}), "timings": timings}
    print(common.RESULT_MARK + json.dumps(out))


def measure(args, root: Path, *extra: str) -> dict:
    command = [sys.executable, __file__, "--root", str(root), *extra]
    return common.child_result(common.run_measured(command), " ".join(extra))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 queries, 1,000 resamples")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per workload")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated store")
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=[*WORKLOADS, "peers"], help=argparse.SUPPRESS)
    parser.add_argument("--workload", choices=list(WORKLOADS), help=argparse.SUPPRESS)
    parser.add_argument("--resamples", type=int, default=10_000, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.child == "peers":
        child_peers(args.root, args.workload, args.resamples)
        return 0
    if args.child:
        child(args.root, args.child, args.resamples, args.repeat)
        return 0
    queries, resamples = (1_000, 1_000) if args.quick else (10_000, 10_000)
    root = bench_store.ensure_store({"runs": 5, "queries": queries}, args.seed)
    load_before = os.getloadavg()[0]
    results: dict = {"benchmark": "compare", "quick": args.quick, "queries": queries}
    results["resamples"] = resamples
    workloads = {}
    for name in WORKLOADS:
        flags = ("--resamples", str(resamples), "--repeat", str(args.repeat))
        timed = measure(args, root, "--child", name, *flags)
        peers = measure(args, root, "--child", "peers", "--workload", name, *flags[:2])
        timed["median_s"] = statistics.median(timed["times"])
        timed["median_cpu_s"] = statistics.median(timed["cpu_times"])
        ours = sum(
            peers["timings"][k]["cpu_s"]
            for k in ("rag-bench randomization_tests", "rag-bench bootstrap_cis")
        )
        theirs = sum(
            peers["timings"][k]["cpu_s"] for k in ("scipy permutation_test", "scipy bootstrap")
        )
        peers["scipy_over_rag_bench_cpu"] = theirs / ours if ours else None
        workloads[name] = {"compare": timed, "statistics": peers, "goal_s": GOALS_S[name]}
        print(
            f"{name}: compare median {timed['median_s']:.2f} s wall, "
            f"{timed['median_cpu_s']:.2f} s CPU (goal {GOALS_S[name]} s at full size); "
            f"statistics alone: scipy takes {peers['scipy_over_rag_bench_cpu']:.1f}x rag-bench's "
            "CPU time",
            flush=True,
        )
    results["workloads"] = workloads
    results["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    results["machine"] = common.machine(("scipy",))
    results["source"] = common.source()
    print(common.describe(results))
    path = QUICK_RESULTS if args.quick else RESULTS
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
