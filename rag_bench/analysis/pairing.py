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
    # where the pair's queries are among the ``base_size`` queries the two runs share (None:
    # the pair's queries are all there is)
    positions: np.ndarray | None = None
    base_size: int | None = None

    def domain(self) -> np.ndarray:
        """The positions of the pair's queries among the shared ones (see ``positions``)."""
        return self.positions if self.positions is not None else np.arange(len(self.a))

    @property
    def shared(self) -> int:
        """How many queries the pair's domain is drawn from (its own count without a base)."""
        return self.base_size if self.base_size is not None else len(self.a)

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
    held = {run: set(ids) for run, ids in queries.groupby("run_id")["query_id"]}
    listed = wide.index.get_level_values("metric").unique()
    found, n_paired = [], {}
    for other in (r.run_id for r in runs[1:]):
        shared = held.get(base, set()) & held.get(other, set())
        n_paired[other] = len(shared)
        # the shared queries in the table's (sorted) order, each slice a mask over them
        listed_ids = wide.index.levels[1].tolist()  # once: Arrow strings iterate slowly
        kept = np.fromiter((q in shared for q in listed_ids), bool, len(listed_ids))
        ids = wide.index.levels[1][kept]
        names = [q for q, k in zip(listed_ids, kept) if k]
        masks = [(name, in_slice(names, name, labels)) for name in slice_names(labels, shared)]
        for metric in metrics:
            if metric not in listed:
                continue
            both = wide.loc[metric, [base, other]].reindex(ids)
            a_all, b_all = both[base].to_numpy(), both[other].to_numpy()
            defined = ~(np.isnan(a_all) | np.isnan(b_all))
            for name, mask in masks:
                where = np.flatnonzero(mask & defined)
                if len(where):
                    chosen = ids[where]
                    a_rep, b_rep = (_matrix(repeats, metric, run, chosen) for run in (base, other))
                    found.append(
                        Pair(
                            name,
                            metric,
                            base,
                            other,
                            a_all[where],
                            b_all[where],
                            a_rep,
                            b_rep,
                            positions=where,
                            base_size=len(ids),
                        )
                    )
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
