"""Refusals on a public BEIR corpus (ArguAna) under both refusal rules of the extractive
generator, whole documents, the ``lsa`` encoder:

    python benchmarks/beir_refusal.py [--dataset SOURCE | --mirror CLONE] [--cache DIR]

The corpus is found as ``beir_table.py`` finds it. Runs ``baseline`` and ``hybrid_rerank``
with ``generator.refuse_on=context`` (the rule before: refuse on the final, reranked ranking)
and ``=retrieval`` (the default: refuse on the ranking before any reranker), and saves per run
over_refusal (refused answerable queries / answerable queries), nDCG@10 and how many refused
queries had the query's own argument (ArguAna's queries are themselves in the corpus) among
the generator's top chunks, to ``benchmarks/results/beir-<name>-refusal.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from beir_table import find_dataset
from common import RESULTS_DIR

from rag_bench.experiment.runner import run_variant

RUNS = (("baseline", "retrieval"), ("hybrid_rerank", "context"), ("hybrid_rerank", "retrieval"))
CONTEXT_K = 5  # the extractive generator's default


def measure(variant: str, rule: str, folder: Path, cache: Path) -> dict:
    overrides = ["chunker.name=none", f"generator.refuse_on={rule}"]
    overrides += [] if variant == "baseline" else ["encoder.name=lsa"]
    result = run_variant(
        variant,
        folder,
        overrides=overrides,
        ks=(10, 100),
        depth=101,
        runs_dir=cache / "runs",
        cache_dir=cache / "index",
    )
    metrics, queries = result.metrics, result.queries.set_index("query_id")
    over = metrics.loc[metrics["metric"] == "over_refusal", "value"].dropna()
    retrieved = result.tables["retrieved"]
    last = [s for s in retrieved["stage"].unique() if s != "documents"][-1]
    top = retrieved[(retrieved["stage"] == last) & (retrieved["rank"] <= CONTEXT_K)]
    own = {q for q, d in zip(top["query_id"], top["doc_id"]) if q == d}
    refused = set(queries.index[queries["refused"]])
    return {
        "variant": variant,
        "refuse_on": rule,
        "run_id": result.run_id,
        "over_refusal": float(over.mean()),
        "refused": int(over.sum()),
        "answerable": len(over),
        "ndcg@10": float(metrics.loc[metrics["metric"] == "ndcg@10", "value"].mean()),
        "own_argument_in_context": len(own),
        "refused_without_own_argument": len(refused - own),
    }


def summary(rows: list[dict]) -> str:
    """README's sentence of the rows: each run's over_refusal, refused of answerable."""
    parts = [
        f"{r['variant']} with refuse_on={r['refuse_on']}: over_refusal {r['over_refusal']:.3f} "
        f"({r['refused']:,} of {r['answerable']:,} answerable queries refused, nDCG@10 "
        f"{r['ndcg@10']:.3f})"
        for r in rows
    ]
    return "; ".join(parts) + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", help="a BEIR folder, BeIR-layout folder, zip or snapshot")
    parser.add_argument("--mirror", help="a bare git clone of the known public copy")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "rag-bench-beir"))
    args = parser.parse_args()
    cache = Path(args.cache)
    folder = find_dataset(args.dataset, args.mirror, cache / "datasets")
    rows = []
    for variant, rule in RUNS:
        rows.append(measure(variant, rule, folder, cache))
        print(json.dumps(rows[-1]), flush=True)
    out = RESULTS_DIR / f"beir-{folder.name.rsplit('-', 1)[0]}-refusal.json"
    out.write_text(json.dumps({"dataset": folder.name, "rows": rows}, indent=1) + "\n")
    print(summary(rows))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
