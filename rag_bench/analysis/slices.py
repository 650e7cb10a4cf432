"""The one rule that puts queries in slices, for every view that groups queries.

A query's slices come from one of its columns (``slice_by`` is one of :data:`SLICES`): its
category, its failure class, or each of its tags (a query may sit in several tag slices, and a
query with no tag sits in :data:`UNTAGGED`). Any other name is a field of the dataset's query
records (``queries.jsonl``: ``difficulty``, ``source``, …; a list value puts the query in a
slice per element, a query without the field sits in :data:`NO_VALUE`), and ``id~REGEX`` puts
the queries whose id matches the regular expression in one slice and the others in another.
``None`` slices nothing: every view then has the overall slice ``all`` alone, and so does a
dataset without categories (every query ``uncategorized``), rather than the same block twice.
compare, gate, diagnose, the report and ``rag-bench show`` all read their slices here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.analysis import SLICES
from rag_bench.errors import UnknownNameError, UsageError
from rag_bench.evaluation.summary import slice_order
from rag_bench.model import UNCATEGORIZED

ALL = "all"
UNTAGGED = "untagged"
NO_VALUE = "(none)"  # the slice of the queries whose record lacks the field sliced by
ID_PATTERN = "id~"  # --slice id~REGEX: the queries whose id matches, and the others
OTHER_IDS = "(other ids)"
FIELD = re.compile(r"^[A-Za-z_][\w.-]*$")

Labels = dict[str, list[str]]  # query id -> the slices it sits in


def check_slice(slice_by: str | None) -> str | None:
    """``slice_by`` when it names a slicing (a column, ``id~REGEX``, a field name) or is None;
    anything else is one error with the close names."""
    if slice_by is None or slice_by in SLICES:
        return slice_by
    if slice_by.startswith(ID_PATTERN):
        try:
            re.compile(slice_by[len(ID_PATTERN) :])
        except re.error as exc:
            raise UsageError(
                f"--slice {slice_by!r}: the pattern is no regular expression ({exc})",
                "e.g. --slice 'id~^q-nas-0'",
            ) from None
        return slice_by
    # a misspelt built-in slicing (tags for tag) or "none" (the library's no slices is None)
    # is a mistake, not a field of the records
    close = difflib.get_close_matches(slice_by, SLICES, n=1, cutoff=0.8)
    if close or slice_by == "none" or not FIELD.match(slice_by):
        raise UnknownNameError("slice", slice_by, list(SLICES), close=close or None)
    return slice_by


def query_slices(
    queries: pd.DataFrame,
    slice_by: str | None,
    run_ids: Sequence[str] | None = None,
    dataset: str | Path | None = None,
) -> Labels:
    """Each query's slices, read from the first of ``run_ids`` that has the query (``queries``
    has a ``run_id`` column then; without ``run_ids`` it is one run's rows). Empty for None.
    A field of the query records is read from ``dataset`` (the folder the run was made on)."""
    slicing = check_slice(slice_by)
    if slicing is None:
        return {}
    if slicing not in SLICES:
        ids = list(dict.fromkeys(queries["query_id"]))
        if slicing.startswith(ID_PATTERN):
            return _matching(ids, slicing)
        return field_labels(dataset, slicing, ids)
    labels: Labels = {}
    for run_id in reversed(list(run_ids)) if run_ids is not None else [None]:
        rows = queries if run_id is None else queries[queries["run_id"] == run_id]
        labels.update(_labels(rows, slicing))
    return labels


def _matching(ids: list[str], slice_by: str) -> Labels:
    pattern = re.compile(slice_by[len(ID_PATTERN) :])
    return {q: [slice_by if pattern.search(q) else OTHER_IDS] for q in ids}


def field_labels(dataset: str | Path | None, name: str, ids: Sequence[str]) -> Labels:
    """Each query's slices by the field ``name`` of its record in the dataset's
    ``queries.jsonl``: the value as text, each element of a list, :data:`NO_VALUE` without."""
    from rag_bench.io.jsonl import read_jsonl

    if dataset is None or not (Path(dataset) / "queries.jsonl").is_file():
        raise UsageError(
            f"--slice {name}: the queries of the run's dataset are not at hand ({dataset})",
            f"slice by {', '.join(SLICES)} or id~REGEX, or restore the dataset folder",
        )
    records = {r.get("_id"): r for _, r in read_jsonl(Path(dataset) / "queries.jsonl", "queries")}
    if not any(name in records.get(q, {}) for q in ids):
        fields = sorted({k for q in ids for k in records.get(q, {}) if k not in ("_id", "text")})
        raise UnknownNameError(f"field of the queries of {dataset}", name, fields)
    return {q: _values(records.get(q, {}).get(name)) for q in ids}


def _values(value) -> list[str]:
    if value is None or value == []:
        return [NO_VALUE]
    if isinstance(value, bool):
        return [str(value).lower()]
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _labels(rows: pd.DataFrame, slice_by: str) -> Labels:
    if slice_by == "tag":
        return {
            q: (list(t) if t is not None and len(t) else [UNTAGGED])
            for q, t in zip(rows["query_id"], rows["tags"])
        }
    return {q: [str(v)] for q, v in zip(rows["query_id"], rows[slice_by])}


def dataset_of(run) -> str | None:
    """The folder a stored run's dataset was read from (None when its manifest has none)."""
    return (run.manifest.get("dataset") or {}).get("path")


def slice_names(labels: Labels, query_ids=None) -> list[str]:
    """``all``, then the slices of ``query_ids`` (default: every labelled query) in reading
    order."""
    chosen = list(labels if query_ids is None else query_ids)
    names = slice_order({s for q in chosen for s in labels.get(q, [])})
    if names == [UNCATEGORIZED] and all(labels.get(q) == names for q in chosen):
        return [ALL]  # a dataset without categories: its one slice is the overall one again
    return [ALL, *names]


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
        return frame.iloc[:0].assign(slice=pd.Series(dtype=object))
    return pd.concat(parts, ignore_index=True)
