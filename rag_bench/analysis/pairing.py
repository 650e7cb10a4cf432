"""Pairing runs query by query: which runs may be paired, and the paired values of each
(compared run, metric, slice) over the queries both runs answered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rag_bench.analysis.slices import Labels, in_slice, slice_names
from rag_bench.errors import RagBenchError, UsageError
from rag_bench.evaluation.stats import repeat_noise_se
from rag_bench.runs import RunStore, StoredRun
from rag_bench.runs.catalog import reference_on

TIE = 1e-12  # two values closer than this are a tie (neither a win nor a loss)


@dataclass(frozen=True)
class Pair:
    """The values of ``metric`` in one slice: ``a`` of the baseline, ``b`` of the compared run,
    query by query (a run with repeats: the mean of each query's repeats, and every repeat in
    ``a_repeats`` / ``b_repeats``, queries × repeats, NaN where a query has fewer)."""

    slice: str
    metric: str
    run_a: str
    run_b: str
    a: np.ndarray
    b: np.ndarray
    a_repeats: np.ndarray | None = None
    b_repeats: np.ndarray | None = None

    @property
    def repeated(self) -> bool:
        return self.a_repeats is not None

    @property
    def noise_se(self) -> float:
        """The standard error of the delta from the repeats alone (0 without repeats)."""
        if self.a_repeats is None or self.b_repeats is None:
            return 0.0
        return repeat_noise_se(self.a_repeats, self.b_repeats)

    def key(self) -> dict[str, str]:
        return {
            "slice": self.slice,
            "metric": self.metric,
            "run_a": self.run_a,
            "run_b": self.run_b,
        }

    @property
    def differences(self) -> np.ndarray:
        return self.b - self.a


def comparable_runs(store: RunStore, refs: Sequence[str], allow_mismatch: bool) -> list[StoredRun]:
    """The runs of ``refs`` (two or more, each once), made on one dataset unless
    ``allow_mismatch``."""
    if len(refs) < 2:
        raise UsageError(
            "compare needs at least two runs",
            "e.g. rag-bench compare latest:baseline latest:hybrid",
        )
    runs = [store.get(ref) for ref in refs]
    ids = [r.run_id for r in runs]
    if len(set(ids)) < len(ids):
        raise UsageError(
            f"run {ids[0] if ids.count(ids[0]) > 1 else ids[1]} is compared with itself",
            "name two different runs",
        )
    if not allow_mismatch:
        same_dataset(runs, store)
    return runs


def same_dataset(runs: Sequence[StoredRun], store: RunStore | None = None) -> None:
    """Refuse runs made on different datasets: pairing their query ids would compare unrelated
    queries (or none at all) without a word. The hint names the references that would work:
    each run's counterpart (``latest:<variant>@<dataset>``) on a dataset ``store`` holds them
    all on."""
    if len({r.dataset_sha256 for r in runs}) <= 1:
        return
    names = ", ".join(f"{r.run_id} ({r.dataset_name})" for r in runs)
    datasets = list(dict.fromkeys(r.dataset_name or "" for r in runs))
    working = [
        " ".join(refs)
        for refs in ([reference_on(r, d) for r in runs] for d in datasets)
        if store is not None and all(_exists(store, ref) for ref in refs)
    ]
    hint = (
        f"name runs on one dataset: {' or '.join(working)}"
        if working
        else f"name runs on one dataset, e.g. latest:{runs[0].variant}@{datasets[0]}; "
        "`rag-bench runs --dataset NAME` lists them"
    )
    raise RagBenchError(f"the runs were made on different datasets: {names}", hint)


def _exists(store: RunStore, ref: str) -> bool:
    try:
        store.get(ref)
    except RagBenchError:
        return False
    return True


def paired_values(
    values: pd.DataFrame,
    queries: pd.DataFrame,
    runs: Sequence[StoredRun],
    metrics: Sequence[str],
    labels: Labels,
) -> tuple[list[Pair], dict[str, int]]:
    """Every run after the first paired with the first, per metric and slice (``all`` first),
    over the queries both hold and both define the metric for; a slice with no such query has
    no pair. Also the number of shared queries per compared run. A query's value in a run with
    repeats is the mean of its defined repeats, and the pair keeps every repeat."""
    base = runs[0].run_id
    wide = values.pivot_table(
        index=["metric", "query_id"], columns="run_id", values="value", aggfunc="mean"
    )
    repeats = _repeat_values(values)
    found, n_paired = [], {}
    for other in (r.run_id for r in runs[1:]):
        shared = set(queries.loc[queries["run_id"] == base, "query_id"]) & set(
            queries.loc[queries["run_id"] == other, "query_id"]
        )
        n_paired[other] = len(shared)
        slices = slice_names(labels, shared)
        for metric in metrics:
            both = wide.loc[metric, [base, other]].dropna() if metric in wide.index else None
            if both is None:
                continue
            both = both[both.index.isin(shared)]
            for name in slices:
                chosen = both[in_slice(both.index, name, labels)]
                if not chosen.empty:
                    a, b = chosen[base].to_numpy(), chosen[other].to_numpy()
                    each = [_matrix(repeats, metric, run, chosen.index) for run in (base, other)]
                    found.append(Pair(name, metric, base, other, a, b, *each))
    return found, n_paired


def _repeat_values(values: pd.DataFrame) -> pd.DataFrame | None:
    """Defined values by (metric, query_id) and (run_id, repeat), when any run has repeats."""
    if "repeat" not in values or not (values["repeat"] > 0).any():
        return None
    defined = values.dropna(subset=["value"])
    return defined.pivot_table(
        index=["metric", "query_id"], columns=["run_id", "repeat"], values="value"
    )


def _matrix(
    repeats: pd.DataFrame | None, metric: str, run: str, queries: Sequence[str]
) -> np.ndarray | None:
    """The (queries × repeats) values of one run, NaN where a query has fewer repeats."""
    if repeats is None:
        return None
    return repeats.loc[metric][run].reindex(queries).to_numpy(dtype=np.float64)
