"""The same inputs and parameters give the same traces, bit for bit, in separate processes:
also when Python's hash seed (and so the iteration order of every set of strings) differs."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from conftest import ROOT, SHIPPED

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
        ("hybrid_rerank", ROOT / "rag_bench" / "data" / "shipped" / "lumen-mall-zh"),
    ],
)
def test_traces_do_not_depend_on_the_hash_seed(tmp_path, variant, dataset):
    first = traces_in_a_new_process(tmp_path, variant, dataset, 1)
    second = traces_in_a_new_process(tmp_path, variant, dataset, 2)
    assert first.keys() == second.keys() and "retrieved" in first
    for name in first:
        pd.testing.assert_frame_equal(first[name], second[name], check_exact=True, obj=name)
