"""The encoding and memory table of docs/scaling.md, from measured results: what embedding and
holding 10^5 and 10^6 chunks costs with MiniLM on this machine, locally and on Ray.

Reads ``results/same-traces-beir.json`` (the hybrid with minilm on ArguAna's full corpus under
one local worker, two threads and two Ray workers: whole runs, wall seconds),
``results/embed.json`` (``bench_embed.py``: the encoding step alone against sentence-transformers'
process pool) and ``results/dense-memory.json`` (``bench_dense_memory.py``: peak memory per
million chunks). Times for 10^5 and 10^6 chunks are EXTRAPOLATED linearly from the measured
throughput (texts per second); memory is extrapolated from the measured growth per chunk.

    python benchmarks/scale_table.py
"""

from __future__ import annotations

import json

from common import RESULTS_DIR

SIZES = (10**5, 10**6)


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def main() -> None:
    beir = json.loads((RESULTS_DIR / "same-traces-beir.json").read_text())
    embed = json.loads((RESULTS_DIR / "embed.json").read_text())
    memory = json.loads((RESULTS_DIR / "dense-memory.json").read_text())
    texts = beir["documents"]
    print(
        f"Measured: ArguAna, {texts:,} documents embedded whole (max_seq_length "
        f"{beir['max_seq_length']}), a hybrid run of {beir['sample']} queries, wall seconds, "
        f"load average {beir['load_average_1min']['before']:.1f}:"
    )
    print()
    print("| executor | run wall s | texts/s | 10^5 chunks (extrapolated) | 10^6 (extrapolated) |")
    print("|---|---|---|---|---|")
    labels = {"local-1": "local, 1 worker", "local-2": "local, 2 threads", "ray-2": "Ray, 2 CPUs"}
    for name, seconds in beir["wall_s"].items():
        rate = texts / seconds
        cells = " | ".join(hours(n / rate) for n in SIZES)
        print(f"| {labels.get(name, name)} | {seconds:.0f} | {rate:.1f} | {cells} |")
    parallel = embed.get("parallel")
    if parallel:
        print()
        median = parallel["median_wall_s"]
        print(
            f"Encoding alone ({parallel['texts']} kestrel-kb chunks, {parallel['workers']} "
            f"workers each, median wall s): sentence-transformers' pool {median['st_pool']:.1f}, "
            f"threads {median['threads']:.1f} ({parallel['ratio_threads_to_st_pool']:.2f}x), "
            f"Ray {median['ray']:.1f} ({parallel['ratio_ray_to_st_pool']:.2f}x)."
        )
    print()
    per_million = memory["mib_per_million_chunks"]
    print("| memory (MiB), float32, 384 dims | per 10^6 chunks | 10^5 | 10^6 |")
    print("|---|---|---|---|")
    rows = {
        "build (blocks filled into one array)": "build",
        "build, former way (blocks, then stacked)": "build-stacked",
        "exact search, mapped (peak, with the score block)": "search-mapped",
    }
    for label, step in rows.items():
        value = per_million[step]
        print(f"| {label} | {value:.0f} | {value / 10:.0f} | {value:.0f} |")
    matrix = memory["float32_matrix_mib_per_million_chunks"]
    print(f"| the matrix on disk (cache entry) | {matrix:.0f} | {matrix / 10:.0f} | {matrix:.0f} |")


if __name__ == "__main__":
    main()
