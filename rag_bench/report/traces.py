"""The stored traces of a few queries in a few runs: what the report shows beside each change.

Only the queries the report lists are read (not every trace), so the page stays small however
many queries the runs hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

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


def _quoted(names: Sequence[str]) -> str:
    return ", ".join("'" + n.replace("'", "''") + "'" for n in names)


def load_traces(con, run_ids: Sequence[str], query_ids: Sequence[str], cutoff: int) -> Traces:
    """The traces of ``query_ids`` in ``run_ids`` through a store connection."""
    if not query_ids or not run_ids:
        return Traces(
            pd.DataFrame(columns=QUERY_COLUMNS),
            pd.DataFrame(columns=RANKING_COLUMNS),
            pd.DataFrame(columns=CLAIM_COLUMNS),
            cutoff,
        )
    where = f"run_id IN ({_quoted(run_ids)}) AND query_id IN ({_quoted(query_ids)})"
    queries = con.sql(f"SELECT {', '.join(QUERY_COLUMNS)} FROM queries WHERE {where}").df()
    rankings = con.execute(
        f"SELECT {', '.join(RANKING_COLUMNS)} FROM retrieved WHERE {where} "
        "AND stage = 'documents' AND (rank <= ? OR relevance >= 1) ORDER BY run_id, query_id, rank",
        [cutoff],
    ).df()
    claims = con.sql(
        f"SELECT {', '.join(CLAIM_COLUMNS)} FROM claims WHERE {where} "
        "ORDER BY run_id, query_id, claim_id"
    ).df()
    return Traces(queries, rankings, claims, cutoff)
