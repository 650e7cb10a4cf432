"""Ranking metrics computed the way trec_eval computes them, vectorised over all queries.

A run and its qrels are first flattened into :class:`RankedJudgements`: one row per retrieved
document, sorted by query and rank, carrying the document's grade. Each metric family is then a
small kernel over those arrays that returns one value per query; means are taken once, at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.errors import DataError, UsageError
from rag_bench.evaluation.measures import DEFAULT_EVAL_MEASURES, Measure, parse_measures
from rag_bench.qrels import Qrels, load_qrels
from rag_bench.rankings import Run, load_run


@dataclass(frozen=True)
class RankedJudgements:
    """Flat, query-sorted arrays that every metric kernel reads."""

    query_ids: np.ndarray  # the evaluated queries, sorted; index i is query i below
    qidx: np.ndarray  # per retrieved row: query index; rows sorted by (query, rank)
    pos: np.ndarray  # per retrieved row: 0-based rank within its query
    grade: np.ndarray  # per retrieved row: judged grade, 0 when unjudged
    rel: np.ndarray  # per retrieved row: grade >= rel_level
    num_rel: np.ndarray  # per query: judged documents with grade >= rel_level
    ideal_qidx: np.ndarray  # per positively graded judgement, sorted by (query, grade desc)
    ideal_pos: np.ndarray
    ideal_grade: np.ndarray

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)


def _used(codes: np.ndarray, n_categories: int) -> np.ndarray:
    return np.bincount(codes[codes >= 0], minlength=n_categories) > 0


def _positions(qidx_sorted: np.ndarray) -> np.ndarray:
    """0-based position of each row within its run of equal ``qidx_sorted`` values."""
    n = len(qidx_sorted)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, qidx_sorted[1:] != qidx_sorted[:-1]])
    lengths = np.diff(np.r_[starts, n])
    return np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)


def _grouped_in_order(qidx: np.ndarray, score: np.ndarray) -> bool:
    """Whether each query's rows are contiguous and sorted by score descending (any query order),
    as in nearly every run file: then no sort is needed."""
    if len(qidx) < 2:
        return True
    same = qidx[1:] == qidx[:-1]
    n_groups = len(qidx) - int(np.count_nonzero(same))
    distinct = np.count_nonzero(np.bincount(qidx)) if len(qidx) else 0
    return n_groups == distinct and not np.any(same & (score[1:] > score[:-1]))


def _names(categories: pd.Index) -> pd.Index:
    """Category labels as an object Index of strings (ids are strings everywhere)."""
    if categories.dtype == object:
        return categories
    return pd.Index(categories.astype(str), dtype=object)


def _grades_of(run_qidx, doc_codes, docs, qrels: Qrels, qrels_qidx, grades) -> np.ndarray:
    """The judged grade of every retrieved row (0 when unjudged).

    Run documents are mapped onto the qrels' (far fewer) documents once per distinct document;
    only rows whose document is judged for some query are then looked up by (query, document).
    """
    q_doc = qrels.frame["doc_id"].cat
    judged_docs = _names(q_doc.categories)
    to_judged = judged_docs.get_indexer(docs)  # run doc code -> qrels doc code, or -1
    run_judged = to_judged[doc_codes]
    grade = np.zeros(len(doc_codes), dtype=np.int64)
    linked = qrels_qidx >= 0
    if not linked.any():
        return grade
    width = max(len(judged_docs), 1)
    keys = qrels_qidx[linked] * width + q_doc.codes.to_numpy()[linked]
    key_order = np.argsort(keys)
    keys, key_grades = keys[key_order], grades[linked][key_order]
    rows = np.flatnonzero(run_judged >= 0)
    wanted = run_qidx[rows] * width + run_judged[rows]
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    hit = keys[at] == wanted
    grade[rows[hit]] = key_grades[at[hit]]
    return grade


def _trec_order(qidx: np.ndarray, score: np.ndarray, doc_codes: np.ndarray, docs: pd.Index):
    """Row order of trec_eval: grouped by query, score descending, ties by doc id descending.

    Queries stay in the order they come in (contiguity is all the kernels need). Only rows that
    tie with a neighbour on score are looked at by doc id, so the string comparison touches few.
    """
    in_order = _grouped_in_order(qidx, score)
    order = np.arange(len(qidx)) if in_order else np.lexsort((-score, qidx))
    q, s = qidx[order], score[order]
    tied_next = (q[1:] == q[:-1]) & (s[1:] == s[:-1])
    if not np.any(tied_next):
        return order
    tied = np.zeros(len(order), dtype=bool)
    tied[:-1] |= tied_next
    tied[1:] |= tied_next
    rows = np.flatnonzero(tied)
    # one id per run of equal (query, score), numbered over the tied rows only
    follows_tie = np.zeros(len(rows), dtype=bool)
    follows_tie[1:] = tied_next[rows[1:] - 1]
    block = np.cumsum(~follows_tie)
    names = docs.to_numpy(dtype=object)[doc_codes[order[rows]]].astype(str)
    # descending byte order: sort ascending by the negated rank of each name among the tied ones
    name_rank = np.unique(names, return_inverse=True)[1]
    within = np.lexsort((-name_rank, block))
    order[rows] = order[rows][within]
    return order


def rank_and_judge(
    qrels: Qrels, run: Run, *, complete: bool = False, rel_level: int = 1
) -> RankedJudgements:
    """Join a run with its qrels over the queries to evaluate (trec_eval's rules)."""
    if rel_level < 1:
        raise UsageError(f"--rel-level {rel_level} is below 1", "relevant means grade ≥ 1 or more")
    q_query = qrels.frame["query_id"].cat
    r_query = run.frame["query_id"].cat
    q_codes = q_query.codes.to_numpy()
    r_codes = r_query.codes.to_numpy()
    judged = _names(q_query.categories)[_used(q_codes, len(q_query.categories))]
    retrieved = _names(r_query.categories)[_used(r_codes, len(r_query.categories))]
    if not complete and len(judged.intersection(retrieved)) == 0 and len(run) > 0:
        raise DataError(
            run.source,
            f"no query of the run appears in the qrels ({qrels.source})",
            "check that the run and the qrels belong to the same collection",
        )
    evaluated = judged if complete else judged.intersection(retrieved)
    evaluated = pd.Index(np.sort(evaluated.to_numpy(dtype=object)), dtype=object)

    run_qidx = evaluated.get_indexer(_names(r_query.categories))[r_codes].astype(np.int64)
    doc_codes = run.frame["doc_id"].cat.codes.to_numpy().astype(np.int64)
    score = run.frame["score"].to_numpy()
    keep = run_qidx >= 0
    if not keep.all():  # rows of queries without judgements play no part
        run_qidx, doc_codes, score = run_qidx[keep], doc_codes[keep], score[keep]
    docs = _names(run.frame["doc_id"].cat.categories)

    if run.ordered:
        contiguous = _grouped_in_order(run_qidx, np.zeros(len(run_qidx)))
        order = np.arange(len(run_qidx)) if contiguous else np.argsort(run_qidx, kind="stable")
    else:
        order = _trec_order(run_qidx, score, doc_codes, docs)
    if not np.array_equal(order, np.arange(len(order))):
        run_qidx, doc_codes = run_qidx[order], doc_codes[order]

    qrels_qidx = evaluated.get_indexer(_names(q_query.categories))[q_codes].astype(np.int64)
    grades = qrels.frame["grade"].to_numpy(dtype=np.int64)
    grade = _grades_of(run_qidx, doc_codes, docs, qrels, qrels_qidx, grades)

    n = len(evaluated)
    counted = qrels_qidx >= 0
    num_rel = np.bincount(qrels_qidx[counted & (grades >= rel_level)], minlength=n).astype(
        np.float64
    )
    positive = counted & (grades > 0)
    ideal_order = np.lexsort((-grades[positive], qrels_qidx[positive]))
    ideal_qidx = qrels_qidx[positive][ideal_order]
    return RankedJudgements(
        query_ids=evaluated.to_numpy(dtype=object),
        qidx=run_qidx,
        pos=_positions(run_qidx),
        grade=grade,
        rel=grade >= rel_level,
        num_rel=num_rel,
        ideal_qidx=ideal_qidx,
        ideal_pos=_positions(ideal_qidx),
        ideal_grade=grades[positive][ideal_order],
    )


# --- per-query kernels: each returns one float per evaluated query -------------------------


def _within(pos: np.ndarray, k: int | None) -> np.ndarray:
    return np.ones(len(pos), dtype=bool) if k is None else pos < k


def _per_query(j: RankedJudgements, qidx: np.ndarray, weights=None) -> np.ndarray:
    return np.bincount(qidx, weights=weights, minlength=j.n_queries).astype(np.float64)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    out = np.zeros_like(numerator, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def _relevant_in_top(j: RankedJudgements, k: int | None) -> np.ndarray:
    return _per_query(j, j.qidx[j.rel & _within(j.pos, k)])


def precision(j: RankedJudgements, k: int) -> np.ndarray:
    # trec_eval P_k divides by k even when fewer than k documents were retrieved.
    return _relevant_in_top(j, k) / k


def recall(j: RankedJudgements, k: int) -> np.ndarray:
    return _ratio(_relevant_in_top(j, k), j.num_rel)


def hit(j: RankedJudgements, k: int) -> np.ndarray:
    return (_relevant_in_top(j, k) > 0).astype(np.float64)


def mrr(j: RankedJudgements, k: int | None) -> np.ndarray:
    mask = j.rel & _within(j.pos, k)
    first_q, first_row = np.unique(j.qidx[mask], return_index=True)
    out = np.zeros(j.n_queries)
    out[first_q] = 1.0 / (j.pos[mask][first_row] + 1)
    return out


def _ndcg(j: RankedJudgements, k: int | None, gain: Callable[[np.ndarray], np.ndarray]):
    top = _within(j.pos, k) & (j.grade > 0)
    dcg = _per_query(j, j.qidx[top], gain(j.grade[top]) / np.log2(j.pos[top] + 2.0))
    ideal = _within(j.ideal_pos, k)
    ideal_pos = j.ideal_pos[ideal]
    idcg = _per_query(j, j.ideal_qidx[ideal], gain(j.ideal_grade[ideal]) / np.log2(ideal_pos + 2.0))
    return _ratio(dcg, idcg)


def ndcg(j: RankedJudgements, k: int | None) -> np.ndarray:
    # trec_eval ndcg_cut: gain is the grade itself.
    return _ndcg(j, k, lambda g: g.astype(np.float64))


def ndcg_exp(j: RankedJudgements, k: int | None) -> np.ndarray:
    return _ndcg(j, k, lambda g: np.exp2(g.astype(np.float64)) - 1.0)


def average_precision(j: RankedJudgements, k: int | None) -> np.ndarray:
    # Precision at each relevant rank, summed and divided by all relevant (trec_eval map_cut).
    rel_rank = _within_query_cumsum(j.qidx, j.rel)
    mask = j.rel & _within(j.pos, k)
    precisions = rel_rank[mask] / (j.pos[mask] + 1.0)
    return _ratio(_per_query(j, j.qidx[mask], precisions), j.num_rel)


def rprec(j: RankedJudgements, k: None = None) -> np.ndarray:
    mask = j.rel & (j.pos < j.num_rel[j.qidx])
    return _ratio(_per_query(j, j.qidx[mask]), j.num_rel)


def _within_query_cumsum(qidx: np.ndarray, values: np.ndarray) -> np.ndarray:
    total = np.cumsum(values, dtype=np.int64)
    if len(total) == 0:
        return total
    starts = np.r_[True, qidx[1:] != qidx[:-1]]
    before = (total - values)[starts]
    group = np.cumsum(starts) - 1
    return total - before[group]


KERNELS: dict[str, Callable[[RankedJudgements, int | None], np.ndarray]] = {
    "precision": precision,
    "recall": recall,
    "hit": hit,
    "mrr": mrr,
    "ndcg": ndcg,
    "ndcg_exp": ndcg_exp,
    "map": average_precision,
    "rprec": rprec,
}


# --- evaluation -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RankingEvaluation:
    """Per-query values (long form: query_id, metric, value) and their means."""

    per_query: pd.DataFrame
    measures: tuple[Measure, ...]
    n_queries: int

    def means(self) -> dict[str, float]:
        means = self.per_query.groupby("metric", sort=False)["value"].mean()
        return {str(m): float(means.get(str(m), float("nan"))) for m in self.measures}

    def wide(self) -> pd.DataFrame:
        """One row per query, one column per metric, in the measures' order."""
        table = self.per_query.pivot(index="query_id", columns="metric", values="value")
        return table[[str(m) for m in self.measures]]


def compute(j: RankedJudgements, measures: Sequence[Measure]) -> dict[Measure, np.ndarray]:
    return {m: KERNELS[m.family](j, m.k) for m in measures}


def evaluate_run(
    qrels: Qrels | str | Path,
    run: Run | str | Path,
    metrics: str | Sequence[str] | Sequence[Measure] = DEFAULT_EVAL_MEASURES,
    *,
    complete: bool = False,
    rel_level: int = 1,
) -> RankingEvaluation:
    """Score ``run`` against ``qrels`` exactly as trec_eval would.

    Queries of the run that have no judgements are ignored; judged queries absent from the
    run are left out of the means unless ``complete`` (trec_eval ``-c``) scores them 0.
    ``qrels`` and ``run`` may be paths to TREC or BEIR files.
    """
    measures = _as_measures(metrics)
    qrels = qrels if isinstance(qrels, Qrels) else load_qrels(qrels)
    run = run if isinstance(run, Run) else load_run(run)
    judgements = rank_and_judge(qrels, run, complete=complete, rel_level=rel_level)
    values = compute(judgements, measures)
    n = judgements.n_queries
    per_query = pd.DataFrame(
        {
            "query_id": np.tile(judgements.query_ids, len(measures)),
            "metric": np.repeat([str(m) for m in measures], n),
            "value": np.concatenate([values[m] for m in measures]) if measures else [],
        }
    )
    return RankingEvaluation(per_query, tuple(measures), n)


def _as_measures(metrics) -> list[Measure]:
    if isinstance(metrics, str):
        return parse_measures(metrics)
    items = list(metrics)
    if items and all(isinstance(m, Measure) for m in items):
        return items
    return parse_measures([str(m) for m in items])
