"""How fusion settings move a hybrid's retrieval: the measurement behind the fusion defaults.

    python benchmarks/fusion_grid.py [--dataset PATH ...] [--encoders lsa,minilm]

For each dataset (default: the shipped kestrel-kb and lumen-mall-zh) and encoder, the BM25 and
dense rankings of every evaluated query are computed once (depth 100, default chunks); each
fusion setting then fuses them, and the fused chunk rankings, collapsed to documents, are scored
with nDCG@10 and recall@100 (trec_eval conventions, ``rag_bench.evaluate_run``). The settings:
RRF with weights sparse:dense of 1:1, 1:0.5 and 1:2; min-max and z-score blends with the dense
weight at 0.3, 0.5 and 0.7. No setting is fitted to a dataset; the "Fusion" section of
docs/components.md reads the defaults off this table across datasets and encoders.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rag_bench.components.fusion import ReciprocalRankFusion, WeightedScoreFusion
from rag_bench.data.dataset import load_dataset
from rag_bench.data.rankings import Run
from rag_bench.evaluation.retrieval import evaluate_run
from rag_bench.experiment.runner import SHIPPED_DATASET
from rag_bench.io.cache import Cache, default_cache_dir
from rag_bench.pipeline.compose import Pipeline

SETTINGS = {
    "rrf 1:1": ReciprocalRankFusion(weights=(1.0, 1.0)),
    "rrf 1:0.5": ReciprocalRankFusion(weights=(1.0, 0.5)),
    "rrf 1:2": ReciprocalRankFusion(weights=(1.0, 2.0)),
    **{
        f"{norm} dense {w}": WeightedScoreFusion((1 - w, w), norm)
        for norm in ("minmax", "zscore")
        for w in (0.3, 0.5, 0.7)
    },
}
DEPTH = 100


def scores(dataset, encoder: str) -> dict[str, tuple[float, float]]:
    config = {"analyzer": {"name": "auto"}, "chunker": {"name": "fixed"}}
    config |= {"retriever": {"name": "bm25"}, "encoder": {"name": encoder}}
    config |= {"fusion": {"name": "rrf"}}
    pipeline = Pipeline(config, Cache(default_cache_dir()))
    pipeline.index(dataset)
    queries = [q for q in dataset.queries.values() if not q.should_refuse]
    stages, _ = pipeline.rank(queries, DEPTH, rerank=False)
    out = {}
    for name, fuser in SETTINGS.items():
        rankings = {}
        for query, stage in zip(queries, stages):
            fused = fuser.fuse([stage["bm25"], stage["dense"]], DEPTH)
            rankings[query.id] = [pipeline.chunks[p].doc_id for p in fused.index]
        result = evaluate_run(dataset.qrels, Run.from_rankings(rankings), ["ndcg@10", "recall@100"])
        means = result.means()
        out[name] = (means["ndcg@10"], means["recall@100"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shipped = SHIPPED_DATASET.parent
    parser.add_argument(
        "--dataset", action="append", help="BEIR folder(s); default: the shipped datasets"
    )
    parser.add_argument("--encoders", default="lsa,minilm")
    args = parser.parse_args()
    folders = args.dataset or [shipped / "kestrel-kb", shipped / "lumen-mall-zh"]
    columns = []
    table: dict[str, list[str]] = {name: [] for name in SETTINGS}
    for folder in folders:
        dataset = load_dataset(folder)
        for encoder in args.encoders.split(","):
            if encoder == "minilm" and "zh" in dataset.name:
                continue  # an English model
            columns.append(f"{dataset.name} {encoder}")
            for name, (ndcg, recall) in scores(dataset, encoder).items():
                table[name].append(f"{ndcg:.3f} / {recall:.3f}")
            print(f"done: {columns[-1]}", flush=True)
    print("\nnDCG@10 / recall@100 of the fused ranking\n")
    print("| fusion | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, cells in table.items():
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
