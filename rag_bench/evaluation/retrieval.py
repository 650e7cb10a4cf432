"""Ranking metrics computed the way trec_eval computes them, vectorised over all queries.

A run and its qrels are first flattened into :class:`RankedJudgements`: one row per retrieved
document graded above 0, sorted by query and rank, carrying the document's grade. Each metric
family is then a small kernel over those arrays that returns one value per query; means are
taken once, at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rag_bench.data.qrels import Qrels, load_qrels
from rag_bench.data.rankings import Run, load_run
from rag_bench.errors import DataError, check_number
from rag_bench.evaluation.measures import (
    DEFAULT_EVAL_MEASURES,
    RANKING,
    Measure,
    parse_measures,
)
from rag_bench.io.idhash import ROW_BLOCK, IdColumn, combine_keys, grouped_join, scaled_keys
from rag_bench.io.tabular import run_starts


@dataclass(frozen=True)
class RankedJudgements:
    """Flat, query-sorted arrays that every metric kernel reads.

    Only retrieved documents graded above 0 matter to any metric, so only they are kept: one row
    each, sorted by query and rank.
    """

    query_ids: np.ndarray  # the evaluated queries, sorted; index i is query i below
    qidx: np.ndarray  # per positively graded retrieved row: query index
    pos: np.ndarray  # per positively graded retrieved row: 0-based rank within its query
    grade: np.ndarray  # per positively graded retrieved row: its grade (> 0)
    rel: np.ndarray  # per positively graded retrieved row: grade >= rel_level
    num_rel: np.ndarray  # per query: judged documents with grade >= rel_level
    ideal_qidx: np.ndarray  # per positively graded judgement, sorted by (query, grade desc)
    ideal_pos: np.ndarray
    ideal_grade: np.ndarray
    judged_qidx: np.ndarray  # per judged retrieved row (any grade): query index
    judged_pos: np.ndarray  # per judged retrieved row: 0-based rank within its query
    n_retrieved: np.ndarray  # per query: documents retrieved

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)


def _used(codes: np.ndarray, n_categories: int) -> np.ndarray:
    if len(codes) and codes.min() < 0:  # missing values
        codes = codes[codes >= 0]
    used = np.zeros(n_categories, dtype=bool)
    used[codes] = True  # unlike bincount, no copy of the codes as 64-bit integers
    return used


def _positions(qidx_sorted: np.ndarray) -> np.ndarray:
    """0-based position of each row within its run of equal ``qidx_sorted`` values."""
    n = len(qidx_sorted)
    starts = run_starts(qidx_sorted)
    lengths = np.diff(np.r_[starts, n])
    return np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)


def _grouped_in_order(query_codes: np.ndarray, starts: np.ndarray, score) -> bool:
    """Whether each query's rows are contiguous (``starts``: where a new query begins) and,
    given scores, sorted by score descending, in any query order, as in nearly every run file:
    then no sort is needed."""
    heads = query_codes[starts]
    if len(np.unique(heads)) != len(heads):  # a query comes back later
        return False
    if score is None:
        return True
    rises = np.flatnonzero(score[1:] > score[:-1])  # allowed only where a new query begins
    return bool(np.all(query_codes[rises] != query_codes[rises + 1]))


def _names(categories: pd.Index) -> pd.Index:
    """Category labels as an object Index of strings (ids are strings everywhere)."""
    if categories.dtype == object:
        return categories
    return pd.Index(categories.astype(str), dtype=object)


def _ranks(
    rows: np.ndarray, query_codes, starts, score, doc_ids: IdColumn, ordered: bool
) -> np.ndarray:
    """The 0-based rank of each of ``rows`` within its query.

    An ordered run ranks rows as they come. Otherwise the ranking is trec_eval's: score
    descending, ties broken by doc id descending. When the rows already come grouped by query
    and sorted (nearly every run file), a rank is the distance from the query's first row; only
    rows that tie with a neighbour on score are looked at by doc id. ``starts``: where each run
    of equal query codes begins.
    """
    keys = None if ordered else score
    rank_of: Callable[[np.ndarray], np.ndarray]
    if _grouped_in_order(query_codes, starts, keys):
        order = None
        rank_of = partial(_distance_from_start, starts)
    else:
        order = _sorted_order(query_codes, keys)
        every = np.empty(len(query_codes), dtype=np.int64)
        every[order] = _positions(query_codes[order])
        rank_of = every.__getitem__
    ranks = rank_of(rows)
    if not ordered:
        _override(ranks, rows, *_tie_ranks(query_codes, score, doc_ids, order, rank_of))
    return ranks


def _override(ranks: np.ndarray, rows: np.ndarray, listed: np.ndarray, listed_ranks) -> None:
    """``ranks[i] = listed_ranks[j]`` wherever ``rows[i] == listed[j]`` (``listed`` sorted)."""
    if len(listed) == 0:
        return
    at = np.minimum(np.searchsorted(listed, rows), len(listed) - 1)
    hit = listed[at] == rows
    ranks[hit] = listed_ranks[at[hit]]


def _distance_from_start(starts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return rows - starts[np.searchsorted(starts, rows, side="right") - 1]


def _sorted_order(query_codes: np.ndarray, score: np.ndarray | None) -> np.ndarray:
    if score is None:
        return np.argsort(query_codes, kind="stable")
    return np.lexsort((-score, query_codes))


def _tie_ranks(query_codes, score, doc_ids: IdColumn, order, rank_of):
    """The rows that tie with a neighbour on (query, score), sorted, and their trec_eval ranks:
    each block of tied rows takes the block's ranks by doc id descending.

    ``order`` lists the rows by (query, score descending) (``None``: they already come so).
    """
    q = query_codes if order is None else query_codes[order]
    s = score if order is None else score[order]
    tied_next = (q[1:] == q[:-1]) & (s[1:] == s[:-1])
    tied = np.zeros(len(q), dtype=bool)
    tied[:-1] |= tied_next
    tied[1:] |= tied_next
    at = np.flatnonzero(tied)
    # one id per run of equal (query, score), numbered over the tied rows only
    follows_tie = np.zeros(len(at), dtype=bool)
    follows_tie[1:] = tied_next[at[1:] - 1]
    block = np.cumsum(~follows_tie)
    rows = at if order is None else order[at]
    tied_rows = pa.table({"block": block, "doc_id": doc_ids.take(rows)})
    # Arrow compares strings byte by byte, as trec_eval's strcmp does
    within = pc.sort_indices(
        tied_rows, sort_keys=[("block", "ascending"), ("doc_id", "descending")]
    ).to_numpy()
    reordered, ranks = rows[within], rank_of(rows)  # a block's ranks, handed out in name order
    by_row = np.argsort(reordered)
    return reordered[by_row], ranks[by_row]


@dataclass(frozen=True)
class _Queries:
    """A table's query column: per row a code, per code the index of the query among the
    evaluated ones (-1: not evaluated)."""

    codes: np.ndarray
    index_of_code: np.ndarray
    starts: np.ndarray  # where each run of equal codes begins (a query's rows, in most runs)

    @classmethod
    def of(cls, query_ids: pd.Series, evaluated: pd.Index, starts=None) -> _Queries:
        """``starts``: the codes' :func:`run_starts`, when already known."""
        column = query_ids.array  # a Categorical: its codes are a view, not a copy
        index_of_code = evaluated.get_indexer(_names(column.categories)).astype(np.int64)
        starts = run_starts(column.codes) if starts is None else starts
        return cls(column.codes, index_of_code, starts)

    def index(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The query index of ``rows`` (of every row when None)."""
        return self.index_of_code[self.codes if rows is None else self.codes[rows]]


def _matching_judgements(
    run_queries: _Queries, run_docs: IdColumn, qrels_qidx: np.ndarray, qrels_docs: IdColumn
):
    """Every (run row, qrels row) pair of the same evaluated query and document, as two arrays.

    Both sides are keyed by a 64-bit hash of (query, document); run rows are first filtered
    through a bit table of the qrels' keys, the survivors looked up among those keys, and each
    pair found is then confirmed by comparing the ids themselves, so hash collisions cost time,
    never exactness.
    """
    pairs = _grouped_pairs(run_queries, run_docs, qrels_qidx, qrels_docs)
    if pairs is None:
        pairs = _hashed_pairs(run_queries, run_docs, qrels_qidx, qrels_docs)
    rows, entries = pairs
    same = run_queries.index(rows) == qrels_qidx[entries]
    same &= pc.equal(run_docs.take(rows), qrels_docs.take(entries)).to_numpy(zero_copy_only=False)
    return rows[same], entries[same]


def _grouped_pairs(
    run_queries: _Queries, run_docs: IdColumn, qrels_qidx: np.ndarray, qrels_docs: IdColumn
):
    """The pairs of equal document hashes, query by query: each group of a run's rows of one
    query is looked up in a hash set of that query's judgements (compiled; None without it)."""
    starts = run_queries.starts
    judged = np.flatnonzero(qrels_qidx >= 0)
    by_query = judged[np.argsort(qrels_qidx[judged], kind="stable")]
    n_queries = 1 + max(qrels_qidx.max(initial=-1), run_queries.index_of_code.max(initial=-1))
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(np.bincount(qrels_qidx[by_query], minlength=n_queries), out=offsets[1:])
    heads = run_queries.codes[starts]
    group_query = np.where(heads >= 0, run_queries.index_of_code[heads], -1)  # -1: missing id
    pairs = grouped_join(
        starts,
        group_query,
        run_docs.hashes(),
        offsets,
        qrels_docs.hashes()[by_query],
    )
    return None if pairs is None else (pairs[0], by_query[pairs[1]])


def _hashed_pairs(
    run_queries: _Queries, run_docs: IdColumn, qrels_qidx: np.ndarray, qrels_docs: IdColumn
):
    """The pairs of equal (query, document) hashes, all rows at once, in numpy."""
    judged = np.flatnonzero(qrels_qidx >= 0)
    judged_keys = combine_keys(qrels_qidx[judged], qrels_docs.hashes()[judged])
    rows, run_keys = _candidates(run_queries, run_docs.hashes(), judged_keys)
    by_key = np.argsort(judged_keys, kind="stable")
    sorted_keys = judged_keys[by_key]
    first = run_starts(sorted_keys)
    count = np.diff(np.r_[first, len(sorted_keys)])
    found = pd.Index(sorted_keys[first]).get_indexer(run_keys)
    rows, found = rows[found >= 0], found[found >= 0]
    # expand each row to all judgements sharing its key (one, unless hashes collided)
    n_pairs = count[found]
    rows = np.repeat(rows, n_pairs)
    within = np.arange(len(rows)) - np.repeat(np.cumsum(n_pairs) - n_pairs, n_pairs)
    return rows, judged[by_key[np.repeat(first[found], n_pairs) + within]]


def _candidates(run_queries: _Queries, doc_hashes: np.ndarray, judged_keys: np.ndarray):
    """The run rows whose (query, document) key may be among ``judged_keys``, and their keys.

    A bit table of the judged keys' low bits, about 16 slots per key, rules out most rows for one
    memory access each. Rows are keyed a block at a time, so no key array of the run's length is
    ever allocated and the temporaries stay in cache.
    """
    bits = max(int(len(judged_keys) * 16).bit_length(), 10)
    mask = np.uint64((1 << bits) - 1)
    table = np.zeros(1 << bits, dtype=bool)
    table[judged_keys & mask] = True
    scaled = scaled_keys(run_queries.index_of_code)  # combine_keys, one factor per query code
    rows, keys = [], []
    for start in range(0, len(doc_hashes), ROW_BLOCK):
        key = scaled[run_queries.codes[start : start + ROW_BLOCK]]
        key += doc_hashes[start : start + ROW_BLOCK]
        hit = np.flatnonzero(table[key & mask])
        rows.append(hit + start)
        keys.append(key[hit])
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    return np.concatenate(rows), np.concatenate(keys)


def _evaluated_queries(qrels: Qrels, run: Run, starts: np.ndarray, complete: bool) -> pd.Index:
    """The queries to score, sorted: judged ones that the run retrieved for (all, if complete).
    ``starts``: where each run of equal query codes of the run begins."""
    q_query = qrels.frame["query_id"].array  # Categoricals
    r_query = run.frame["query_id"].array
    judged = _names(q_query.categories)[_used(q_query.codes, len(q_query.categories))]
    # every code of the run starts a run of equal codes somewhere
    retrieved = _names(r_query.categories)[_used(r_query.codes[starts], len(r_query.categories))]
    if not complete and len(judged.intersection(retrieved)) == 0 and len(run) > 0:
        raise DataError(
            run.source,
            f"no query of the run appears in the qrels ({qrels.source})",
            "check that the run and the qrels belong to the same collection",
        )
    evaluated = judged if complete else judged.intersection(retrieved)
    return pd.Index(np.sort(evaluated.to_numpy(dtype=object)), dtype=object)


def rank_and_judge(
    qrels: Qrels, run: Run, *, complete: bool = False, rel_level: int = 1
) -> RankedJudgements:
    """Join a run with its qrels over the queries to evaluate (trec_eval's rules)."""
    check_number("rel_level", rel_level, 1, whole=True)
    starts = run_starts(run.frame["query_id"].array.codes)
    evaluated = _evaluated_queries(qrels, run, starts, complete)
    run_queries = _Queries.of(run.frame["query_id"], evaluated, starts)
    qrels_qidx = _Queries.of(qrels.frame["query_id"], evaluated).index()
    grades = qrels.frame["grade"].to_numpy(dtype=np.int64)

    run_docs = IdColumn.of(run.frame["doc_id"])
    rows, entries = _matching_judgements(
        run_queries, run_docs, qrels_qidx, IdColumn.of(qrels.frame["doc_id"])
    )
    every_pos = _ranks(
        rows,
        run_queries.codes,
        run_queries.starts,
        run.frame["score"].to_numpy(),
        run_docs,
        run.ordered,
    )
    judged_qidx = run_queries.index(rows)
    graded = grades[entries] > 0
    pos, entries = every_pos[graded], entries[graded]
    qidx, grade = judged_qidx[graded], grades[entries]
    by_rank = np.lexsort((pos, qidx))
    qidx, pos, grade = qidx[by_rank], pos[by_rank], grade[by_rank]

    n = len(evaluated)
    runs = np.diff(np.append(starts, len(run_queries.codes)))
    head_codes = run_queries.codes[starts]
    present = head_codes >= 0
    per_code = np.bincount(head_codes[present], weights=runs[present]).astype(np.int64)
    n_retrieved = np.zeros(n, dtype=np.float64)
    scored = np.flatnonzero(run_queries.index_of_code[: len(per_code)] >= 0)
    n_retrieved[run_queries.index_of_code[scored]] = per_code[scored]
    counted = qrels_qidx >= 0
    num_rel = np.bincount(qrels_qidx[counted & (grades >= rel_level)], minlength=n).astype(
        np.float64
    )
    positive = counted & (grades > 0)
    ideal_order = np.lexsort((-grades[positive], qrels_qidx[positive]))
    ideal_qidx = qrels_qidx[positive][ideal_order]
    return RankedJudgements(
        query_ids=evaluated.to_numpy(dtype=object),
        qidx=qidx,
        pos=pos,
        grade=grade,
        rel=grade >= rel_level,
        num_rel=num_rel,
        ideal_qidx=ideal_qidx,
        ideal_pos=_positions(ideal_qidx),
        ideal_grade=grades[positive][ideal_order],
        judged_qidx=judged_qidx,
        judged_pos=every_pos,
        n_retrieved=n_retrieved,
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


def judged(j: RankedJudgements, k: int) -> np.ndarray:
    # ir_measures' Judged@k: over min(k, retrieved), so a short ranking is not penalised
    in_top = _per_query(j, j.judged_qidx[j.judged_pos < k])
    return _ratio(in_top, np.minimum(float(k), j.n_retrieved))


def _within_query_cumsum(qidx: np.ndarray, values: np.ndarray) -> np.ndarray:
    total = np.cumsum(values, dtype=np.int64)
    if len(total) == 0:
        return total
    starts = np.r_[True, qidx[1:] != qidx[:-1]]
    before = (total - values)[starts]
    group = np.cumsum(starts) - 1
    return total - before[group]


# a kernel takes the judgements and a cutoff (int, or None where the metric has none)
KERNELS: dict[str, Callable[..., np.ndarray]] = {
    "precision": precision,
    "recall": recall,
    "hit": hit,
    "mrr": mrr,
    "ndcg": ndcg,
    "ndcg_exp": ndcg_exp,
    "map": average_precision,
    "rprec": rprec,
    "judged": judged,
}


# --- evaluation -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RankingEvaluation:
    """Per-query values (long form: query_id, metric, value) and their means."""

    per_query: pd.DataFrame
    measures: tuple[Measure, ...]
    n_queries: int
    # judged queries without a relevant document: scored 0 by trec_eval's convention (a
    # pipeline run leaves an unanswerable query undefined instead)
    n_without_relevant: int = 0

    def convention_note(self) -> str | None:
        """How the queries without a relevant document were counted (None when none)."""
        n = self.n_without_relevant
        if not n:
            return None
        return (
            f"{n} of the {self.n_queries} queries have no relevant document: scored 0 and "
            "counted in every mean (trec_eval's convention); rag-bench runs leave an "
            "unanswerable query's retrieval metrics undefined instead"
        )

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
    without = int((np.asarray(judgements.num_rel) == 0).sum())
    return RankingEvaluation(per_query, tuple(measures), n, without)


def _as_measures(metrics) -> list[Measure]:
    if isinstance(metrics, str):
        return parse_measures(metrics, groups=(RANKING,))
    items = list(metrics)
    if items and all(isinstance(m, Measure) for m in items):
        return items
    return parse_measures([str(m) for m in items], groups=(RANKING,))
