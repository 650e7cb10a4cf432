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
from rag_bench.analysis.slices import ALL, check_slice, dataset_of, query_slices
from rag_bench.components.blas import one_blas_thread
from rag_bench.errors import RagBenchError, UnknownNameError, UsageError, check_number
from rag_bench.evaluation.measures import canonical, improvement
from rag_bench.evaluation.stats import (
    MAX_RESAMPLES,
    TESTS,
    benjamini_hochberg,
    domain_bootstrap_cis,
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
    "family",
    "run_a",
    "run_b",
    "mean_a",
    "mean_b",
    "delta",
    "ci_low",
    "ci_high",
    "ci_level",
    "p_value",
    "p_adjusted",
    "wins",
    "ties",
    "losses",
    "n",
    "mde",
    "significant",
    "ci_agrees",
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
    # the confirmatory family's metrics (its rows: these over all queries, per compared run)
    primary: list[str] = field(default_factory=list)

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
    pairs: list[Pair],
    test: str,
    resamples: int,
    seed: int,
    levels: Sequence[float] | None = None,
) -> list[dict]:
    """Means, delta, bootstrap interval (at ``levels``, one per pair; default 95 %), p-value
    and wins/ties/losses of each pair; computed together, so the resamples are drawn once for
    all pairs of one compared run (:func:`~rag_bench.evaluation.stats.domain_bootstrap_cis`)."""
    levels = list(levels) if levels is not None else [CI_LEVEL] * len(pairs)
    # one BLAS thread: the same bits whatever the machine's thread count, and less CPU than
    # two on these tall, narrow products (benchmarks/bench_compare.py; docs/performance.md)
    with one_blas_thread():
        return _rows(pairs, test, resamples, seed, levels)


def _rows(pairs: list[Pair], test: str, resamples: int, seed: int, levels) -> list[dict]:
    ds = [p.differences for p in pairs]
    intervals: list[tuple[float, float]] = [(float("nan"), float("nan"))] * len(pairs)
    groups: dict[tuple, list[int]] = {}  # the pairs drawn from one set of shared queries
    for i, p in enumerate(pairs):
        key = (p.run_a, p.run_b, p.base_size) if p.positions is not None else (len(p.a),)
        groups.setdefault(key, []).append(i)
    for members in groups.values():
        found = domain_bootstrap_cis(
            pairs[members[0]].shared,
            [pairs[i].domain() for i in members],
            [ds[i] for i in members],
            [levels[i] for i in members],
            resamples,
            seed,
        )
        for i, interval in zip(members, found):
            intervals[i] = interval
    p_values = paired_p_values(ds, test, resamples, seed)
    return [
        _row(d, p.a, p.b, *ci, level, pv, improvement(p.metric, d))
        for d, p, ci, level, pv in zip(ds, pairs, intervals, levels, p_values)
    ]


