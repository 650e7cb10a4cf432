"""Embedding a corpus of 10^5 chunks with MiniLM, measured whole: the point that checks the
scale table's linear extrapolation from kestrel-kb's 777 chunks (``bench_embed.py``).

The corpus: kestrel-kb's chunks under the default chunker, cycled in an order shuffled with
``--seed`` until there are ``--chunks`` of them, each a document of its own (so the chunker
keeps it whole and the length distribution is the 777 chunks'). A pipeline with only the
``minilm`` encoder (``encoder.threads`` 1, ``--workers`` threads of blocks) indexes it with
the cache on, in a temporary folder: the embeddings are written block by block as float32 and
read back memory-mapped, as in a run. Recorded: wall and CPU seconds, chunks per second, and
the process's peak resident memory (model included).

    python benchmarks/bench_embed_scale.py --chunks 100000
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from common import RESULTS_DIR, machine, source, write_results

from rag_bench.components.chunking import chunk_corpus
from rag_bench.components.registry import build
from rag_bench.data.dataset import load_dataset
from rag_bench.io.cache import Cache
from rag_bench.model import Doc
from rag_bench.pipeline.compose import Pipeline
from rag_bench.pipeline.executors import LocalExecutor

BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=10**5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    dataset = load_dataset()
    chunker = {"name": "fixed"}
    chunks = chunk_corpus(build("chunker", chunker), dataset.docs.values())
    # a chunk's text under its document's title: what the chunker indexes (index_text)
    texts = [(dataset.docs[c.doc_id].title, c.text) for c in chunks]
    order = list(range(len(texts)))
    random.Random(args.seed).shuffle(order)
    docs = {}
    for i in range(args.chunks):
        title, text = texts[order[i % len(texts)]]
        docs[f"s{i:07d}"] = Doc(id=f"s{i:07d}", title=title, text=text, metadata={})
    dataset = replace(dataset, docs=docs)
    config = {
        "analyzer": {"name": "auto"},
        # a window as long as the default's, without overlap: each document stays one chunk
        "chunker": {"name": "fixed", "size": 128, "overlap": 0},
        "encoder": {"name": "minilm", "batch_size": BATCH, "threads": 1},
    }
    with tempfile.TemporaryDirectory() as folder:
        pipeline = Pipeline(config, Cache(Path(folder)))
        wall, cpu = time.perf_counter(), time.process_time()
        pipeline.index(dataset, LocalExecutor(args.workers))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        embeddings = pipeline.retrievers[0].embeddings
        shape, dtype = tuple(np.shape(embeddings)), str(np.asarray(embeddings).dtype)
        assert shape[0] == args.chunks, f"{shape[0]} chunks, not {args.chunks}"
        mapped = isinstance(embeddings, np.memmap) or isinstance(
            getattr(embeddings, "base", None), np.memmap
        )
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results = {
        "machine": machine(("torch", "sentence-transformers", "transformers")),
        "source": source(),
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "chunks": args.chunks,
        "distinct_texts": len(texts),
        "workers": args.workers,
        "torch_threads": 1,
        "wall_s": wall,
        "cpu_s": cpu,
        "chunks_per_s": args.chunks / wall,
        "embeddings": {"shape": shape, "dtype": dtype, "memory_mapped": mapped},
        "peak_rss_mib": peak_mib,
    }
    print(
        f"{args.chunks} chunks ({len(texts)} distinct texts), {args.workers} threads of blocks: "
        f"{wall:.0f} s wall, {cpu:.0f} CPU s, {args.chunks / wall:.1f} chunks/s, "
        f"peak RSS {peak_mib:.0f} MiB; embeddings {shape} {dtype}, memory-mapped {mapped}"
    )
    write_results(results, RESULTS_DIR / f"embed-scale-{args.chunks}.json")


if __name__ == "__main__":
    main()
