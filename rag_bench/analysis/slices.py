"""The one rule that puts queries in slices, for every view that groups queries.

A query's slices come from one of its columns (``slice_by`` is one of :data:`SLICES`): its
category, its failure class, or each of its tags (a query may sit in several tag slices, and a
query with no tag sits in :data:`UNTAGGED`). ``None`` slices nothing: every view then has the
overall slice ``all`` alone. compare, gate, diagnose, the report and ``rag-bench show`` all
read their slices here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from rag_bench.analysis import SLICES
from rag_bench.errors import UnknownNameError
from rag_bench.evaluation.summary import slice_order

ALL = "all"
UNTAGGED = "untagged"

Labels = dict[str, list[str]]  # query id -> the slices it sits in


def check_slice(slice_by: str | None) -> str | None:
    """``slice_by`` when it names a slicing (or is None); an unknown name is one error with the
    close names."""
    if slice_by is not None and slice_by not in SLICES:
        raise UnknownNameError("slice", slice_by, SLICES)
    return slice_by


def query_slices(
    queries: pd.DataFrame, slice_by: str | None, run_ids: Sequence[str] | None = None
) -> Labels:
    """Each query's slices, read from the first of ``run_ids`` that has the query (``queries``
    has a ``run_id`` column then; without ``run_ids`` it is one run's rows). Empty for None."""
    if check_slice(slice_by) is None:
        return {}
    labels: Labels = {}
    for run_id in reversed(list(run_ids)) if run_ids is not None else [None]:
        rows = queries if run_id is None else queries[queries["run_id"] == run_id]
        labels.update(_labels(rows, slice_by))
    return labels


def _labels(rows: pd.DataFrame, slice_by: str) -> Labels:
    if slice_by == "tag":
        return {
            q: (list(t) if t is not None and len(t) else [UNTAGGED])
            for q, t in zip(rows["query_id"], rows["tags"])
        }
    return {q: [str(v)] for q, v in zip(rows["query_id"], rows[slice_by])}


def slice_names(labels: Labels, query_ids=None) -> list[str]:
    """``all``, then the slices of ``query_ids`` (default: every labelled query) in reading
    order."""
    chosen = labels if query_ids is None else query_ids
    return [ALL, *slice_order({s for q in chosen for s in labels.get(q, [])})]


def in_slice(query_ids, name: str, labels: Labels) -> np.ndarray:
    """A mask over ``query_ids``: the queries in slice ``name`` (every one for ``all``)."""
    ids = list(query_ids)
    if name == ALL:
        return np.ones(len(ids), dtype=bool)
    return np.array([name in labels.get(q, []) for q in ids], dtype=bool)


def sliced_rows(frame: pd.DataFrame, labels: Labels, overall: bool = True) -> pd.DataFrame:
    """``frame`` (a ``query_id`` column) with a ``slice`` column: each row once in ``all``
    (unless not ``overall``) and once more in each slice of its query, the slices in
    :func:`slice_names` order, the rows of a slice in ``frame``'s order."""
    names = slice_names(labels, frame["query_id"])
    parts = [
        frame[in_slice(frame["query_id"], name, labels)].assign(slice=name)
        for name in (names if overall else names[1:])
    ]
    if not parts:
        return frame.assign(slice=pd.Series(dtype=object))
    return pd.concat(parts, ignore_index=True)
