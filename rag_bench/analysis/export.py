"""A stored run handed to other tools: a TREC run file for trec_eval, pytrec_eval, ranx or
ir_measures, and the outputs records (JSONL or Parquet) that ``rag-bench import`` reads back.

trec_eval does not keep a run's order: it sorts each query's documents by score, descending,
and breaks ties by document id, descending. A pipeline's own ranking can hold tied scores in
another order (and a reranked list need not be sorted by its first-stage scores), so the scores
written are the stored ones, each lowered to just below its predecessor where it would
otherwise tie with or exceed it: every tool then reads the stored order, and the metrics it
computes equal the stored ones. Some read scores at single precision (pytrec_eval, and
ir_measures through it, parse them into 32-bit floats), where two scores one double ulp apart
are one number again; so each written score is a 32-bit float (the stored score rounded to the
nearest one), lowered by single-precision steps, and the order survives either reading.

The export's queries are the run's: an unanswerable query (``should_refuse``) has a ranking
and no relevant document, so trec_eval scores it 0 where the run leaves it undefined (see
:func:`unanswerable_note`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from rag_bench.errors import RagBenchError
from rag_bench.pipeline import DOCUMENTS_STAGE


def strictly_decreasing(scores: Iterable[float]) -> list[float]:
    """The scores as 32-bit floats (exact in 64 bits too), each lowered one single-precision
    step below the one before it when it is not already lower."""
    import numpy as np

    out: list[np.float32] = []
    for score in scores:
        value = np.float32(score)
        if out and not value < out[-1]:
            value = np.nextafter(out[-1], np.float32(-math.inf))
        out.append(value)
    return [float(v) for v in out]


def unanswerable_note(queries: pd.DataFrame) -> str | None:
    """What a tool re-scoring the export should know: the ``should_refuse`` queries it holds,
    which trec_eval scores 0 (judged, no relevant document) and the run leaves out of its
    retrieval means (undefined, not zero); None when there are none."""
    n = int(queries["should_refuse"].fillna(False).astype(bool).sum())
    if not n:
        return None
    return (
        f"{n} of the {len(queries)} queries are unanswerable (should_refuse): trec_eval, with "
        "their judgements, scores them 0 and averages over all; the run leaves their retrieval "
        f"metrics undefined and averages over the other {len(queries) - n}"
    )


def trec_lines(retrieved: pd.DataFrame, tag: str, stage: str = DOCUMENTS_STAGE) -> list[str]:
    """``qid Q0 docid rank score tag`` lines of one stage of a run's rankings, in stored order."""
    rows = retrieved[retrieved["stage"] == stage]
    if rows.empty:
        stages = ", ".join(sorted(set(retrieved["stage"]))) or "none"
        raise RagBenchError(f"the run has no {stage!r} ranking", f"stored stages: {stages}")
    lines = []
    _check_trec_field("run id", tag)
    for query_id, ranked in rows.sort_values(["query_id", "rank"]).groupby("query_id", sort=False):
        ids = ranked["doc_id"] if stage == DOCUMENTS_STAGE else ranked["chunk_id"]
        scores = strictly_decreasing(ranked["score"])
        _check_trec_field("query id", query_id)
        for rank, (doc_id, score) in enumerate(zip(ids, scores), start=1):
            _check_trec_field("document id", doc_id)
            lines.append(f"{query_id} Q0 {doc_id} {rank} {score!r} {tag}")
    return lines


def _check_trec_field(what: str, value: object) -> None:
    """A TREC run file's columns are split at whitespace: an id holding any (or nothing) would
    be read back as other columns (a recall of 1.0 read as 0.75), so it is refused."""
    text = str(value)
    if not text or any(c.isspace() for c in text):
        raise RagBenchError(
            f"the {what} {text[:80]!r} cannot be written to a TREC run file, whose columns "
            "whitespace separates",
            "export the run with --format jsonl or --format parquet, which keep any id",
        )


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
