"""Every read of stored traces that the analyses, the report and the command line make: the SQL
over a store connection's views (``queries``, ``metrics``, ``retrieved``, ``claims``).

Values reach DuckDB as bound parameters only (a list of names as one list parameter, tested
with ``list_contains``, which keeps the scan's row order); no name is ever spliced into a
statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from rag_bench.evaluation.measures import canonical_names, headline_metrics, not_stored
from rag_bench.pipeline import DOCUMENTS_STAGE

QUERY_COLUMNS = [
    "run_id",
    "query_id",
    "category",
    "query",
    "answer",
    "refused",
    "failure_class",
    "n_relevant",
]
RANKING_COLUMNS = ["run_id", "query_id", "rank", "doc_id", "relevance", "score"]
CLAIM_COLUMNS = [
    "run_id",
    "query_id",
    "claim_id",
    "text",
    "supported",
    "support_grade",
    "citations",
    "supported_by",
    "reason",
]


def stored_metrics(con) -> list[str]:
    """The names of the metrics the connection's runs hold, sorted."""
    return [r[0] for r in con.execute("SELECT DISTINCT metric FROM metrics ORDER BY 1").fetchall()]


def chosen_metrics(con, metrics: Sequence[str] | None, required: Sequence[str] = ()) -> list[str]:
    """The metrics asked for (canonical names), or the headline metrics the runs hold; each of
    ``required`` and of those asked for must be stored (else the error names the close ones)."""
    available = stored_metrics(con)
    chosen = canonical_names(metrics) if metrics else headline_metrics()
    # by default the headline metrics the runs hold; runs of imported scores (ragas:…) hold
    # none of them, and then every metric they hold is compared
    chosen = chosen if metrics else [m for m in chosen if m in available] or available
    for name in [*required, *chosen]:
        if name not in available:
            raise not_stored("metric in these runs", name, available)
    return chosen


def metric_values(con, metrics: Sequence[str], defined_only: bool = False) -> pd.DataFrame:
    """run_id, query_id, metric, value, repeat of ``metrics`` in every run (NULLs too unless
    ``defined_only``); a run with repeats has one row per repeat."""
    defined = " AND value IS NOT NULL" if defined_only else ""
    return con.execute(
        'SELECT run_id, query_id, metric, value, "repeat" FROM metrics '
        f"WHERE list_contains(?, metric){defined}",
        [list(metrics)],
    ).df()


def run_metric_values(con, run_id: str) -> pd.DataFrame:
    """query_id, metric, value of every metric of one run (repeat 0 of a run with repeats)."""
    return con.execute(
        'SELECT query_id, metric, value FROM metrics WHERE run_id = ? AND "repeat" = 0', [run_id]
    ).df()


def metric_means(con, metrics: Sequence[str]) -> pd.DataFrame:
    """run_id, metric, mean of ``metrics`` in every run (over defined values)."""
    return con.execute(
        "SELECT run_id, metric, avg(value) AS mean FROM metrics "
        "WHERE list_contains(?, metric) GROUP BY ALL",
        [list(metrics)],
    ).df()


def query_rows(con, columns: Sequence[str], run_id: str | None = None) -> pd.DataFrame:
    """The ``columns`` of the queries table (known column names, never user text): of every
    run, or of ``run_id``; one row per query (repeat 0 of a run with repeats)."""
    listed = ", ".join(columns)
    if run_id is None:
        return con.execute(f'SELECT {listed} FROM queries WHERE "repeat" = 0').df()
    return con.execute(
        f'SELECT {listed} FROM queries WHERE run_id = ? AND "repeat" = 0', [run_id]
    ).df()


def relevant_top(con, run_id: str, k: int) -> dict[str, dict[str, int]]:
    """query id -> {relevant document: rank} over the top ``k`` of a run's document ranking."""
    rows = con.execute(
        "SELECT query_id, doc_id, rank FROM retrieved WHERE run_id = ? AND stage = ? "
        "AND relevance >= 1 AND rank <= ?",
        [run_id, DOCUMENTS_STAGE, k],
    ).fetchall()
    out: dict[str, dict[str, int]] = {}
    for query_id, doc_id, rank in rows:
        out.setdefault(query_id, {})[doc_id] = rank
    return out


