"""Turning library results into the tables the CLI prints (compute, tabulate, render)."""

from __future__ import annotations

import pandas as pd

from rag_bench.evaluation.retrieval import RankingEvaluation
from rag_bench.render import as_records, render, to_json


def evaluation_table(result: RankingEvaluation, per_query: bool) -> pd.DataFrame:
    """Means as metric/value rows; with ``per_query`` one row per query plus an ``all`` row."""
    means = result.means()
    if not per_query:
        return pd.DataFrame({"metric": list(means), "value": list(means.values())})
    wide = result.wide().reset_index()
    wide["query_id"] = wide["query_id"].astype(str)
    total = pd.DataFrame([{"query_id": "all", **means}])
    return pd.concat([wide, total], ignore_index=True)


def evaluation_output(result: RankingEvaluation, fmt: str, per_query: bool = False) -> str:
    if fmt == "json":
        payload: dict = {"n_queries": result.n_queries, "means": result.means()}
        if per_query:
            payload["per_query"] = as_records(result.per_query)
        return to_json(payload)
    text = render(evaluation_table(result, per_query), fmt)
    if fmt == "table":
        text += f"\n\nqueries evaluated: {result.n_queries}"
    return text
