"""nDCG@10 and recall@100 of the three variants on a public BEIR corpus, with the offline
stand-in (``lsa``) and the real encoder (``minilm``), on whole documents and default chunks.

    python benchmarks/beir_table.py --dataset PATH/nfcorpus [--encoders lsa,minilm]

PATH is a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``, and
``qrels/train.tsv`` when the corpus has a train split, which ``hybrid_rerank``'s ``ltr`` then
learns from). The corpus is never committed: give the folder you fetched or unpacked; without
``--dataset`` the script looks for it under ``$RAG_BENCH_BEIR`` and says how to get it when it
finds none. Each (chunker, encoder, variant) is one ``rag_bench.run``; the index cache is shared,
so every index is built once. The table is printed as Markdown (for README) and saved as JSON
under ``benchmarks/results/``. Whole documents: chunker ``none``; default chunks: ``fixed``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import RESULTS_DIR

from rag_bench.experiment.runner import run_variant

CHUNKERS = {"whole documents": "none", "default chunks": "fixed"}
VARIANTS = ("baseline", "hybrid", "hybrid_rerank")
METRICS = ("ndcg@10", "recall@100")


def find_dataset(given: str | None) -> Path:
    """The dataset folder: ``--dataset``, else ``$RAG_BENCH_BEIR``; exit with a hint if none."""
    candidate = given or os.environ.get("RAG_BENCH_BEIR")
    if candidate and (Path(candidate) / "corpus.jsonl").is_file():
        return Path(candidate)
    sys.exit(
        f"no BEIR corpus at {candidate!r}: unpack one (e.g. nfcorpus.zip of the BEIR benchmark, "
        "github.com/beir-cellar/beir) and pass --dataset FOLDER or set RAG_BENCH_BEIR"
    )


def means(result) -> dict[str, float]:
    metrics = result.metrics
    return {m: float(metrics.loc[metrics["metric"] == m, "value"].mean()) for m in METRICS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", help="the BEIR folder")
    parser.add_argument("--encoders", default="lsa,minilm")
    parser.add_argument("--runs-dir", default="runs-beir")
    args = parser.parse_args()
    folder = find_dataset(args.dataset)
    cache = Path(args.runs_dir) / ".cache"
    rows = []
    for chunking, chunker in CHUNKERS.items():
        for encoder in args.encoders.split(","):
            for variant in VARIANTS:
                if variant == "baseline" and encoder != args.encoders.split(",")[0]:
                    continue  # BM25 alone does not depend on the encoder
                overrides = [f"chunker.name={chunker}"]
                overrides += [] if variant == "baseline" else [f"encoder.name={encoder}"]
                started = time.perf_counter()
                result = run_variant(
                    variant,
                    folder,
                    overrides=overrides,
                    ks=(10, 100),
                    runs_dir=args.runs_dir,
                    cache_dir=cache,
                )
                row = {
                    "chunking": chunking,
                    "variant": variant,
                    "encoder": "-" if variant == "baseline" else encoder,
                    **means(result),
                    "seconds": round(time.perf_counter() - started, 1),
                    "reranker_training": result.manifest.get("reranker_training"),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| chunking | variant | encoder | nDCG@10 | recall@100 | seconds |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['chunking']} | {r['variant']} | {r['encoder']} | {r['ndcg@10']:.3f} "
            f"| {r['recall@100']:.3f} | {r['seconds']:.0f} |"
        )
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"beir-{folder.resolve().name}.json"
    out.write_text(json.dumps({"dataset": str(folder), "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
