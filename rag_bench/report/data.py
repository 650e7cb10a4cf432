"""Everything the report shows, read from the store as plain tables before any HTML is written.

The statistics are those of the commands: the paired comparison is ``analysis.compare``'s, what
changed is ``analysis.diff``'s, the diagnosis ``analysis.diagnose``'s, the slices
``analysis.slices``', and the metrics collapsed to one line are compare's constant metrics. This
module adds only what the page needs around them: each run's mean with an interval, the
per-query pairs of the scatter, the failure classes, the traces of the changed queries and the
manifests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.analysis.compare import Comparison, compare, constant_metrics
from rag_bench.analysis.diagnose import cutoffs, diagnose_run
from rag_bench.analysis.diff import diff, metric_cutoff
from rag_bench.analysis.pairing import same_dataset
from rag_bench.analysis.reads import Traces, chosen_metrics, load_traces, metric_values, query_rows
from rag_bench.analysis.slices import (
    Labels,
    check_slice,
    dataset_of,
    in_slice,
    query_slices,
    slice_names,
)
from rag_bench.errors import UnknownNameError, UsageError, check_number
from rag_bench.evaluation.diagnosis import FAILURE_CLASSES
from rag_bench.evaluation.measures import canonical
from rag_bench.evaluation.stats import MAX_RESAMPLES, TESTS, bootstrap_ci
from rag_bench.report.manifests import manifest_table
from rag_bench.runs import RunStore, StoredRun, open_runs


@dataclass(frozen=True)
class ReportData:
    """The report's tables; the first run is the baseline, the last the candidate."""

    runs: list[StoredRun]
    labels: dict[str, str]  # run_id → the name shown (variant, or variant · id when repeated)
    slice_by: str | None
    metric: str  # of the scatter and of what changed
    metrics: list[str]
    constant: dict[str, float]  # metric → its one value in every query of every run
    undefined: dict[str, list[str]]  # metric → the runs in which no query has a value
    means: pd.DataFrame  # slice, metric, run_id, mean, ci_low, ci_high, n
    pairs: pd.DataFrame  # query_id, group, query, a, b, delta (first run vs last)
    failures: pd.DataFrame  # run_id, slice, failure_class, n, share
    comparison: Comparison | None  # compare's table; None for a single run
    changed: pd.DataFrame  # diff's rows of the last run against the first
    traces: Traces  # of the changed queries, in the first and the last run
    diagnosis: pd.DataFrame | None  # diagnose's table of the last run (against the first)
    diagnosis_note: str  # why there is no diagnosis, when there is none
    manifests: pd.DataFrame  # field, one column per run label, differs
    lengths: pd.DataFrame  # run_id, query_id, length, faithfulness (both defined)
    resamples: int
    seed: int


def _resolve(store: RunStore, refs: Sequence[str], allow_mismatch: bool) -> list[StoredRun]:
    if not refs:
        raise UsageError("report needs at least one run", "e.g. rag-bench report latest:baseline")
    runs = [store.get(ref) for ref in refs]
    ids = [r.run_id for r in runs]
    repeated = [i for i in ids if ids.count(i) > 1]
    if repeated:
        raise UsageError(f"run {repeated[0]} is named twice", "name each run once")
    if not allow_mismatch:
        same_dataset(runs, store)
    return runs


def run_labels(runs: list[StoredRun]) -> dict[str, str]:
    """Each run's name on the page: its variant, with the id when the variant repeats."""
    variants = [r.variant for r in runs]
    return {
        r.run_id: r.variant if variants.count(r.variant) == 1 else f"{r.variant} · {r.run_id}"
        for r in runs
    }


QUERY_COLUMNS = [
    "run_id",
    "query_id",
    "category",
    "tags",
    "query",
    "answer",
    "refused",
    "failure_class",
    "n_relevant",
]


def _load(con, metric: str, metrics: Sequence[str] | None):
    """The defined values of the chosen metrics (and ``metric``), a query's the mean of its
    repeats as in compare, and every query row."""
    chosen = chosen_metrics(con, metrics, required=[metric])
    values = metric_values(con, list(dict.fromkeys([*chosen, metric])), defined_only=True)
    keys = ["run_id", "query_id", "metric"]
    values = values.groupby(keys, as_index=False, sort=False)["value"].mean()
    return values, query_rows(con, QUERY_COLUMNS), chosen


