"""A run's metrics summed up: the mean of each metric per slice."""

from __future__ import annotations

import pandas as pd

CATEGORY_ORDER = ("literal", "paraphrase", "multi-hop", "unanswerable")


def slice_order(labels) -> list[str]:
    """Slices in reading order: the built-in categories as the seeds order them, then the rest
    alphabetically."""
    labels = set(labels)
    known = [c for c in CATEGORY_ORDER if c in labels]
    return known + sorted(labels - set(known))


def slice_means(
    metrics: pd.DataFrame, names, by: str = "category", overall: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Mean of each metric per slice over defined values, and n per slice; the ``all`` row first,
    as in compare, then the slices in :func:`slice_order`. ``overall`` holds the rows of the
    ``all`` row when ``metrics`` has a row in several slices (default: ``metrics``)."""
    overall = metrics if overall is None else overall
    chosen = metrics[metrics["metric"].isin(list(names))]
    table = chosen.pivot_table(
        index=by, columns="metric", values="value", aggfunc="mean", dropna=False
    )
    everything = overall[overall["metric"].isin(list(names))]
    table.loc["all"] = everything.groupby("metric")["value"].mean()
    counts = metrics.groupby(by)["query_id"].nunique()
    counts.loc["all"] = overall["query_id"].nunique()
    order = ["all", *slice_order(str(s) for s in table.index if s != "all")]
    table = table.reindex(index=order, columns=[n for n in names if n in table.columns])
    table.insert(0, "n", counts.reindex(table.index).astype(int))
    return table.reset_index().rename(columns={by: by})
