"""The noise of a run with repeats: per query, how its answer metrics and verdicts vary from
repeat to repeat.

For every query and answer-side metric defined in two repeats or more: the mean, the standard
deviation (ddof 1) and the range (max − min) over its repeats, and ``flipped`` (1 when the
repeats do not all agree); for the verdicts ``refused`` and ``failure_class`` (the diagnosis),
``flipped`` alone. A metric's flip rate is the share of its queries that flipped.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.evaluation.measures import family_of
from rag_bench.runs import RunStore, open_runs

VERDICTS = ("refused", "failure_class")
GENERATED = ("claims", "answer", "refusal")  # the metric groups an answer moves (not context)
COLUMNS = ["query_id", "measure", "repeats", "mean", "std", "range", "flipped"]


def query_noise(metrics: pd.DataFrame, queries: pd.DataFrame) -> pd.DataFrame:
    """One row per (query, answer metric or verdict) with two defined repeats or more."""
    answer = metrics[[family_of(m).group in GENERATED for m in metrics["metric"]]]
    defined = answer.dropna(subset=["value"])
    spread = defined.groupby(["query_id", "metric"], observed=True)["value"].agg(
        repeats="count", mean="mean", std=lambda v: v.std(ddof=1), low="min", high="max"
    )
    spread = spread[spread["repeats"] > 1].reset_index()
    spread["range"] = spread["high"] - spread["low"]
    spread["flipped"] = (spread["range"] > 0).astype(float)
    spread = spread.rename(columns={"metric": "measure"})
    frames = [spread[COLUMNS]]
    for verdict in VERDICTS:
        grouped = queries.groupby("query_id", observed=True)[verdict]
        rows = pd.DataFrame({"repeats": grouped.count(), "kinds": grouped.nunique()})
        rows = rows[rows["repeats"] > 1].reset_index()
        rows["measure"], rows["mean"], rows["std"], rows["range"] = verdict, np.nan, np.nan, np.nan
        rows["flipped"] = (rows["kinds"] > 1).astype(float)
        frames.append(rows[COLUMNS])
    return pd.concat(frames, ignore_index=True)


def noise_summary(per_query: pd.DataFrame) -> pd.DataFrame:
    """Per metric or verdict: queries, flip rate and the mean std and range over queries."""
    grouped = per_query.groupby("measure", sort=False)
    return pd.DataFrame(
        {
            "queries": grouped.size(),
            "flip_rate": grouped["flipped"].mean(),
            "mean_std": grouped["std"].mean(),
            "mean_range": grouped["range"].mean(),
        }
    ).reset_index()


def run_noise(runs_dir: str | Path | RunStore | None, ref: str) -> tuple[pd.DataFrame, ...]:
    """The per-query noise of one stored run and its summary (empty without repeats)."""
    store = open_runs(runs_dir)
    run = store.get(ref)
    per_query = query_noise(store.metrics(run.run_id), store.queries(run.run_id))
    return per_query, noise_summary(per_query)
