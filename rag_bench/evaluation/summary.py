"""A run's metrics summed up: the mean of each metric per slice, and the headline metrics."""

from __future__ import annotations

import pandas as pd


def slice_means(metrics: pd.DataFrame, names, by: str = "category") -> pd.DataFrame:
    """Mean of each metric per slice over defined values, an ``all`` row, and n per slice."""
    chosen = metrics[metrics["metric"].isin(list(names))]
    table = chosen.pivot_table(
        index=by, columns="metric", values="value", aggfunc="mean", dropna=False
    )
    overall = chosen.groupby("metric")["value"].mean()
    table.loc["all"] = overall
    counts = metrics.groupby(by)["query_id"].nunique()
    counts.loc["all"] = metrics["query_id"].nunique()
    table = table.reindex(columns=[n for n in names if n in table.columns])
    table.insert(0, "n", counts.reindex(table.index).astype(int))
    return table.reset_index().rename(columns={by: by})


def headline_metrics(ks) -> list[str]:
    """Retrieval at k = 10 (or the largest cutoff below it), then the answer-side essentials."""
    below = [k for k in ks if k <= 10]
    k = max(below) if below else min(ks)
    return [
        f"recall@{k}",
        f"mrr@{k}",
        f"ndcg@{k}",
        "faithfulness",
        "key_fact_recall",
        "correct_refusal",
        "over_refusal",
    ]
