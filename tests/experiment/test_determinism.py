"""The same inputs and parameters give the same traces, bit for bit, in separate processes:
also when Python's hash seed (and so the iteration order of every set of strings) differs."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from conftest import ROOT, SHIPPED

pytestmark = pytest.mark.slow  # the same variants run again and again

RUN_AND_SAVE = """
import sys
from rag_bench.experiment.runner import Selection, run_variant
variant, dataset, runs, out = sys.argv[1:5]
result = run_variant(variant, dataset, selection=Selection(tag="smoke"), runs_dir=runs)
for name, frame in result.tables.items():
    frame.to_parquet(f"{out}/{name}.parquet")
"""


def traces_in_a_new_process(tmp_path, variant: str, dataset, hash_seed: int) -> dict:
    out = tmp_path / f"{variant}-{hash_seed}"
    out.mkdir()
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    command = [sys.executable, "-c", RUN_AND_SAVE, variant, str(dataset), str(tmp_path / "runs")]
    subprocess.run([*command, str(out)], env=env, check=True, capture_output=True, cwd=ROOT)
    tables = {}
    for path in sorted(out.glob("*.parquet")):
        frame = pd.read_parquet(path)
        keep = [c for c in frame.columns if c != "run_id" and not c.startswith("latency_ms")]
        tables[path.stem] = frame[keep]
    return tables


@pytest.mark.slow
@pytest.mark.parametrize(
    "variant, dataset",
    [
        ("hybrid_rerank", SHIPPED),
        ("hybrid_rerank", ROOT / "data" / "lumen-mall-zh"),
    ],
)
def test_traces_do_not_depend_on_the_hash_seed(tmp_path, variant, dataset):
    first = traces_in_a_new_process(tmp_path, variant, dataset, 1)
    second = traces_in_a_new_process(tmp_path, variant, dataset, 2)
    assert first.keys() == second.keys() and "retrieved" in first
    for name in first:
        pd.testing.assert_frame_equal(first[name], second[name], check_exact=True, obj=name)


def traces_with_workers(tmp_path, name: str, workers: int) -> dict:
    """A hybrid_rerank run on a fresh index cache, its query blocks on ``workers`` threads."""
    from rag_bench.experiment.runner import Selection, run_variant
    from rag_bench.pipeline.executors import LocalExecutor

    result = run_variant(
        "hybrid_rerank",
        SHIPPED,
        selection=Selection(tag="smoke"),
        runs_dir=tmp_path / f"runs-{name}",
        cache_dir=tmp_path / f"cache-{name}",
        executor=LocalExecutor(workers=workers),
    )
    return {
        name: frame[[c for c in frame.columns if c != "run_id" and not c.startswith("latency_ms")]]
        for name, frame in result.tables.items()
    }


def test_traces_do_not_depend_on_threads_or_their_timing(tmp_path):
    """Scores are made on one BLAS thread whatever other threads do (a threadpool limit
    toggled by one thread used to change the ltr reranker's products in their last bits)."""
    first = traces_with_workers(tmp_path, "a", workers=2)
    for name, workers in (("b", 2), ("c", 1)):
        again = traces_with_workers(tmp_path, name, workers)
        for table in first:
            pd.testing.assert_frame_equal(first[table], again[table], check_exact=True, obj=table)
