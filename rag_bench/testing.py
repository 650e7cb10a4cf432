"""Helpers for a user's own test suite: fail a test when a RAG change regresses.

from rag_bench.testing import assert_no_regression

def test_the_new_reranker_does_not_regress():
    candidate = rag_bench.run("hybrid_rerank", tag="smoke")
    assert_no_regression(candidate, "latest:hybrid_rerank", max_drop={"recall@10": 0.02})
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def assert_no_regression(
    candidate: Any,
    baseline: Any,
    max_drop: Mapping[str, float],
    *,
    runs_dir: str | Path | None = None,
    require: str = "auto",
    alpha: float = 0.05,
    seed: int = 0,
) -> None:
    """Raise ``AssertionError`` when the gate fails: a metric of ``candidate`` worse than in
    ``baseline`` by more than its ``max_drop`` (by the gate's rule ``require``; see
    :func:`rag_bench.analysis.gate.gate`). Runs are references (an id, a name, ``latest:…``)
    or stored runs (what ``rag_bench.run`` returns); the message lists each failing metric
    with both means, the change and why, and the gate's warnings."""
    from rag_bench.analysis.gate import gate

    result = gate(
        runs_dir if runs_dir is not None else _store_of(candidate),
        _ref(candidate),
        _ref(baseline),
        max_drop,
        require=require,
        alpha=alpha,
        seed=seed,
    )
    if result.passed:
        return
    failed = result.rows[result.rows["verdict"] == "fail"]
    lines = [
        f"{row.metric}: {row.mean_a:.4f} -> {row.mean_b:.4f} ({row.reason})"
        for row in failed.itertuples(index=False)
    ]
    raise AssertionError(
        f"{_ref(candidate)} regressed from {_ref(baseline)}:\n  "
        + "\n  ".join(lines + [f"warning: {w}" for w in result.warnings])
    )


def _ref(run: Any) -> str:
    return run if isinstance(run, str) else run.run_id


def _store_of(run: Any):
    """The store a stored run came from (None, the default runs folder, for a reference)."""
    return getattr(run, "store", None)
