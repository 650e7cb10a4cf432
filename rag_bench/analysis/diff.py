"""Per-query diff of two runs: the queries that got worse and better on one metric, with the
relevant documents that entered, left or moved in the top k, and both answers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rag_bench.analysis.pairing import TIE, same_dataset
from rag_bench.analysis.reads import paired_changes, relevant_top, stored_metrics
from rag_bench.errors import RagBenchError, UsageError, check_number
from rag_bench.evaluation.measures import canonical, improvement, not_stored
from rag_bench.runs import RunStore, StoredRun, open_runs

COLUMNS = [
    "run",
    "against",
    "change",
    "query_id",
    "category",
    "before",
    "after",
    "delta",
    "entered",
    "left",
    "moved",
    "failure_before",
    "failure_after",
    "answer_before",
    "answer_after",
]


def previous_run(store: RunStore, run: StoredRun) -> StoredRun:
    """The latest earlier run of the same variant on the same dataset."""
    created = (run.manifest.get("created_at", ""), run.run_id)
    earlier = [
        r
        for r in store.list()
        if r.variant == run.variant
        and r.dataset_sha256 == run.dataset_sha256
        and (r.manifest.get("created_at", ""), r.run_id) < created
    ]
    if not earlier:
        raise RagBenchError(
            f"no earlier run of {run.variant!r} on this dataset before {run.run_id}",
            "name one with --against RUN",
        )
    return max(earlier, key=lambda r: (r.manifest.get("created_at", ""), r.run_id))


def metric_cutoff(metric: str) -> int:
    _, _, k = metric.partition("@")
    return int(k) if k.isdigit() else 10


def diff(
    runs_dir: str | Path | RunStore | None,
    ref: str,
    against: str = "previous",
    metric: str = "ndcg@10",
    top: int = 20,
    allow_mismatch: bool = False,
) -> pd.DataFrame:
    """The queries that got worse and better on ``metric`` (worse: lower, or higher for a
    lower-is-better metric), with what changed in between; runs made on different datasets
    only with ``allow_mismatch`` (then over their shared query ids)."""
    metric = canonical(metric)
    check_number("top", top, 1, whole=True)
    store = open_runs(runs_dir)
    new = store.get(ref)
    old = previous_run(store, new) if against == "previous" else store.get(against)
    if old.run_id == new.run_id:
        raise UsageError(
            f"run {new.run_id} is compared with itself", "name another run with --against"
        )
    if not allow_mismatch:
        same_dataset([old, new])
    con = store.connect([old, new])
    available = stored_metrics(con)
    if metric not in available:
        raise not_stored("metric in these runs", metric, available)
    frame = paired_changes(con, old.run_id, new.run_id, metric)
    k = metric_cutoff(metric)
    before, after = relevant_top(con, old.run_id, k), relevant_top(con, new.run_id, k)
    listed = _worse_then_better(frame, metric, top)
    listed["entered"] = [_moves(after.get(q, {}), before.get(q, {})) for q in listed["query_id"]]
    listed["left"] = [_moves(before.get(q, {}), after.get(q, {})) for q in listed["query_id"]]
    listed["moved"] = [
        _rank_changes(before.get(q, {}), after.get(q, {})) for q in listed["query_id"]
    ]
    listed.insert(0, "run", new.run_id)
    listed.insert(1, "against", old.run_id)
    return listed[COLUMNS]


def _worse_then_better(frame: pd.DataFrame, metric: str, top: int) -> pd.DataFrame:
    """The ``top`` queries that lost most, then the ``top`` that gained most."""
    frame["_gain"] = improvement(metric, frame["delta"])
    worse = (
        frame[frame["_gain"] < -TIE]
        .sort_values(["_gain", "query_id"])
        .head(top)
        .assign(change="worse")
    )
    better = (
        frame[frame["_gain"] > TIE]
        .sort_values(["_gain", "query_id"], ascending=[False, True])
        .head(top)
        .assign(change="better")
    )
    return pd.concat([worse, better], ignore_index=True)


def _rank_changes(before: dict[str, int], after: dict[str, int]) -> str:
    """Relevant documents in the top k of both runs whose rank changed, as ``doc 3→1``."""
    moved = [(d, before[d], after[d]) for d in before if d in after and before[d] != after[d]]
    return " ".join(f"{d} {a}→{b}" for d, a, b in sorted(moved, key=lambda x: x[2]))


def _moves(here: dict[str, int], there: dict[str, int]) -> str:
    """Relevant documents in the top k here but not there, as ``doc@rank``."""
    return " ".join(
        f"{d}@{r}" for d, r in sorted(here.items(), key=lambda x: x[1]) if d not in there
    )
