"""The seeds' diagnosis table computed from a run's traces: for each symptom, how many queries
show it per slice, the stage that is the likely culprit, what to try, and a few example query
ids; against a second run, which symptoms grew or shrank over the queries both answered.

A symptom is read per query from the stored metrics, so it is undefined (and counts in neither
the numerator nor the denominator) where its metric is NULL: unsupported claims need claims,
over-refusal an answerable query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.analysis.reads import query_rows, run_metric_values
from rag_bench.analysis.slices import Labels, check_slice, query_slices, sliced_rows
from rag_bench.errors import UsageError
from rag_bench.runs import RunStore, StoredRun, open_runs

EXAMPLES = 3
GOOD = ("ok", "correct_refusal")


@dataclass(frozen=True)
class Symptom:
    name: str
    culprit: str
    fix: str
    test: Callable[[pd.DataFrame, int, int], pd.Series]  # per-query frame, k, N → bool/NaN


def _where(defined: pd.Series, value: pd.Series) -> pd.Series:
    """``value`` where ``defined``, NaN elsewhere."""
    return value.astype(float).where(defined)


SYMPTOMS = (
    Symptom(
        "low recall@k",
        "chunker or retriever",
        "chunk boundaries, hybrid (sparse + dense) retrieval, query rewriting",
        lambda q, k, n: _where(q[f"recall@{k}"].notna(), q[f"recall@{k}"] < 0.5),
    ),
    Symptom(
        "relevant in the top N, not the top k",
        "reranker",
        "add or tune a reranker; give the generator more chunks",
        lambda q, k, n: _where(q[f"hit@{n}"].notna(), (q[f"hit@{n}"] == 1) & (q[f"hit@{k}"] == 0)),
    ),
    Symptom(
        "context holds the answer, answer wrong",
        "generator",
        "the generation prompt: answer the asked attribute from the context, cite or refuse",
        lambda q, k, n: _where(
            q[f"context_recall@{k}"].notna(),
            (q[f"context_recall@{k}"] == 1) & ~q["failure_class"].isin(GOOD),
        ),
    ),
    Symptom(
        "unsupported claims",
        "generator",
        "enforce citations or refuse; lower the temperature",
        lambda q, k, n: _where(q["faithfulness"].notna(), q["faithfulness"] < 1),
    ),
    Symptom(
        "answerable query refused",
        "generator (refusal threshold) or retriever",
        "loosen the refusal threshold (min_coverage); add context",
        lambda q, k, n: _where(q["over_refusal"].notna(), q["over_refusal"] == 1),
    ),
    Symptom(
        "unanswerable query answered",
        "generator",
        "raise the refusal threshold; require support for every claim",
        lambda q, k, n: _where(q["answered_unanswerable"].notna(), q["answered_unanswerable"] == 1),
    ),
    Symptom(
        "citations to non-supporting documents",
        "generator",
        "cite per sentence; verify citations after generation",
        lambda q, k, n: _where(q["citation_precision"].notna(), q["citation_precision"] < 1),
    ),
)


def cutoffs(run: StoredRun) -> tuple[int, int]:
    """k (the context-sized cutoff: 5 when the run has it) and N (the deepest cutoff)."""
    ks = sorted(run.manifest.get("ks") or [])
    if len(ks) < 2:
        raise UsageError(
            f"run {run.run_id} has cutoffs {ks}; diagnose needs two (k and a deeper N)",
            "run again with e.g. --k 5,20",
        )
    k = 5 if 5 in ks[:-1] else ks[len(ks) // 2 - 1]
    return k, ks[-1]


def symptoms_per_query(store: RunStore, run: StoredRun, k: int, n: int) -> pd.DataFrame:
    """One row per query of the run: its slices and one column per symptom (1, 0 or NaN)."""
    con = store.connect([run])
    values = run_metric_values(con, run.run_id)
    queries = query_rows(con, ["query_id", "category", "tags", "failure_class"], run.run_id)
    wide = values.pivot(index="query_id", columns="metric", values="value")
    frame = queries.set_index("query_id").join(wide)
    needed = {f"recall@{k}", f"hit@{k}", f"hit@{n}", f"context_recall@{k}"}
    for name in needed - set(frame.columns):
        frame[name] = np.nan
    out = frame[["category", "tags", "failure_class"]].copy()
    for symptom in SYMPTOMS:
        out[symptom.name] = symptom.test(frame, k, n)
    return out


def _tabulate(frame: pd.DataFrame, labels: Labels) -> pd.DataFrame:
    rows = []
    for slice_name, part in sliced_rows(frame.reset_index(), labels).groupby("slice", sort=False):
        for symptom in SYMPTOMS:
            shown = part[part[symptom.name] == 1]
            defined = int(part[symptom.name].notna().sum())
            rows.append(
                {
                    "symptom": symptom.name,
                    "slice": slice_name,
                    "n": len(shown),
                    "of": defined,
                    "share": len(shown) / defined if defined else np.nan,
                    "culprit": symptom.culprit,
                    "what_to_try": symptom.fix,
                    "examples": " ".join(sorted(shown["query_id"])[:EXAMPLES]),
                }
            )
    return pd.DataFrame(rows)


def diagnose_run(
    store: RunStore,
    run: StoredRun,
    against: StoredRun | None = None,
    slice_by: str | None = "category",
) -> pd.DataFrame:
    """The diagnosis table of ``run``: one row per (symptom, slice) with the count and share of
    queries showing it, the likely culprit stage, what to try and example query ids. With
    ``against``, both runs are read over the queries they share, and ``n_against``,
    ``share_against``, ``delta`` (share change, run minus against), ``appeared`` and ``cleared``
    (queries that gained or lost the symptom) are added. The slices are those of
    :mod:`rag_bench.analysis.slices`, read as compare reads them, from the baseline: ``against``
    when given, else ``run`` (None: the ``all`` slice alone)."""
    check_slice(slice_by)
    k, n = cutoffs(run)
    mine = symptoms_per_query(store, run, k, n)
    if against is None:
        return _tabulate(mine, query_slices(mine.reset_index(), slice_by))
    theirs = symptoms_per_query(store, against, k, n)
    shared = mine.index.intersection(theirs.index)
    if shared.empty:
        raise UsageError(
            f"runs {run.run_id} and {against.run_id} share no query",
            "compare runs over the same dataset",
        )
    mine, theirs = mine.loc[shared], theirs.loc[shared]
    labels = query_slices(theirs.reset_index(), slice_by)  # both sliced as the baseline is
    table = _tabulate(mine, labels)
    other = _tabulate(theirs, labels)
    table["n_against"] = other["n"].to_numpy()
    table["share_against"] = other["share"].to_numpy()
    table["delta"] = table["share"] - table["share_against"]
    changes = _changes(mine, theirs, labels)
    return table.merge(changes, on=["symptom", "slice"], how="left")


def diagnose(
    runs_dir: str | Path | RunStore | None,
    run: str,
    against: str | None = None,
    slice_by: str | None = "category",
) -> pd.DataFrame:
    """:func:`diagnose_run` by reference (an id, a name, ``latest:…``) in a runs folder (a path,
    URL or :class:`RunStore`; None: the default)."""
    store = open_runs(runs_dir)
    return diagnose_run(store, store.get(run), store.get(against) if against else None, slice_by)


def _changes(mine: pd.DataFrame, theirs: pd.DataFrame, labels: Labels) -> pd.DataFrame:
    """Per (symptom, slice): queries that show the symptom in the run and not in ``against``
    (appeared), and the reverse (cleared)."""
    rows = []
    paired = mine.copy()
    for symptom in SYMPTOMS:
        paired[f"{symptom.name}:against"] = theirs[symptom.name]
    for slice_name, part in sliced_rows(paired.reset_index(), labels).groupby("slice", sort=False):
        for symptom in SYMPTOMS:
            now, before = part[symptom.name], part[f"{symptom.name}:against"]
            rows.append(
                {
                    "symptom": symptom.name,
                    "slice": slice_name,
                    "appeared": int(((now == 1) & (before != 1)).sum()),
                    "cleared": int(((now != 1) & (before == 1)).sum()),
                }
            )
    return pd.DataFrame(rows)
