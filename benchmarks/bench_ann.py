"""Approximate search at scale: rag-bench's HNSW index beside faiss (and hnswlib) called directly,
and exact search, on 10^5 and 10^6 chunk embeddings.

The embeddings are generated from a seed (no encoder): 384 dimensions, clustered like real
sentence embeddings (one centre per 1,000 chunks, each chunk its centre plus Gaussian noise,
unit length, float32), kept as a ``.npy`` under ``benchmarks/data/`` and memory-mapped by every
child. The queries are drawn the same way (another seed).

Each tool runs in its own subprocess, which times the build and the search of every query for
the top 100 (CPU time, all threads, and wall time); the parent reads the child's peak RSS and
computes recall@100 against rag-bench's exact search (the reference). The HNSW tools get the
same parameters (M, efConstruction, efSearch, one thread): rag-bench's ratios to faiss's are
the cost of its own layer (the seeded build, the exact re-scoring of the candidates).

    python benchmarks/bench_ann.py --quick        # 20,000 chunks, 200 queries
    python benchmarks/bench_ann.py                # 10^5 and 10^6 chunks
    python benchmarks/bench_ann.py --sizes 100000
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import common
import numpy as np

DIMS, PER_CLUSTER, NOISE = 384, 1_000, 0.8
DEPTH = 100
M, EF_CONSTRUCTION, EF_SEARCH, SEED = 16, 100, 200, 0  # rag-bench's hnsw defaults
SIZES = (100_000, 1_000_000)
QUERIES = {100_000: 1_000, 1_000_000: 200}  # fewer at 10^6: exact search is the slow part
QUICK_SIZES, QUICK_QUERIES = (20_000,), 200
REFERENCE = "rag-bench exact"
BLOCK = 50_000  # rows generated at a time
DATA = common.HERE / "data" / "ann"
RESULTS = common.RESULTS_DIR / "ann.json"


# --- the data --------------------------------------------------------------------------------


def clustered(n: int, seed: int, out: np.ndarray) -> None:
    """Fill ``out`` (n x DIMS) with unit vectors around n / PER_CLUSTER seeded centres."""
    centres = np.random.default_rng(seed).standard_normal((max(1, n // PER_CLUSTER), DIMS))
    for start in range(0, n, BLOCK):
        rng = np.random.default_rng([seed, start])
        rows = min(BLOCK, n - start)
        block = centres[rng.integers(0, len(centres), rows)]
        block = block + NOISE * rng.standard_normal((rows, DIMS))
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + rows] = block.astype(np.float32)


def ensure(n: int, queries: int, seed: int = 0, folder: Path = DATA) -> tuple[Path, Path]:
    """The chunk and query embeddings for these parameters, generated unless already there.
    The queries share the chunks' centres (same ``n``, same seed) with their own noise."""
    folder.mkdir(parents=True, exist_ok=True)
    chunks = folder / f"chunks-{n}-{DIMS}-{seed}.npy"
    asked = folder / f"queries-{n}-{queries}-{DIMS}-{seed}.npy"
    if not chunks.exists():
        partial = chunks.with_suffix(".partial.npy")
        matrix = np.lib.format.open_memmap(partial, "w+", np.float32, (n, DIMS))
        clustered(n, seed, matrix)
        matrix.flush()
        del matrix
        partial.rename(chunks)
    if not asked.exists():
        centres = np.random.default_rng(seed).standard_normal((max(1, n // PER_CLUSTER), DIMS))
        rng = np.random.default_rng([seed, 1, queries])  # three words: apart from the chunks'
        block = centres[rng.integers(0, len(centres), queries)]
        block = block + NOISE * rng.standard_normal((queries, DIMS))
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        np.save(asked, block.astype(np.float32))
    return chunks, asked


# --- the tools (each in a child) --------------------------------------------------------------


def rag_bench_hnsw(chunks: np.ndarray, queries: np.ndarray, clock: dict) -> np.ndarray:
    from rag_bench.components.ann import HNSWIndex

    graph = HNSWIndex(M, EF_CONSTRUCTION, EF_SEARCH, SEED)
    with stage(clock, "build"):
        graph.build(chunks)
    with stage(clock, "search"):
        hits = graph.search(queries.astype(np.float64), chunks, DEPTH)
    return ids_of(hits)


def rag_bench_exact(chunks: np.ndarray, queries: np.ndarray, clock: dict) -> np.ndarray:
    from rag_bench.components.dense import cosine_search

    with stage(clock, "build"):  # what exact search holds: the embeddings as float64
        matrix = np.asarray(chunks, dtype=np.float64)
    with stage(clock, "search"):
        hits = cosine_search(queries.astype(np.float64), matrix, DEPTH)
    return ids_of(hits)


def faiss_hnsw(chunks: np.ndarray, queries: np.ndarray, clock: dict) -> np.ndarray:
    import faiss

    faiss.omp_set_num_threads(1)
    index = faiss.IndexHNSWFlat(DIMS, M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EF_CONSTRUCTION
    with stage(clock, "build"):
        index.add(np.ascontiguousarray(chunks))
    index.hnsw.efSearch = EF_SEARCH
    with stage(clock, "search"):
        _, found = index.search(queries, DEPTH)
    return found


def faiss_exact(chunks: np.ndarray, queries: np.ndarray, clock: dict) -> np.ndarray:
    import faiss

    faiss.omp_set_num_threads(1)
    index = faiss.IndexFlatIP(DIMS)
    with stage(clock, "build"):
        index.add(np.ascontiguousarray(chunks))
    with stage(clock, "search"):
        _, found = index.search(queries, DEPTH)
    return found


def hnswlib_hnsw(chunks: np.ndarray, queries: np.ndarray, clock: dict) -> np.ndarray:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=DIMS)
    index.init_index(len(chunks), ef_construction=EF_CONSTRUCTION, M=M, random_seed=SEED)
    index.set_num_threads(1)
    with stage(clock, "build"):
        index.add_items(np.ascontiguousarray(chunks))
    index.set_ef(EF_SEARCH)
    with stage(clock, "search"):
        found, _ = index.knn_query(queries, k=DEPTH)
    return found.astype(np.int64)


TOOLS = {  # name -> (function, module it needs)
    REFERENCE: (rag_bench_exact, "rag_bench"),
    "rag-bench hnsw": (rag_bench_hnsw, "faiss"),
    "faiss hnsw": (faiss_hnsw, "faiss"),
    "hnswlib hnsw": (hnswlib_hnsw, "hnswlib"),
    "faiss exact": (faiss_exact, "faiss"),
}


class stage:
    """``with stage(clock, name):`` CPU (all threads) and wall seconds of the block."""

    def __init__(self, clock: dict, name: str):
        self.clock, self.name = clock, name

    def __enter__(self) -> None:
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.clock[f"{self.name}_cpu_s"] = time.process_time() - self.cpu
        self.clock[f"{self.name}_wall_s"] = time.perf_counter() - self.wall


def ids_of(hits) -> np.ndarray:
    out = np.full((len(hits), DEPTH), -1, dtype=np.int64)
    for row, found in enumerate(hits):
        out[row, : len(found.index)] = found.index
    return out


def child_main(name: str, chunks_path: Path, queries_path: Path, out: Path) -> None:
    chunks = np.load(chunks_path, mmap_mode="r")
    queries = np.load(queries_path)
    clock: dict = {}
    found = TOOLS[name][0](chunks, queries, clock)
    np.save(out, found)
    common.emit(clock)


# --- the parent --------------------------------------------------------------------------------


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean share of each query's exact top DEPTH found by the tool."""
    shares = [
        len(set(t[t >= 0]) & set(f[f >= 0])) / max(1, (t >= 0).sum()) for f, t in zip(found, truth)
    ]
    return float(np.mean(shares))


def measure_size(
    n: int,
    queries: int,
    names: list[str],
    folder: Path = DATA,
    again: bool = True,
    gather: bool = False,
) -> dict:
    """Every tool on ``n`` generated chunks, each in its own child; recall against exact search.

    Each tool's measurement is kept in ``folder`` (its numbers and the ids it found, named by
    the data and the HNSW parameters): unless ``again``, a kept one is reused, so the tools of a
    long size can run in separate processes at once and a last run gathers them (``gather``:
    only those, a tool without one is left out)."""
    print(f"-- {n:,} chunks, {queries:,} queries", flush=True)
    chunks_path, queries_path = ensure(n, queries, folder=folder)
    tag = f"{n}-{queries}-{DIMS}-m{M}-efc{EF_CONSTRUCTION}-efs{EF_SEARCH}-s{SEED}"
    found, rows = {}, []
    for name in names:
        out = folder / f"found-{tag}-{name.replace(' ', '-')}.npy"
        kept = out.with_suffix(".json")
        if gather and not kept.exists():
            print(f"   {name}: not measured yet, left out", flush=True)
            continue
        if again or not kept.exists():
            print(f"   {name} ...", flush=True)
            command = common.python_child(
                Path(__file__).resolve(), "--child", name, str(chunks_path), str(queries_path)
            )
            done = common.child_result(common.run_measured(command + [str(out)]), name)
            kept.write_text(json.dumps(done))
        else:
            print(f"   {name}: measured earlier ({kept.name})", flush=True)
        found[name] = np.load(out)
        rows.append({"tool": name, **json.loads(kept.read_text())})
    truth = found.get(REFERENCE, found.get("faiss exact"))
    for r in rows:
        r["recall@100"] = recall_at(found[r["tool"]], truth) if truth is not None else None
    return derive({"chunks": n, "queries": queries, "rows": rows})


def derive(size: dict) -> dict:
    """Per-query time and each tool's ratios to faiss's HNSW, from the measured numbers."""
    peer = {r["tool"]: r for r in size["rows"]}.get("faiss hnsw")
    for r in size["rows"]:
        r["query_ms"] = 1000 * r["search_cpu_s"] / size["queries"]
        for key in ("build_cpu_s", "search_cpu_s", "peak_mib"):
            # exact search builds nothing (its "build" is holding the matrix as float64)
            mine = float("nan") if key == "build_cpu_s" and r["tool"].endswith("exact") else r[key]
            r[f"{key}/faiss hnsw"] = mine / peer[key] if peer else float("nan")
    return size


COLUMNS = [
    ("tool", "tool", "s"),
    ("build_cpu_s", "build cpu s", ".1f"),
    ("search_cpu_s", "search cpu s", ".2f"),
    ("query_ms", "ms/query", ".2f"),
    ("peak_mib", "peak MiB", ".0f"),
    ("recall@100", "recall@100", ".4f"),
    ("build_cpu_s/faiss hnsw", "build vs faiss", "x"),
    ("search_cpu_s/faiss hnsw", "search vs faiss", "x"),
    ("peak_mib/faiss hnsw", "memory vs faiss", "x"),
]


def report(results: dict) -> None:
    """The tables, as text and as Markdown (for docs/scaling.md)."""
    print("\n" + common.describe(results))
    for size in results["sizes"]:
        derive(size)
        print(f"\n{size['chunks']:,} chunks, {size['queries']:,} queries, top {DEPTH}")
        print(common.table(size["rows"], COLUMNS))
    print("\nMarkdown:\n")
    print("| chunks | " + " | ".join(header for _, header, _ in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for size in results["sizes"]:
        for r in size["rows"]:
            cells = [common._cell(r.get(key), spec) for key, _, spec in COLUMNS]
            print(f"| {size['chunks']:,} | " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 chunks, 200 queries")
    parser.add_argument("--sizes", help="comma-separated chunk counts (default 10^5, 10^6)")
    parser.add_argument(
        "--queries", type=int, help="queries per size (default 1,000; 200 at 10^6 chunks)"
    )
    parser.add_argument("--child", nargs=4, metavar=("TOOL", "CHUNKS", "QUERIES", "OUT"))
    parser.add_argument("--output", type=Path, help="where to write the results JSON")
    parser.add_argument("--tools", help=f"comma-separated subset of: {', '.join(TOOLS)}")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="reuse each tool's measurement kept from an earlier run with the same data and"
        " parameters (run tools of a big size in parallel processes, then gather them)",
    )
    parser.add_argument(
        "--gather", action="store_true", help="only the kept measurements: run nothing"
    )
    parser.add_argument(
        "--report", type=Path, help="print the tables (and Markdown) of a results JSON, no run"
    )
    args = parser.parse_args()
    if args.report:
        report(json.loads(args.report.read_text()))
        return 0
    if args.child:
        name, *paths = args.child
        child_main(name, *map(Path, paths))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    sizes = sizes or list(QUICK_SIZES if args.quick else SIZES)

    def queries(n: int) -> int:
        return args.queries or (QUICK_QUERIES if args.quick else QUERIES.get(n, 1_000))

    wanted = args.tools.split(",") if args.tools else list(TOOLS)
    names = [n for n in wanted if importlib.util.find_spec(TOOLS[n][1])]
    for name in sorted(set(wanted) - set(names)):
        print(f"skipping {name}: {TOOLS[name][1]} is not installed")
    before = common.load_average()
    results: dict = {
        "parameters": {
            "m": M,
            "ef_construction": EF_CONSTRUCTION,
            "ef_search": EF_SEARCH,
            "seed": SEED,
            "depth": DEPTH,
            "dims": DIMS,
            "threads": 1,
        },
        "sizes": [
            measure_size(
                n, queries(n), names, again=not (args.reuse or args.gather), gather=args.gather
            )
            for n in sizes
        ],
        "machine": common.machine(["numpy", "faiss-cpu", "hnswlib"]),
        "source": common.source(),
    }
    results["load_average_1min"] = {"before": before, "after": common.load_average()}
    report(results)
    path = args.output or (common.RESULTS_DIR / ("ann-quick.json" if args.quick else "ann.json"))
    common.write_results(results, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
