"""A stored run handed to other tools: a TREC run file for trec_eval, pytrec_eval, ranx or
ir_measures, and the outputs records (JSONL or Parquet) that ``rag-bench import`` reads back.

trec_eval does not keep a run's order: it sorts each query's documents by score, descending,
and breaks ties by document id, descending. A pipeline's own ranking can hold tied scores in
another order (and a reranked list need not be sorted by its first-stage scores), so the scores
written are the stored ones, each lowered to just below its predecessor where it would
otherwise tie with or exceed it (``math.nextafter``): every tool then reads the stored order,
and the metrics it computes equal the stored ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from rag_bench.errors import RagBenchError
from rag_bench.pipeline import DOCUMENTS_STAGE


def strictly_decreasing(scores: Iterable[float]) -> list[float]:
    """The scores, each nudged below the one before it when it is not already lower."""
    out: list[float] = []
    for score in scores:
        value = float(score)
        if out and not value < out[-1]:
            value = math.nextafter(out[-1], -math.inf)
        out.append(value)
    return out


def trec_lines(retrieved: pd.DataFrame, tag: str, stage: str = DOCUMENTS_STAGE) -> list[str]:
    """``qid Q0 docid rank score tag`` lines of one stage of a run's rankings, in stored order."""
    rows = retrieved[retrieved["stage"] == stage]
    if rows.empty:
        stages = ", ".join(sorted(set(retrieved["stage"]))) or "none"
        raise RagBenchError(f"the run has no {stage!r} ranking", f"stored stages: {stages}")
    lines = []
    for query_id, ranked in rows.sort_values(["query_id", "rank"]).groupby("query_id", sort=False):
        ids = ranked["doc_id"] if stage == DOCUMENTS_STAGE else ranked["chunk_id"]
        scores = strictly_decreasing(ranked["score"])
        for rank, (doc_id, score) in enumerate(zip(ids, scores), start=1):
            lines.append(f"{query_id} Q0 {doc_id} {rank} {score!r} {tag}")
    return lines


def final_stage(retrieved: pd.DataFrame) -> str:
    """The stage whose chunk ranking the generator read: the last one before ``documents``."""
    stages = [s for s in dict.fromkeys(retrieved["stage"]) if s != DOCUMENTS_STAGE]
    if not stages:
        raise RagBenchError("the run stores no chunk ranking", "export it with --format trec")
    return stages[-1]


def outputs_records(
    manifest: dict, queries: pd.DataFrame, retrieved: pd.DataFrame, passages: dict[str, str]
) -> list[dict]:
    """One outputs record per query (the format ``rag-bench import`` reads): the final chunk
    ranking with each passage's text and score, the answer, and how many passages the
    generator saw. ``passages`` maps chunk ids to their text."""
    stage = final_stage(retrieved)
    generator = manifest.get("params", {}).get("generator", {})
    context_k = generator.get("context_k")
    ranked = retrieved[retrieved["stage"] == stage].sort_values(["query_id", "rank"])
    by_query = {q: frame for q, frame in ranked.groupby("query_id", sort=False)}
    records = []
    for row in queries.itertuples(index=False):
        frame = by_query.get(row.query_id)
        items = (
            []
            if frame is None
            else [
                {"doc_id": d, "chunk_id": c, "text": passages[c], "score": float(s)}
                for d, c, s in zip(frame["doc_id"], frame["chunk_id"], frame["score"])
            ]
        )
        record = {"query_id": row.query_id, "retrieved": items, "answer": row.answer}
        if context_k is not None:
            record["context_k"] = int(context_k)
        records.append(record)
    return records


def passage_texts(manifest: dict, dataset) -> dict[str, str]:
    """Chunk id → text of a run's chunks, made again by its chunker from its dataset (chunking
    is deterministic, and the dataset is checked to be the one the run used)."""
    from rag_bench.components.chunking import chunk_corpus
    from rag_bench.components.registry import build

    recorded = manifest.get("dataset", {}).get("sha256")
    if dataset.sha256 != recorded:
        raise RagBenchError(
            f"dataset {dataset.path} is not the one run {manifest['run_id']} used "
            f"(sha256 {dataset.sha256[:12]}…, the run's {str(recorded)[:12]}…)",
            "give the dataset the run was made on",
        )
    config = manifest["params"]["chunker"]
    if config["name"] == "recorded":
        raise RagBenchError(
            f"run {manifest['run_id']} replays imported passages, which are not stored with it",
            "export its rankings as TREC (format trec), or re-import the original file",
        )
    chunks = chunk_corpus(build("chunker", config), dataset.docs.values())
    return {chunk.chunk_id: chunk.text for chunk in chunks}