def _in_slice(frame: pd.DataFrame, name: str, labels: Labels) -> pd.DataFrame:
    """The rows of ``frame`` whose query lies in slice ``name`` (every row for ``all``)."""
    return frame[in_slice(frame["query_id"], name, labels)]


def undefined_metrics(
    values: pd.DataFrame, runs: list[StoredRun], metrics: Sequence[str]
) -> dict[str, list[str]]:
    """Per metric, the runs in which it has no defined value for any query (a run that refused
    every answer has no faithfulness); such a metric has nothing to average or compare there."""
    defined = set(zip(values["metric"], values["run_id"]))
    out = {m: [r.run_id for r in runs if (m, r.run_id) not in defined] for m in metrics}
    return {m: ids for m, ids in out.items() if ids}


def mean_intervals(
    values: pd.DataFrame,
    labels: Labels,
    runs: list[StoredRun],
    metrics: Sequence[str],
    resamples: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per slice, metric and run: the mean over defined values and a 95 % bootstrap interval;
    no row where the slice has no defined value."""
    rows = []
    slices = slice_names(labels)
    for metric in metrics:
        for run in runs:
            chosen = values[(values["run_id"] == run.run_id) & (values["metric"] == metric)]
            for name in slices:
                v = _in_slice(chosen, name, labels)["value"].to_numpy(dtype=np.float64)
                if len(v) == 0:
                    continue
                low, high = bootstrap_ci(v, resamples=resamples, seed=seed)
                rows.append(
                    {
                        "slice": name,
                        "metric": metric,
                        "run_id": run.run_id,
                        "mean": float(v.mean()),
                        "ci_low": low,
                        "ci_high": high,
                        "n": len(v),
                    }
                )
    columns = ["slice", "metric", "run_id", "mean", "ci_low", "ci_high", "n"]
    return pd.DataFrame(rows, columns=columns)


def query_pairs(
    values: pd.DataFrame,
    queries: pd.DataFrame,
    first: StoredRun,
    last: StoredRun,
    metric: str,
    labels: Labels,
    slice_by: str | None,
) -> pd.DataFrame:
    """One row per query both runs defined ``metric`` for: a (first run), b (last), delta, and
    its colour group (its slice; its category when sliced by tag)."""
    mine = values[values["metric"] == metric]
    a = mine[mine["run_id"] == first.run_id].set_index("query_id")["value"].rename("a")
    b = mine[mine["run_id"] == last.run_id].set_index("query_id")["value"].rename("b")
    pairs = pd.concat([a, b], axis=1, join="inner").reset_index(names="query_id")
    base = queries[queries["run_id"] == first.run_id].set_index("query_id")
    by_slice = slice_by in ("category", "failure_class")
    pairs["group"] = [
        ", ".join(labels.get(q, [])) if by_slice else str(base["category"].get(q, "?"))
        for q in pairs["query_id"]
    ]
    pairs["query"] = [base["query"].get(q, "") for q in pairs["query_id"]]
    pairs["delta"] = pairs["b"] - pairs["a"]
    columns = ["query_id", "group", "query", "a", "b", "delta"]
    return pairs[columns].sort_values("query_id").reset_index(drop=True)


def failure_order(names: set[str]) -> list[str]:
    """Failure classes in the catalogue's order, unknown ones after."""
    known = [f for f in FAILURE_CLASSES if f in names]
    return known + sorted(names - set(known))


def failure_breakdown(queries: pd.DataFrame, labels: Labels, runs: list[StoredRun]) -> pd.DataFrame:
    """Per run and slice (plus ``all``): how many queries fell in each failure class."""
    rows = []
    for run in runs:
        mine = queries[queries["run_id"] == run.run_id]
        for name in slice_names(labels):
            chosen = _in_slice(mine, name, labels)
            counts = chosen["failure_class"].fillna("?").value_counts()
            for failure in failure_order(set(counts.index)):
                rows.append(
                    {
                        "run_id": run.run_id,
                        "slice": name,
                        "failure_class": failure,
                        "n": int(counts[failure]),
                        "share": float(counts[failure] / len(chosen)),
                    }
                )
    return pd.DataFrame(rows, columns=["run_id", "slice", "failure_class", "n", "share"])


def length_pairs(store: RunStore, runs: list[StoredRun]) -> pd.DataFrame:
    """Per run, the queries with both ``answer_length`` and ``faithfulness`` defined (runs made
    before answer_length existed have none)."""
    metrics = store.metrics([r.run_id for r in runs])
    wanted = metrics[metrics["metric"].isin(["answer_length", "faithfulness"])]
    wide = wanted.pivot_table(
        index=["run_id", "query_id"], columns="metric", values="value", aggfunc="mean"
    )
    columns = ["run_id", "query_id", "length", "faithfulness"]
    if not {"answer_length", "faithfulness"} <= set(wide.columns):
        return pd.DataFrame(columns=columns)
    both = wide.dropna(subset=["answer_length", "faithfulness"]).reset_index()
    return both.rename(columns={"answer_length": "length"})[columns]


def _diagnosis(store: RunStore, runs: list[StoredRun], slice_by: str | None):
    """diagnose's table of the last run against the first, or why there is none."""
    last = runs[-1]
    try:
        cutoffs(last)
    except UsageError as exc:
        return None, str(exc)
    against = runs[0] if len(runs) > 1 else None
    return diagnose_run(store, last, against, slice_by), ""


def report_data(
    runs_dir: str | Path | RunStore | None,
    refs: Sequence[str],
    *,
    slice_by: str | None = "category",
    metric: str = "ndcg@10",
    metrics: Sequence[str] | None = None,
    primary: str | Sequence[str] | None = None,
    top: int = 10,
    test: str = "randomization",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
    allow_mismatch: bool = False,
) -> ReportData:
    """Read the runs and build every table of the report (no HTML yet). ``top`` queries are
    listed each way in what changed."""
    check_number("top", top, 0, whole=True)
    check_number("resamples", resamples, 1, MAX_RESAMPLES, whole=True)
    check_number("alpha", alpha, 0, 1, open_low=True, open_high=True)
    check_number("seed", seed, 0, whole=True)
    if test not in TESTS:  # checked here too: a single run is never compared
        raise UnknownNameError("test", test, list(TESTS))
    check_slice(slice_by)
    metric = canonical(metric)
    store = open_runs(runs_dir)
    runs = _resolve(store, refs, allow_mismatch)
    first, last = runs[0], runs[-1]
    ids = [r.run_id for r in runs]
    con = store.connect(runs)
    values, queries, chosen = _load(con, metric, metrics)
    # each query's from the first run holding it
    labels = query_slices(queries, slice_by, ids, dataset_of(runs[0]))
    undefined = undefined_metrics(values, runs, list(dict.fromkeys([*chosen, metric])))
    comparison = (
        compare(
            store,
            ids,
            slice_by=slice_by,
            metrics=chosen,
            test=test,
            alpha=alpha,
            resamples=resamples,
            seed=seed,
            allow_mismatch=allow_mismatch,
            primary=primary,
        )
        if len(runs) > 1
        else None
    )
    changed = (
        diff(store, last.run_id, first.run_id, metric, top, allow_mismatch=allow_mismatch)
        if len(runs) > 1 and top > 0 and metric not in undefined
        else pd.DataFrame(columns=["change", "query_id"])
    )
    cutoff = metric_cutoff(metric)
    traces = load_traces(con, [first.run_id, last.run_id], list(changed["query_id"]), cutoff)
    diagnosis, note = _diagnosis(store, runs, slice_by)
    shown = run_labels(runs)
    return ReportData(
        runs=runs,
        labels=shown,
        slice_by=slice_by,
        metric=metric,
        metrics=chosen,
        constant={m: v for m, v in constant_metrics(values).items() if m not in undefined},
        undefined=undefined,
        means=mean_intervals(values, labels, runs, chosen, resamples, seed),
        pairs=query_pairs(values, queries, first, last, metric, labels, slice_by),
        failures=failure_breakdown(queries, labels, runs),
        comparison=comparison,
        changed=changed,
        traces=traces,
        diagnosis=diagnosis,
        diagnosis_note=note,
        manifests=manifest_table(runs, shown),
        lengths=length_pairs(store, runs),
        resamples=resamples,
        seed=seed,
    )
