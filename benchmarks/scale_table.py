"""The encoding and memory table of docs/scaling.md, from measured results: what embedding and
holding 10^5 and 10^6 chunks costs with MiniLM on this machine, locally and on Ray.

Reads ``results/embed.json`` (``bench_embed.py``: the encoding step alone, in one process and
with N workers, against sentence-transformers' process pool) and ``results/dense-memory.json``
(``bench_dense_memory.py``: peak memory per million chunks). Times for 10^5 and 10^6 chunks
are EXTRAPOLATED linearly from the measured throughput (texts per second); memory from the
measured growth per chunk. ``results/embed-scale-100000.json`` (``bench_embed_scale.py``), when
present, is the 10^5 point measured whole, printed beside its extrapolation.

    python benchmarks/scale_table.py
"""

from __future__ import annotations

import argparse
import json
import statistics

from common import RESULTS_DIR

SIZES = (10**5, 10**6)


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embed", default="embed.json", help="bench_embed's results file")
    args = parser.parse_args()
    embed = json.loads((RESULTS_DIR / args.embed).read_text())
    memory = json.loads((RESULTS_DIR / "dense-memory.json").read_text())
    parallel = embed["parallel"]
    texts = embed["texts"]
    one_cpu = statistics.median(embed["rag_bench_s"])  # CPU s, one torch thread
    median = parallel["median_wall_s"]
    print(
        f"Measured: MiniLM on kestrel-kb's {texts} chunks (max 256 word pieces), load average "
        f"{embed['load_average_1min']['before']:.1f}; 10^5 and 10^6 EXTRAPOLATED linearly."
    )
    print()
    print("| encoding | measured s | chunks/s | 10^5 chunks | 10^6 chunks |")
    print("|---|---|---|---|---|")
    rows = {
        "1 process, 1 torch thread (CPU s)": one_cpu,
        f"{parallel['workers']} threads (wall s)": median["threads"],
        f"Ray, {parallel['workers']} CPUs (wall s)": median["ray"],
        f"sentence-transformers pool, {parallel['workers']} processes (wall s)": median["st_pool"],
    }
    for label, seconds in rows.items():
        rate = texts / seconds
        cells = " | ".join(hours(n / rate) for n in SIZES)
        print(f"| {label} | {seconds:.1f} | {rate:.1f} | {cells} |")
    print()
    per_million = memory["mib_per_million_chunks"]
    print("| memory (MiB), float32, 384 dims | per 10^6 chunks | 10^5 | 10^6 |")
    print("|---|---|---|---|")
    labels = {
        "build (blocks filled into one array)": "build",
        "build, former way (blocks, then stacked)": "build-stacked",
        "exact search, mapped (peak, with the score block)": "search-mapped",
    }
    for label, step in labels.items():
        value = per_million[step]
        print(f"| {label} | {value:.0f} | {value / 10:.0f} | {value:.0f} |")
    matrix = memory["float32_matrix_mib_per_million_chunks"]
    print(f"| the matrix on disk (cache entry) | {matrix:.0f} | {matrix / 10:.0f} | {matrix:.0f} |")
    measured = RESULTS_DIR / f"embed-scale-{SIZES[0]}.json"
    if measured.exists():  # bench_embed_scale.py: the first size embedded whole
        whole = json.loads(measured.read_text())
        threads = texts / median["threads"]
        print()
        print(
            f"Measured whole: {whole['chunks']} chunks, {whole['workers']} threads of blocks, "
            f"cache on: {hours(whole['wall_s'])} ({whole['wall_s']:.0f} s), "
            f"{whole['chunks_per_s']:.1f} chunks/s against the {threads:.1f} extrapolated from "
            f"{texts} ({whole['chunks_per_s'] / threads:.2f}x); peak RSS "
            f"{whole['peak_rss_mib']:.0f} MiB, model included; load average "
            f"{whole['load_average_1min']['before']:.1f} before, "
            f"{whole['load_average_1min']['after']:.1f} after."
        )


if __name__ == "__main__":
    main()
