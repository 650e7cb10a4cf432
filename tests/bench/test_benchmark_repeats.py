"""How the benchmarks fold repeated timings into one number (nothing here times anything)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_retrieval  # noqa: E402


def test_timed_runs_of_one_process_report_the_median_of_each_time_and_phase():
    runs = [
        {"index_s": 3.0, "query_s": 0.2, "phases": {"a": 1.0, "b": 9.0}, "n_queries": 7},
        {"index_s": 1.0, "query_s": 0.4, "phases": {"a": 3.0, "b": 8.0}, "n_queries": 7},
        {"index_s": 2.0, "query_s": 0.3, "phases": {"a": 2.0, "b": 7.0}, "n_queries": 7},
    ]
    folded = bench_retrieval.median_run(runs)
    assert folded["index_s"] == 2.0 and folded["query_s"] == 0.3
    assert folded["phases"] == {"a": 2.0, "b": 8.0}
    assert folded["n_queries"] == 7 and folded["timed_runs"] == 3
    assert "numba_query_s" not in folded


def test_one_timed_run_is_reported_as_it_is():
    run = {"index_s": 1.5, "query_s": 0.25, "numba_query_s": 0.1, "phases": {"a": 1.0}}
    assert bench_retrieval.median_run([run]) == run | {"timed_runs": 1}
