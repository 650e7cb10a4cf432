"""The evaluation benchmark's machinery on tiny data: every installed tool measures, rag-bench
agrees with pytrec_eval, and the table lists what was measured. Nothing here times anything."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_eval  # noqa: E402
import generate  # noqa: E402

from conftest import require  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, Path]:
    params = generate.Params(seed=1, queries=40, docs_per_query=50, corpus_size=5_000)
    folder = generate.ensure(params, tmp_path_factory.mktemp("eval"), quiet=True)
    return folder / generate.QRELS_FILE, folder / generate.RUN_FILE


def installed(name: str) -> bool:
    return importlib.util.find_spec(bench_eval.TOOLS[name].module) is not None


def test_rag_bench_agrees_with_pytrec_eval_and_peers_run(files):
    require("pytrec_eval")
    names = [name for name in bench_eval.TOOLS if installed(name) and name != "ranx"]
    tools = {}
    for name in names:
        rounds = [bench_eval.measure(bench_eval.TOOLS[name], *files) for _ in range(2)]
        tools[name] = bench_eval.summarize([r | {"peak_mib": 1.0} for r in rounds])
    ok, lines = bench_eval.agreement(tools)
    assert ok, lines
    assert tools["rag-bench"]["n_queries"] == tools["pytrec_eval"]["n_queries"]


def test_the_table_shows_first_calls_and_cold_runs_only_when_measured():
    run = {"load_s": 1.0, "compute_s": 1.0, "total_s": 2.0, "cpu_s": 2.0, "peak_mib": 1.0}
    run |= {"means": {}, "n_queries": 1}
    ranx = run | {"first_compute_s": 3.0, "first_total_s": 4.0}
    tools = {
        "rag-bench": bench_eval.summarize([run, run]),
        "ranx": bench_eval.summarize([ranx, ranx]),
    }
    every = [r["tool"] for r in bench_eval.table_rows(tools, first_calls=True, cold_cache=True)]
    assert every == ["rag-bench", "ranx", "ranx (1st call)", "ranx (cold cache)"]
    quick = [r["tool"] for r in bench_eval.table_rows(tools, first_calls=False, cold_cache=False)]
    assert quick == ["rag-bench", "ranx"]
