"""benchmarks/bench_compare.py on a tiny store: the peers are handed the very difference vectors
compare tests, so the time ratio compares like with like. Nothing here times anything."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_compare  # noqa: E402
import bench_store  # noqa: E402

from rag_bench.evaluation.stats import randomization_tests  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    patch = pytest.MonkeyPatch()
    patch.setattr(bench_store, "WORK", tmp_path_factory.mktemp("store"))
    try:
        yield bench_store.ensure_store({"runs": 5, "queries": 120}, seed=2)
    finally:
        patch.undo()


def test_the_peers_get_the_vectors_compare_tests(store):
    workload = bench_compare.WORKLOADS["20 metrics"]
    rows = bench_compare._compare(store, workload, 300).rows
    ds = bench_compare._vectors(store, workload)
    by_metric = rows.sort_values("metric")
    assert sorted(len(d) for d in ds) == sorted(by_metric["n"])
    assert randomization_tests(ds, 300, 0) == by_metric["p_value"].tolist()
    assert np.allclose([d.mean() for d in ds], by_metric["delta"])
