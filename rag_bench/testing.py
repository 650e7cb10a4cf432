"""Helpers for a user's own test suite, and the pytest plugin that offers them: fail a test
when a RAG change regresses.

Installed with rag-bench, the plugin (entry point ``pytest11``) gives every test suite the
fixture ``rag_bench_runs``, the run store of ``--rag-bench-runs DIR`` (else
``$RAG_BENCH_RUNS_DIR``, else ``runs/``), and :func:`assert_no_regression`, whose failure
message is the gate's table::

    from rag_bench.testing import assert_no_regression

    def test_the_new_reranker_does_not_regress(rag_bench_runs):
        candidate = rag_bench.run("hybrid_rerank", tier="smoke", runs_dir=str(rag_bench_runs))
        assert_no_regression(candidate, "latest:hybrid_rerank+", max_drop={"recall@10": 0.02})
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
    raise AssertionError(f"{_ref(candidate)} regressed from {_ref(baseline)}\n{result!r}")


def _ref(run: Any) -> str:
    return run if isinstance(run, str) else run.run_id


def _store_of(run: Any):
    """The store a stored run came from (None, the default runs folder, for a reference)."""
    return getattr(run, "store", None)


# --- the pytest plugin ---------------------------------------------------------------------


def pytest_addoption(parser) -> None:
    parser.getgroup("rag-bench").addoption(
        "--rag-bench-runs",
        metavar="DIR|URL",
        default=None,
        help="The runs folder of the rag_bench_runs fixture (default: $RAG_BENCH_RUNS_DIR "
        "or runs/).",
    )


def _runs_store(request):
    """The run store the tests read and gate against (see the module docstring)."""
    from rag_bench.runs import open_runs

    return open_runs(request.config.getoption("--rag-bench-runs", default=None))


try:  # the fixture exists where pytest does; assert_no_regression needs no pytest
    import pytest
except ModuleNotFoundError:  # pragma: no cover - pytest is there whenever the plugin loads
    pass
else:
    rag_bench_runs = pytest.fixture(name="rag_bench_runs")(_runs_store)
