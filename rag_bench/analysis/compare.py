"""Comparing stored runs: paired statistics per slice and metric, the first run the baseline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.analysis import shown
from rag_bench.analysis.pairing import TIE, Pair, comparable_runs, paired_values
from rag_bench.analysis.qrels_check import qrels_differ
from rag_bench.analysis.reads import chosen_metrics, metric_values, query_rows
from rag_bench.analysis.slices import check_slice, dataset_of, query_slices
from rag_bench.errors import RagBenchError, UnknownNameError, check_number
from rag_bench.evaluation.measures import improvement
from rag_bench.evaluation.stats import (
    MAX_RESAMPLES,
    TESTS,
    bootstrap_cis,
    holm,
    minimum_detectable_effect,
    paired_p_values,
    queries_needed,
    two_level_bootstrap_ci,
)
from rag_bench.runs import RunStore, open_runs

COLUMNS = [
    "slice",
    "metric",
    "run_a",
    "run_b",
    "mean_a",
    "mean_b",
    "delta",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "wins",
    "ties",
    "losses",
    "n",
    "mde",
    "significant",
]


@dataclass(frozen=True)
class Comparison:
    """One row per (compared run, slice, metric); ``n_paired`` queries per compared run."""

    rows: pd.DataFrame
    n_paired: dict[str, int]
    test: str
    alpha: float
    # metrics with one value in every query of every compared run: nothing to compare
    constant: dict[str, float] = field(default_factory=dict)
    # the paired values behind each row, in the rows' order
    pairs: list[Pair] = field(default_factory=list, repr=False)
    # what a reader must know before trusting the table (one line each)
    warnings: list[str] = field(default_factory=list)

    def _view(self):
        columns = [c for c in shown.COMPARISON_COLUMNS if c in self.rows.columns]
        title = shown.comparison_title(self.rows, self.n_paired, self.test, self.alpha)
        notes = [f"{m}: {v:g} in every query of every run" for m, v in self.constant.items()]
        return title, self.rows[columns], notes

    def __repr__(self) -> str:
        return shown.text_view(*self._view())

    def _repr_html_(self) -> str:
        return shown.html_view(*self._view())


def constant_metrics(values: pd.DataFrame) -> dict[str, float]:
    """Metrics whose defined values are one number throughout (faithfulness 1.0 in every query
    of every run), with that number."""
    defined = values.dropna(subset=["value"])
    spread = defined.groupby("metric")["value"].agg(["min", "max"])
    same = spread[spread["min"] == spread["max"]]
    return {str(metric): float(value) for metric, value in same["min"].items()}


def _statistics(
    pairs: list[tuple[np.ndarray, np.ndarray]],
    metrics: list[str],
    test: str,
    resamples: int,
    seed: int,
) -> list[dict]:
    """Means, delta, bootstrap interval, p-value and wins/ties/losses of each (a, b) pair of
    value arrays of ``metrics``; computed together, so the resamples of pairs with as many
    queries are drawn once (the numbers are those of one pair at a time)."""
    ds = [b - a for a, b in pairs]
    intervals = bootstrap_cis(ds, resamples=resamples, seed=seed)
    p_values = paired_p_values(ds, test, resamples, seed)
    return [
        _row(d, a, b, *ci, p, improvement(m, d))
        for d, (a, b), ci, p, m in zip(ds, pairs, intervals, p_values, metrics)
    ]


def _row(d, a, b, low: float, high: float, p: float, gain: np.ndarray) -> dict:
    """One pair's numbers; ``gain`` is ``d`` turned so that positive is better (a win)."""
    return {
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "delta": float(d.mean()),
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
        "wins": int(np.sum(gain > TIE)),
        "ties": int(np.sum(np.abs(d) <= TIE)),
        "losses": int(np.sum(gain < -TIE)),
        "n": len(d),
    }


def check_options(test: str, alpha: float, resamples: int, seed: int, mde: float | None) -> None:
    if test not in TESTS:
        raise UnknownNameError("test", test, list(TESTS))
    check_number("alpha", alpha, 0, 1, open_low=True, open_high=True)
    check_number("resamples", resamples, 1, MAX_RESAMPLES, whole=True)
    check_number("seed", seed, 0, whole=True)
    if mde is not None:
        check_number("mde", mde, 0, open_low=True)


