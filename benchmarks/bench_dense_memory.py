"""Peak memory of a dense run's corpus embeddings: building them block by block, then searching
them memory-mapped from the cache, against holding them in memory as before.

Each step runs in a child process whose peak resident memory (``ru_maxrss``) is read when it
ends; an idle child (the same imports, nothing done) is subtracted, leaving what the step
itself adds. The embeddings are seeded unit vectors of 384 dimensions in float32 (MiniLM's
size; no encoder is needed to measure what holding and searching them costs), at two corpus
sizes, so the growth per million chunks is measured, not assumed:

- ``build``: the blocks (1,024 rows each) filled into one array by the pipeline's own
  ``_Rows``, as ``Pipeline`` does when it embeds a corpus, then stored by ``DenseIndex.save``;
  ``build-stacked``, the former way: every block kept in a list, then ``np.vstack``;
- ``search-mapped``: ``DenseIndex.map_embeddings`` (what a run does with a cached index), then
  ``cosine_search`` of 1,000 seeded queries, top 100; ``search-loaded``: the same search over
  the embeddings read whole into memory (``np.load``), as before.

The search's transient score matrix (``QUERY_BATCH`` queries × n chunks) is counted in both.
The peak counts mapped pages the search has read too; what differs is their kind, so each child
also reports, at its end, its anonymous and its file-backed resident memory: the embeddings of
``search-loaded`` are anonymous (they must fit in memory, beside everything else), those of
``search-mapped`` file-backed (the kernel pages them out under pressure and in on demand).

    python benchmarks/bench_dense_memory.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import (
    RESULTS_DIR,
    child_result,
    describe,
    emit,
    machine,
    python_child,
    run_measured,
    source,
    write_results,
)

DIMS, BLOCK, QUERIES, DEPTH = 384, 1024, 1000, 100
SIZES = (100_000, 250_000)
QUICK_SIZES = (20_000, 50_000)
STEPS = ("idle", "build", "build-stacked", "search-mapped", "search-loaded")


def seeded_block(number: int, rows: int) -> np.ndarray:
    """Unit vectors of block ``number``, the same whatever else is generated."""
    vectors = np.random.default_rng(number).standard_normal((rows, DIMS), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def spans(n: int) -> list[range]:
    return [range(start, min(start + BLOCK, n)) for start in range(0, n, BLOCK)]


def child(step: str, n: int, folder: Path) -> None:
    from rag_bench.components.dense import EMBEDDINGS, DenseIndex, cosine_search
    from rag_bench.components.minilm import MiniLMEncoder  # noqa: F401  # the same imports
    from rag_bench.pipeline.compose import _Rows

    index = DenseIndex.__new__(DenseIndex)  # the embeddings' holder, without an encoder
    if step in ("build", "build-stacked"):
        if step == "build":
            into = _Rows(n)
            for number, rows in enumerate(spans(n)):
                into.put(list(rows), seeded_block(number, len(rows)))
            index.embeddings = into.rows
        else:
            index.embeddings = np.vstack([seeded_block(i, len(r)) for i, r in enumerate(spans(n))])
        np.save(folder / EMBEDDINGS, index.embeddings, allow_pickle=False)
    elif step.startswith("search"):
        if step == "search-mapped":
            index.map_embeddings(folder)
        else:
            index.embeddings = np.load(folder / EMBEDDINGS)
        queries = seeded_block(10**6, QUERIES)
        hits = cosine_search(queries, index.embeddings, DEPTH)
        assert len(hits) == QUERIES
    emit(resident())


def resident() -> dict[str, float]:
    """This process's resident memory now (MiB): anonymous (its own: only swap can take it
    back) and file-backed (mapped pages the kernel may drop and read again when needed)."""
    status = Path("/proc/self/status").read_text().splitlines()
    found = {}
    for line in status:
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            found[key] = int(value.split()[0]) / 1024  # kB
    return {"anon_mib": found.get("RssAnon", float("nan")), "file_mib": found.get("RssFile", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller corpora")
    parser.add_argument("--child", nargs=3, metavar=("STEP", "N", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        step, n, folder = args.child
        child(step, int(n), Path(folder))
        return
    sizes = QUICK_SIZES if args.quick else SIZES
    load_before = os.getloadavg()[0]
    peaks: dict[str, dict[int, float]] = {step: {} for step in STEPS}
    held: dict[str, dict[int, dict]] = {step: {} for step in STEPS}
    script = Path(__file__).resolve()
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-dense-memory-") as folder:
            for step in STEPS:
                done = run_measured(python_child(script, "--child", step, str(n), folder))
                if done["returncode"] != 0:
                    sys.exit(f"{step} at {n} chunks failed:\n{done['output'][-2000:]}")
                peaks[step][n] = done["peak_mib"]
                held[step][n] = child_result(done, step)
    small, large = sizes
    added = {step: {n: peaks[step][n] - peaks["idle"][n] for n in sizes} for step in STEPS[1:]}
    per_million = {
        step: (added[step][large] - added[step][small]) / (large - small) * 1e6
        for step in STEPS[1:]
    }
    matrix_mib = DIMS * 4 * 1e6 / 2**20
    results = {
        "machine": machine(),
        "source": source(),
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "dims": DIMS,
        "dtype": "float32",
        "sizes": list(sizes),
        "queries": QUERIES,
        "peak_mib": {step: {str(n): v for n, v in by.items()} for step, by in peaks.items()},
        "at_end_mib": {step: {str(n): v for n, v in by.items()} for step, by in held.items()},
        "added_mib": {step: {str(n): v for n, v in by.items()} for step, by in added.items()},
        "mib_per_million_chunks": per_million,
        "float32_matrix_mib_per_million_chunks": matrix_mib,
    }
    print(describe(results))
    print(f"peak memory added by each step (MiB; idle child subtracted), {DIMS} dims, float32")
    print(f"{'step':15}" + "".join(f"{n:>12,}" for n in sizes) + f"{'per 10^6':>12}")
    for step in STEPS[1:]:
        row = "".join(f"{added[step][n]:12.0f}" for n in sizes)
        print(f"{step:15}{row}{per_million[step]:12.0f}")
    print(f"(the float32 matrix itself: {matrix_mib:.0f} MiB per million chunks)")
    print(f"resident at the end of each step, {large:,} chunks (MiB): anonymous / file-backed")
    for step in STEPS:
        end = held[step][large]
        print(f"{step:15}{end['anon_mib']:12.0f}{end['file_mib']:12.0f}")
    name = "dense-memory-quick.json" if args.quick else "dense-memory.json"
    write_results(results, RESULTS_DIR / name)


if __name__ == "__main__":
    main()
