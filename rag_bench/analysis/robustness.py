"""How much a run loses under perturbed queries: each perturbed copy (``<id>~<kind>``, made by
``run(..., perturb=...)``) paired with its original in the same run, per perturbation, slice and
metric, with compare's statistics ("hybrid loses 0.04 ndcg@10 under typos, BM25 loses 0.11")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rag_bench.analysis.compare import COLUMNS as COMPARE_COLUMNS
from rag_bench.analysis.compare import check_options, paired_table
from rag_bench.analysis.pairing import Pair
from rag_bench.analysis.reads import chosen_metrics, metric_values, query_rows
from rag_bench.analysis.slices import check_slice, in_slice, query_slices, slice_names
from rag_bench.data.perturb import SEPARATOR
from rag_bench.errors import RagBenchError
from rag_bench.runs import RunStore, StoredRun, open_runs

# compare's columns, the runs' names turned into what is paired here (no MDE column)
RENAMED = {
    "run_a": "run",
    "run_b": "perturbation",
    "mean_a": "mean_original",
    "mean_b": "mean_perturbed",
}
PAIRED = ("run_a", "run_b", "mde", "family", "ci_agrees")  # one family here: Holm over all
COLUMNS = ["run", "perturbation", *(RENAMED.get(c, c) for c in COMPARE_COLUMNS if c not in PAIRED)]


@dataclass(frozen=True)
class Robustness:
    """One row per (run, perturbation, slice, metric): original mean, perturbed mean, delta."""

    rows: pd.DataFrame
    perturbations: dict[str, dict[str, int]]  # run id -> copies made per perturbation
    variants: dict[str, str]  # run id -> its variant
    test: str
    alpha: float


def _perturbation_pairs(values, queries, run: StoredRun, metrics, labels) -> list[Pair]:
    """The (original, perturbed) values of one run per perturbation, metric and slice; slices
    are those of the original query."""
    wide = values.pivot_table(index="query_id", columns="metric", values="value", aggfunc="first")
    ids = set(queries["query_id"])
    copies = [q for q in ids if SEPARATOR in q and q.rsplit(SEPARATOR, 1)[0] in ids]
    pairs = []
    for kind in sorted({q.rsplit(SEPARATOR, 1)[1] for q in copies}):
        mine = sorted(q for q in copies if q.endswith(SEPARATOR + kind))
        originals = [q.rsplit(SEPARATOR, 1)[0] for q in mine]
        for metric in (m for m in metrics if m in wide.columns):
            a = wide[metric].reindex(originals).to_numpy()
            b = wide[metric].reindex(mine).to_numpy()
            defined = ~(pd.isna(a) | pd.isna(b))
            kept = [q for q, keep in zip(originals, defined) if keep]
            for name in slice_names(labels, kept):
                chosen = in_slice(kept, name, labels)
                if chosen.any():
                    pair = Pair(
                        name, metric, run.run_id, kind, a[defined][chosen], b[defined][chosen]
                    )
                    pairs.append(pair)
    return pairs


def robustness(
    runs_dir: str | Path | RunStore | None,
    refs: Sequence[str],
    *,
    slice_by: str | None = "category",
    metrics: Sequence[str] | None = None,
    test: str = "randomization",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
) -> Robustness:
    """Per run of ``refs`` (each made with perturbed queries): the paired change from each
    original query to its perturbed copy, per perturbation, slice and metric, with a bootstrap
    interval, the paired test and Holm across the table; a negative delta of a
    higher-is-better metric is what the perturbation costs."""
    check_options(test, alpha, resamples, seed, None)
    check_slice(slice_by)
    store = open_runs(runs_dir)
    runs = [store.get(ref) for ref in refs]
    pairs, counts = [], {}
    for run in runs:
        con = store.connect([run])
        chosen = chosen_metrics(con, metrics)
        queries = query_rows(con, ["run_id", "query_id", "category", "tags", "failure_class"])
        labels = query_slices(queries, slice_by)
        found = _perturbation_pairs(metric_values(con, chosen), queries, run, chosen, labels)
        if not found:
            raise RagBenchError(
                f"run {run.run_id} holds no perturbed query",
                "make one with: rag-bench run --perturb typo,colloquial,synonym,reorder",
            )
        pairs.extend(found)
        made = [q.rsplit(SEPARATOR, 1)[1] for q in queries["query_id"] if SEPARATOR in q]
        counts[run.run_id] = {kind: made.count(kind) for kind in sorted(set(made))}
    table = paired_table(pairs, test, alpha, resamples, seed)
    table = table.rename(columns=RENAMED)
    variants = {run.run_id: run.variant for run in runs}
    return Robustness(table[COLUMNS], counts, variants, test, alpha)