def paired_table(
    pairs: list[Pair], test: str, alpha: float, resamples: int, seed: int
) -> pd.DataFrame:
    """compare's rows of ``pairs``: the statistics, Holm over the whole table, the MDE."""
    arrays = [(p.a, p.b) for p in pairs]
    stats = _statistics(arrays, [p.metric for p in pairs], test, resamples, seed)
    for pair, row in zip(pairs, stats):  # runs with repeats: the noise in the interval too
        if pair.a_repeats is not None and pair.b_repeats is not None:
            interval = two_level_bootstrap_ci(pair.a_repeats, pair.b_repeats, 0.95, resamples, seed)
            row["ci_low"], row["ci_high"] = interval
    table = pd.DataFrame([p.key() | row for p, row in zip(pairs, stats)])
    if table.empty:
        raise RagBenchError(
            "the runs share no query with a defined value",
            "check that they ran on the same queries",
        )
    table.insert(
        table.columns.get_loc("p_value") + 1, "p_adjusted", holm(table["p_value"].to_numpy())
    )
    table["significant"] = table["p_adjusted"] < alpha
    table["mde"] = [minimum_detectable_effect(p.differences, alpha) for p in pairs]
    return table


def compare(
    runs_dir: str | Path | RunStore | None,
    refs: Sequence[str],
    *,
    slice_by: str | None = "category",
    metrics: Sequence[str] | None = None,
    test: str = "randomization",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
    allow_mismatch: bool = False,
    mde: float | None = None,
) -> Comparison:
    """Compare every run after the first with the first, paired over their shared queries.

    Each row also gives ``mde``, the smallest delta its test detects with 80 % power at
    ``alpha`` for the paired n and the observed spread of the differences; with ``mde`` (a
    delta to plan for), ``n_needed`` is how many such queries would detect it.

    Per slice (plus ``all``; see :mod:`rag_bench.analysis.slices`) and metric: both means, the
    delta (b − a), a 95% bootstrap interval of the delta, the paired test's p-value,
    Holm–Bonferroni across the whole table, and wins / ties / losses (a win is a change for the
    better, which for a lower-is-better metric is a fall). A metric undefined for a query (NULL)
    leaves that query out. A run with repeats counts each query once, at the mean of its
    repeats, and the interval is a two-level bootstrap (queries, then each query's repeats:
    :func:`~rag_bench.evaluation.stats.two_level_bootstrap_ci`), so it holds the noise of the
    sampling components too; the test's p-value is over the query means. ``runs_dir`` is the
    runs folder (a path, URL or :class:`RunStore`; None: the default).
    """
    check_options(test, alpha, resamples, seed, mde)
    check_slice(slice_by)
    store = open_runs(runs_dir)
    runs = comparable_runs(store, refs, allow_mismatch)
    con = store.connect(runs)
    chosen = chosen_metrics(con, metrics)
    values = metric_values(con, chosen)
    queries = query_rows(con, ["run_id", "query_id", "category", "tags", "failure_class"])
    labels = query_slices(queries, slice_by, [runs[0].run_id], dataset_of(runs[0]))
    pairs, n_paired = paired_values(values, queries, runs, chosen, labels)
    table = paired_table(pairs, test, alpha, resamples, seed)
    columns = list(COLUMNS)
    if mde is not None:
        table["n_needed"] = [queries_needed(p.differences, mde, alpha) for p in pairs]
        columns.append("n_needed")
    warnings = judged_gaps(con, runs, pairs) + qrels_differ(runs)
    constant = constant_metrics(values)
    return Comparison(table[columns], n_paired, test, alpha, constant, pairs, warnings)


JUDGED = "judged@10"
JUDGED_GAP = 0.05  # five points of judged@10 apart: enough unjudged documents to move nDCG


def judged_gaps(con, runs, pairs: list[Pair]) -> list[str]:
    """A warning per compared run whose top 10 the qrels judge more than :data:`JUDGED_GAP`
    less (or more) than the baseline's, over the queries they share: unjudged documents count
    as not relevant, so a retriever that finds documents the pool never saw scores lower than it
    is, and the comparison is partly about holes in the qrels."""
    judged = metric_values(con, [JUDGED], defined_only=True)
    if judged.empty:  # runs stored before judged@k, or with no cutoff at 10
        return []
    wide = judged.pivot_table(index="query_id", columns="run_id", values="value")
    base = runs[0].run_id
    out = []
    for other in dict.fromkeys(p.run_b for p in pairs):
        if base not in wide or other not in wide:
            continue
        both = wide[[base, other]].dropna()
        if both.empty:
            continue
        a, b = both[base].mean(), both[other].mean()
        if abs(b - a) > JUDGED_GAP:
            out.append(
                f"{JUDGED} is {a:.2f} for {base} and {b:.2f} for {other}: the qrels judge "
                f"{abs(b - a) * 100:.0f} points more of one run's top 10, so the comparison is "
                "partly about holes in the qrels (judge the unjudged documents of both top 10s)"
            )
    return out