def paired_changes(con, old: str, new: str, metric: str) -> pd.DataFrame:
    """Per query both runs define ``metric`` for: its value before (``old``) and after
    (``new``), the delta, the category, both failure classes and both answers (of repeat 0, in
    a run with repeats)."""
    return con.execute(
        "SELECT o.query_id, q.category, o.value AS before, n.value AS after, "
        "n.value - o.value AS delta, "
        "qo.failure_class AS failure_before, q.failure_class AS failure_after, "
        "qo.answer AS answer_before, q.answer AS answer_after "
        "FROM metrics o JOIN metrics n ON o.query_id = n.query_id AND o.metric = n.metric "
        "JOIN queries q ON q.run_id = n.run_id AND q.query_id = n.query_id "
        "JOIN queries qo ON qo.run_id = o.run_id AND qo.query_id = o.query_id "
        "WHERE o.run_id = ? AND n.run_id = ? AND o.metric = ? "
        "AND o.value IS NOT NULL AND n.value IS NOT NULL "
        'AND o."repeat" = 0 AND n."repeat" = 0 AND q."repeat" = 0 AND qo."repeat" = 0',
        [old, new, metric],
    ).df()


@dataclass(frozen=True)
class Traces:
    """Per (run, query): the query row, its document ranking (the top ``cutoff`` and every
    relevant document further down) and its claims."""

    queries: pd.DataFrame
    rankings: pd.DataFrame
    claims: pd.DataFrame
    cutoff: int

    def of(self, run_id: str, query_id: str):
        """The query row (a Series, or None when the run lacks the query), ranking and claims."""

        def mine(frame: pd.DataFrame) -> pd.DataFrame:
            return frame[(frame["run_id"] == run_id) & (frame["query_id"] == query_id)]

        row = mine(self.queries)
        return (row.iloc[0] if len(row) else None), mine(self.rankings), mine(self.claims)


def load_traces(con, run_ids: Sequence[str], query_ids: Sequence[str], cutoff: int) -> Traces:
    """The traces of ``query_ids`` in ``run_ids`` through a store connection (only those: the
    report reads a few queries, however many the runs hold)."""
    if not query_ids or not run_ids:
        return Traces(
            pd.DataFrame(columns=QUERY_COLUMNS),
            pd.DataFrame(columns=RANKING_COLUMNS),
            pd.DataFrame(columns=CLAIM_COLUMNS),
            cutoff,
        )
    where = "list_contains(?, run_id) AND list_contains(?, query_id)"
    chosen = [list(run_ids), list(query_ids)]
    answered = f'{where} AND "repeat" = 0'  # a run with repeats: its repeat 0
    queries = con.execute(
        f"SELECT {', '.join(QUERY_COLUMNS)} FROM queries WHERE {answered}", chosen
    ).df()
    rankings = con.execute(
        f"SELECT {', '.join(RANKING_COLUMNS)} FROM retrieved WHERE {where} "
        "AND stage = ? AND (rank <= ? OR relevance >= 1) ORDER BY run_id, query_id, rank",
        [*chosen, DOCUMENTS_STAGE, cutoff],
    ).df()
    claims = con.execute(
        f"SELECT {', '.join(CLAIM_COLUMNS)} FROM claims WHERE {answered} "
        "ORDER BY run_id, query_id, claim_id",
        chosen,
    ).df()
    return Traces(queries, rankings, claims, cutoff)


def top_documents(con, run_ids: Sequence[str], k: int) -> pd.DataFrame:
    """run_id, query_id, rank, doc_id of the top ``k`` of each run's document ranking, with the
    query's text, whether it should be refused and the run's answer (of repeat 0), ordered by
    run, query and rank."""
    return con.execute(
        "SELECT r.run_id, r.query_id, r.rank, r.doc_id, q.query, q.should_refuse, q.answer "
        "FROM retrieved r JOIN queries q ON q.run_id = r.run_id AND q.query_id = r.query_id "
        'WHERE list_contains(?, r.run_id) AND r.stage = ? AND r.rank <= ? AND q."repeat" = 0 '
        "ORDER BY r.run_id, r.query_id, r.rank",
        [list(run_ids), DOCUMENTS_STAGE, k],
    ).df()


def claim_verdicts(con, run_id: str) -> pd.DataFrame:
    """Per claim of a run (repeat 0): query_id, claim_id, its text, citations, the judge's
    verdict (supported, support_grade, supported_by, judge) and the query's text, answer and
    failure class, ordered by query and claim."""
    return con.execute(
        "SELECT c.query_id, c.claim_id, c.text, c.citations, c.supported, c.support_grade, "
        "c.supported_by, c.judge, q.query, q.answer, q.failure_class "
        "FROM claims c JOIN queries q ON q.run_id = c.run_id AND q.query_id = c.query_id "
        'AND q."repeat" = c."repeat" WHERE c.run_id = ? AND c."repeat" = 0 '
        "ORDER BY c.query_id, c.claim_id",
        [run_id],
    ).df()
