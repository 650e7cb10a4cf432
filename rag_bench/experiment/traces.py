"""Turning a pipeline's per-query results into the trace tables of a run (schema_version 2: see
:data:`rag_bench.runs.SCHEMA_VERSION`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from rag_bench.data.dataset import Dataset
from rag_bench.data.rankings import Run
from rag_bench.evaluation.answer import AnswerEvidence, answer_metric_names, answer_metrics
from rag_bench.evaluation.correctness import best_verdict
from rag_bench.evaluation.diagnosis import MULTI_HOP, Case, Diagnosis, diagnose
from rag_bench.evaluation.measures import Measure
from rag_bench.evaluation.retrieval import evaluate_run
from rag_bench.model import Chunk, Hits, Query, QueryResult
from rag_bench.pipeline import DOCUMENTS_STAGE, LATENCY_STAGES
from rag_bench.text.claims import strip_markers


def ranking_measures(ks: Sequence[int]) -> list[Measure]:
    """Every ranking metric at every cutoff, plus the uncut ones."""
    cut = ("precision", "recall", "hit", "mrr", "ndcg", "ndcg_exp", "map", "judged")
    return [Measure(f, k) for k in ks for f in cut] + [
        Measure("mrr"),
        Measure("map"),
        Measure("rprec"),
    ]


def doc_ranking(hits: Hits, chunks: Sequence[Chunk]) -> tuple[list[str], list[int]]:
    """Collapse a chunk ranking to documents: first occurrence wins. Returns the doc ids and the
    positions (into ``hits``) of the chunks that put them there."""
    seen: dict[str, int] = {}
    for rank, position in enumerate(hits.index):
        seen.setdefault(chunks[position].doc_id, rank)
    return list(seen), list(seen.values())


def build_traces(
    run_id: str,
    data: Dataset,
    queries: Sequence[Query],
    results: Sequence[QueryResult],
    chunks: Sequence[Chunk],
    ks: Sequence[int],
    analyzer,
    judge_name: str,
    repeat: int = 0,
) -> dict[str, pd.DataFrame]:
    """The trace tables of one pass over ``queries``; ``repeat`` numbers the pass (a run with
    ``repeats`` stores one pass per repeat in its answer tables, ``retrieved`` once)."""
    grades = data.qrels.subset([q.id for q in queries]).to_dict()
    rankings = {q.id: doc_ranking(r.final, chunks) for q, r in zip(queries, results)}
    answers = [
        _evaluate_answer(q, r, chunks, grades.get(q.id), rankings[q.id][0], ks, analyzer)
        for q, r in zip(queries, results)
    ]
    answered = {
        "queries": _queries(run_id, queries, results, grades, [a[1] for a in answers]),
        "metrics": _metrics(run_id, data, queries, rankings, ks, [a[0] for a in answers], grades),
        "claims": _claims(run_id, queries, results, judge_name),
    }
    tables = {name: frame.assign(repeat=np.int32(repeat)) for name, frame in answered.items()}
    tables["retrieved"] = _retrieved(run_id, queries, results, chunks, rankings, grades)
    return {name: tables[name] for name in ("queries", "metrics", "retrieved", "claims")}


def _evaluate_answer(query, result, chunks, grades, ranked_docs, ks, analyzer):
    """The answer metrics and the diagnosis of one query (``grades`` None: the qrels judge
    none of its documents)."""
    labelled = grades is not None or query.should_refuse
    grades = grades or {}
    generation = result.generation
    evidence = AnswerEvidence(
        query=query,
        answer=generation.answer,
        refused=generation.refused,
        claims=result.claims,
        verdicts=result.verdicts,
        ranking=[chunks[p] for p in result.final.index],
        grades=grades,
        judged_relevance=result.relevance,
        labelled=labelled,
    )
    correctness = None
    if query.answer and not query.should_refuse:
        text = strip_markers(generation.answer)
        golds = query.gold_answers
        correctness = "wrong" if generation.refused else best_verdict(text, golds, query.text)
    case = Case(
        should_refuse=query.should_refuse,
        refused=generation.refused,
        claims=result.claims,
        verdicts=result.verdicts,
        context_docs=[chunks[p].doc_id for p in result.context],
        grades=grades,
        ranked_docs=ranked_docs,
        multi_hop=query.category == MULTI_HOP,
        correctness=correctness,
        labelled=labelled,
    )
    return answer_metrics(evidence, ks, analyzer), diagnose(case)


def _queries(run_id, queries, results, grades, diagnoses: list[Diagnosis]) -> pd.DataFrame:
    rows = []
    for query, result, found in zip(queries, results, diagnoses):
        latency = {f"latency_ms_{s}": result.latency_ms.get(s) for s in LATENCY_STAGES}
        latency["latency_ms_total"] = sum(v for v in latency.values() if v is not None)
        rows.append(
            {
                "run_id": run_id,
                "query_id": query.id,
                "category": query.category,
                "tags": list(query.tags),
                "should_refuse": query.should_refuse,
                "query": query.text,
                "answer": result.generation.answer,
                "refused": result.generation.refused,
                "failure_class": found.failure_class,
                "failure_stage": found.stage,
                "failure_fix": found.fix,
                "n_relevant": sum(1 for g in grades.get(query.id, {}).values() if g >= 1),
                **latency,
            }
        )
    return pd.DataFrame(rows)


def _metrics(run_id, data, queries, rankings, ks, answer_values, grades) -> pd.DataFrame:
    measures = ranking_measures(ks)
    answerable = [q for q in queries if not q.should_refuse and q.id in grades]
    frames = []
    if answerable:
        run = Run.from_rankings({q.id: rankings[q.id][0] for q in answerable})
        qrels = data.qrels.subset([q.id for q in answerable])
        # complete: a query whose ranking came back empty still counts, as 0
        result = evaluate_run(qrels, run, measures, complete=True)
        scored = result.per_query.assign(status="ok")
        frames.append(scored)
    unanswerable = [q.id for q in queries if q.should_refuse or q.id not in grades]
    if unanswerable:
        # Retrieval metrics are undefined without a relevant document, and without any
        # judgement of the query (a user's query): NULL, never 0.
        frames.append(
            pd.DataFrame(
                {
                    "query_id": np.repeat(unanswerable, len(measures)),
                    "metric": np.tile([str(m) for m in measures], len(unanswerable)),
                    "value": np.nan,
                    "status": "undefined",
                }
            )
        )
    names = answer_metric_names(ks)
    values = [[a[n] for n in names] for a in answer_values]
    answer_frame = pd.DataFrame(
        {
            "query_id": np.repeat([q.id for q in queries], len(names)),
            "metric": np.tile(names, len(queries)),
            "value": np.array(
                [v if v is not None else np.nan for row in values for v in row], dtype=np.float64
            ),
        }
    )
    answer_frame["status"] = np.where(answer_frame["value"].isna(), "undefined", "ok")
    frames.append(answer_frame)
    metrics = pd.concat(frames, ignore_index=True)
    categories = {q.id: q.category for q in queries}
    metrics.insert(0, "run_id", run_id)
    metrics.insert(2, "category", metrics["query_id"].map(categories))
    order = {q.id: i for i, q in enumerate(queries)}
    metric_order = {name: i for i, name in enumerate([*map(str, measures), *names])}
    metrics = metrics.assign(
        _q=metrics["query_id"].map(order), _m=metrics["metric"].map(metric_order)
    )
    return metrics.sort_values(["_q", "_m"]).drop(columns=["_q", "_m"]).reset_index(drop=True)


def _retrieved(run_id, queries, results, chunks, rankings, grades) -> pd.DataFrame:
    columns: dict[str, list] = {
        k: [] for k in ("query_id", "stage", "rank", "chunk_id", "doc_id", "score", "relevance")
    }

    def add(query_id, stage, positions, scores, judged):
        for rank, (position, score) in enumerate(zip(positions, scores), start=1):
            chunk = chunks[position]
            columns["query_id"].append(query_id)
            columns["stage"].append(stage)
            columns["rank"].append(rank)
            columns["chunk_id"].append(chunk.chunk_id)
            columns["doc_id"].append(chunk.doc_id)
            columns["score"].append(float(score))
            columns["relevance"].append(judged.get(chunk.doc_id))

    for query, result in zip(queries, results):
        judged = grades.get(query.id, {})
        for stage, hits in result.stages.items():
            add(query.id, stage, hits.index, hits.score, judged)
        _, first_ranks = rankings[query.id]
        final = result.final
        add(query.id, DOCUMENTS_STAGE, final.index[first_ranks], final.score[first_ranks], judged)
    frame = pd.DataFrame(columns)
    frame.insert(0, "run_id", run_id)
    frame["relevance"] = frame["relevance"].astype("Int32")
    return frame


def _claims(run_id, queries, results, judge_name) -> pd.DataFrame:
    rows = []
    for query, result in zip(queries, results):
        for i, (claim, judged) in enumerate(zip(result.claims, result.verdicts)):
            rows.append(
                {
                    "run_id": run_id,
                    "query_id": query.id,
                    "claim_id": i,
                    "text": claim.text,
                    "citations": list(claim.citations),
                    "supported": judged.supported,
                    "support_grade": judged.grade,
                    "supported_by": list(judged.supported_by),
                    "judge": judge_name,
                    "reason": judged.reason,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "run_id",
            "query_id",
            "claim_id",
            "text",
            "citations",
            "supported",
            "support_grade",
            "supported_by",
            "judge",
            "reason",
        ],
    )