def _row(d, a, b, low: float, high: float, level: float, p: float, gain: np.ndarray) -> dict:
    """One pair's numbers; ``gain`` is ``d`` turned so that positive is better (a win)."""
    return {
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "delta": float(d.mean()),
        "ci_low": low,
        "ci_high": high,
        "ci_level": level,
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


CI_LEVEL = 0.95  # the interval of a row outside a confirmatory family
CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"


def families(pairs: Sequence[Pair], primary: Sequence[str]) -> np.ndarray:
    """Each pair's family: confirmatory for the ``primary`` metrics over all queries (one per
    compared run and primary metric), exploratory for every other row."""
    return np.array(
        [CONFIRMATORY if p.slice == ALL and p.metric in primary else EXPLORATORY for p in pairs]
    )


def paired_table(
    pairs: list[Pair],
    test: str,
    alpha: float,
    resamples: int,
    seed: int,
    primary: Sequence[str] | None = None,
) -> pd.DataFrame:
    """compare's rows of ``pairs``: the statistics, the adjusted p-values and the MDE.

    With ``primary`` (the metrics named before looking at the data), the rows of those metrics
    over all queries are the confirmatory family: Holm across them, intervals at the family's
    simultaneous level 1 − alpha / m (Bonferroni's, so an interval that excludes 0 is a
    rejection at Holm's first, strictest step); every other row is exploratory: its raw p,
    Benjamini–Hochberg across the exploratory rows (a false discovery rate, not a family-wise
    error), a 95 % interval per row like its raw p. ``ci_agrees`` says whether the interval
    excluding 0 and the row's test (adjusted p for confirmatory rows, raw p for exploratory
    ones) say the same at that level. Without ``primary``, one family: Holm over the table."""
    if not pairs:
        raise RagBenchError(
            "the runs share no query with a defined value",
            "check that they ran on the same queries",
        )
    family = families(pairs, primary) if primary is not None else None
    levels = [CI_LEVEL] * len(pairs)
    confirmatory = family == CONFIRMATORY if family is not None else None
    if confirmatory is not None and confirmatory.any():
        simultaneous = 1 - alpha / int(confirmatory.sum())
        levels = [simultaneous if c else CI_LEVEL for c in confirmatory]
    stats = _statistics(pairs, test, resamples, seed, levels)
    for pair, row in zip(pairs, stats):  # runs with repeats: the noise in the interval too
        if pair.a_repeats is not None and pair.b_repeats is not None:
            interval = two_level_bootstrap_ci(
                pair.a_repeats, pair.b_repeats, row["ci_level"], resamples, seed
            )
            row["ci_low"], row["ci_high"] = interval
    table = pd.DataFrame([p.key() | row for p, row in zip(pairs, stats)])
    p = table["p_value"].to_numpy(dtype=np.float64)
    where = table.columns.get_loc("p_value") + 1
    if family is None or confirmatory is None:
        table.insert(where, "p_adjusted", holm(p))
        table["significant"] = table["p_adjusted"] < alpha
    else:
        adjusted = np.full(len(p), np.nan)
        adjusted[confirmatory] = holm(p[confirmatory])
        adjusted[~confirmatory] = benjamini_hochberg(p[~confirmatory])
        table.insert(where, "p_adjusted", adjusted)
        table.insert(table.columns.get_loc("metric") + 1, "family", family)
        table["significant"] = table["p_adjusted"] < alpha
        tested = np.where(confirmatory, adjusted, p) < alpha
        excludes = (table["ci_low"] > 0) | (table["ci_high"] < 0)
        table["ci_agrees"] = (excludes.to_numpy() == tested) | table["ci_low"].isna().to_numpy()
    table["mde"] = [minimum_detectable_effect(p.differences, alpha) for p in pairs]
    return table


def primary_metrics(
    primary: str | Sequence[str] | None, chosen: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The primary metrics among ``chosen`` and the warnings they need. Named ones must be
    compared; the default (:data:`DEFAULT_PRIMARY`) is skipped, with a warning, when it is
    not (e.g. runs of imported scores), and then every row is exploratory."""
    if primary is None:
        if DEFAULT_PRIMARY in chosen:
            return [DEFAULT_PRIMARY], []
        return [], [
            f"no confirmatory row: the default primary metric {DEFAULT_PRIMARY} is not compared "
            "here, so every row is exploratory (name one with --primary / primary=)"
        ]
    named = [primary] if isinstance(primary, str) else list(primary)
    if not named:
        raise UsageError("primary names no metric", f"e.g. primary={DEFAULT_PRIMARY!r}")
    out = []
    for name in named:
        metric = canonical(name) if ":" not in name else name
        if metric not in chosen:
            raise UsageError(
                f"the primary metric {name} is not among the compared metrics "
                f"({', '.join(chosen)})",
                "add it to --metrics (metrics=) or name a compared one with --primary",
            )
        out.append(metric)
    return list(dict.fromkeys(out)), []


# the headline ranking metric: BEIR's official measure, the shipped datasets' first ranking
# number, diff's and report's default ordering; see docs/statistics.md
DEFAULT_PRIMARY = "ndcg@10"


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
    primary: str | Sequence[str] | None = None,
) -> Comparison:
    """Compare every run after the first with the first, paired over their shared queries.

    Each row also gives ``mde``, the smallest delta its test detects with 80 % power at
    ``alpha`` for the paired n and the observed spread of the differences; with ``mde`` (a
    delta to plan for), ``n_needed`` is how many such queries would detect it.

    Per slice (plus ``all``; see :mod:`rag_bench.analysis.slices`) and metric: both means, the
    delta (b − a), a bootstrap interval of the delta (at ``ci_level``), the paired test's raw
    p-value, an adjusted one within the row's ``family``, and wins / ties / losses (a win is a
    change for the better, which for a lower-is-better metric is a fall). The ``primary``
    metric (default :data:`DEFAULT_PRIMARY`; a list for several) over all queries is the
    confirmatory family, one row per compared run, Holm-adjusted across them with intervals
    at the matching simultaneous level; every other row is exploratory (Benjamini–Hochberg
    across them, 95 % intervals): see :func:`paired_table` and docs/statistics.md. A metric
    undefined for a query (NULL) leaves that query out. A run with repeats counts each query
    once, at the mean of its repeats, and the interval is a two-level bootstrap (queries, then
    each query's repeats: :func:`~rag_bench.evaluation.stats.two_level_bootstrap_ci`), so it
    holds the noise of the sampling components too; the test's p-value is over the query
    means. ``runs_dir`` is the runs folder (a path, URL or :class:`RunStore`; None: the
    default).
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
    primaries, notes = primary_metrics(primary, chosen)
    pairs, n_paired = paired_values(values, queries, runs, chosen, labels)
    table = paired_table(pairs, test, alpha, resamples, seed, primaries)
    columns = list(COLUMNS)
    if mde is not None:
        table["n_needed"] = [queries_needed(p.differences, mde, alpha) for p in pairs]
        columns.append("n_needed")
    warnings = notes + judged_gaps(con, runs, pairs) + qrels_differ(runs)
    constant = constant_metrics(values)
    return Comparison(table[columns], n_paired, test, alpha, constant, pairs, warnings, primaries)


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
