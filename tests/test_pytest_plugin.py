"""The pytest plugin a user's suite gets with rag-bench: the ``rag_bench_runs`` fixture over
``--rag-bench-runs``, and ``assert_no_regression`` failing with the gate's table; and the
notebook views of gate and compare results."""

from __future__ import annotations

import os
import subprocess
import sys

import tomllib
from runs_helpers import copy_run, read_table, write_table

from conftest import ROOT

USER_TEST = """
from rag_bench.testing import assert_no_regression


def test_the_store_is_the_one_named(rag_bench_runs):
    assert len(rag_bench_runs.list()) == 2


def test_no_regression(rag_bench_runs):
    assert_no_regression("worse", "BASELINE", {"recall@10": 0.02, "mrr@10": 0.5},
                         runs_dir=rag_bench_runs)
"""


def _degraded(clean, tmp_path):
    """A runs folder with the clean run and a copy named ``worse`` whose recall@10 is halved."""
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(clean.runs.root, runs)
    worse = copy_run(clean, runs, "29990101-000000-worse-beef", name="worse")
    frame = read_table(worse, "metrics")
    frame.loc[frame["metric"] == "recall@10", "value"] *= 0.5
    write_table(worse, "metrics", frame)
    return runs


def test_the_plugin_is_registered_for_pytest():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"rag_bench": "rag_bench.testing"}


def _entry_point_installed() -> bool:
    from importlib.metadata import entry_points

    return any(e.value == "rag_bench.testing" for e in entry_points(group="pytest11"))


def test_a_users_suite_fails_with_the_gates_table(clean, tmp_path):
    runs = _degraded(clean, tmp_path)
    (tmp_path / "test_rag.py").write_text(USER_TEST.replace("BASELINE", clean.run_id))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("RAG_BENCH_RUNS_DIR", None)
    # an installed rag-bench brings the plugin through its pytest11 entry point, as a user has
    # it; naming it again with -p would register it twice (pytest refuses that)
    load = [] if _entry_point_installed() else ["-p", "rag_bench.testing"]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", *load, "-p", "no:cacheprovider",
         "--rag-bench-runs", str(runs), "-q", "test_rag.py"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 failed, 1 passed" in out.stdout
    assert "gate FAILED: 1 of 2 metric(s) dropped more than allowed" in out.stdout
    assert "metric" in out.stdout and "allowed_drop" in out.stdout and "verdict" in out.stdout
    assert "recall@10: fail, worsened by" in out.stdout
    assert "mrr@10: pass" in out.stdout


def test_gate_and_compare_results_read_as_tables(clean, tmp_path):
    from rag_bench.analysis.compare import compare
    from rag_bench.analysis.gate import gate

    runs = _degraded(clean, tmp_path)
    result = gate(runs, "worse", clean.run_id, {"recall@10": 0.02})
    text = repr(result)
    assert text.startswith("gate FAILED: 1 of 1 metric(s)")
    assert "recall@10: fail, worsened by" in text and "Dataclass" not in text
    assert "<table" in result._repr_html_() and "gate FAILED" in result._repr_html_()
    compared = compare(runs, [clean.run_id, "worse"], metrics=["recall@10"], resamples=200)
    assert repr(compared).startswith(f"comparison against {clean.run_id}:")
    assert "recall@10" in repr(compared) and "<table" in compared._repr_html_()


def test_runs_list_shows_as_a_table_and_gives_a_dataframe(clean, tmp_path):
    from rag_bench.runs import open_runs

    runs = open_runs(_degraded(clean, tmp_path))
    listed = runs.list()
    assert [r.run_id for r in listed] == [clean.run_id, "29990101-000000-worse-beef"]
    frame = listed.to_frame()
    assert list(frame.columns[:5]) == ["run_id", "name", "variant", "dataset", "queries"]
    assert {"recall@10", "ndcg@10"} <= set(frame.columns)
    halved = frame.set_index("name").loc["worse", "recall@10"]
    assert halved == frame.set_index("run_id").loc[clean.run_id, "recall@10"] / 2
    assert "kestrel-kb" in repr(listed) and len(repr(listed)) < 1000
    assert "<table" in listed._repr_html_()
