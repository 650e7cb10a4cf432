"""Which metrics moved between the runs a table shows: the metrics whose change is significant
or worse in their metric's direction, so that a table too wide for the terminal keeps them
before the others.

Each run is paired with a reference run (the first one shown on its dataset) over the queries
both define the metric for; per metric and run, the paired randomization test gives p, Holm
adjusts the p of every (run, metric) pair together, and a metric moved when some run differs
from its reference with adjusted p < ``alpha`` (significant) or has a mean worse than the
reference's (regressed). Computed from per-query values in memory; nothing is read here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rag_bench.evaluation.measures import improvement
from rag_bench.evaluation.stats import holm, randomization_tests

RESAMPLES = 2_000  # enough to tell p < 0.05 apart for choosing columns; compare uses its own
TOLERANCE = 1e-12  # a mean change smaller than this is no change (float noise)


@dataclass(frozen=True)
class Moved:
    """A metric that moved: why (``regressed``, ``significant`` or both) and the smallest
    adjusted p of its changes (the most moved first when several must be kept)."""

    metric: str
    why: str
    p_adjusted: float


def first_on_each_dataset(runs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Each run's reference: the first of ``runs`` (``(run_id, dataset)`` in the order shown)
    on the same dataset; a run that is its own reference is left out."""
    first: dict[str, str] = {}
    references = {}
    for run_id, dataset in runs:
        first.setdefault(dataset, run_id)
        if first[dataset] != run_id:
            references[run_id] = first[dataset]
    return references


def moved_metrics(
    values: pd.DataFrame,
    references: Mapping[str, str],
    metrics: Sequence[str],
    alpha: float = 0.05,
    seed: int = 0,
) -> list[Moved]:
    """The ``metrics`` that moved between each run and its reference (``references``: run id
    → reference run id), most moved first. ``values`` has one row per run, query, metric and
    repeat (``run_id``, ``query_id``, ``metric``, ``value``); repeats are averaged per query,
    undefined values (NaN) leave the query out of that metric's pairs."""
    if not references or values.empty:
        return []
    wanted = values[values["metric"].isin(list(metrics)) & values["value"].notna()]
    wanted = wanted.astype({"run_id": str, "query_id": str, "metric": str})
    means = wanted.groupby(["metric", "run_id", "query_id"], sort=False)["value"].mean()
    by_run = {key: frame.droplevel([0, 1]) for key, frame in means.groupby(level=[0, 1])}
    pairs, differences = [], []
    for metric in metrics:
        for run, reference in references.items():
            a, b = by_run.get((metric, reference)), by_run.get((metric, run))
            if a is None or b is None:
                continue
            shared = a.index.intersection(b.index, sort=False)
            if len(shared):
                pairs.append(metric)
                differences.append(b.loc[shared].to_numpy() - a.loc[shared].to_numpy())
    if not pairs:
        return []
    adjusted = holm(randomization_tests(differences, RESAMPLES, seed))
    found: dict[str, tuple[set[str], float]] = {}
    for metric, d, p in zip(pairs, differences, adjusted):
        why = set()
        if improvement(metric, float(np.mean(d))) < -TOLERANCE:
            why.add("regressed")
        if p < alpha:
            why.add("significant")
        if why:
            kinds, lowest = found.get(metric, (set(), 1.0))
            found[metric] = (kinds | why, min(lowest, float(p)))
    order = {name: i for i, name in enumerate(metrics)}
    moved = [Moved(metric, ", ".join(sorted(kinds)), p) for metric, (kinds, p) in found.items()]
    return sorted(moved, key=lambda m: (m.p_adjusted, order[m.metric]))
