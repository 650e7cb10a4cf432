"""Every table fits a 120-column terminal (COLUMNS=120), and --wide and the other formats keep
every column."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, SHIPPED
from rag_bench.experiment.runner import run_variant

pytestmark = pytest.mark.slow  # two full-dataset runs

EXAMPLE = ROOT / "data" / "example"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, index_cache):
    folder = tmp_path_factory.mktemp("runs")
    for variant in ("baseline", "hybrid_rerank"):
        run_variant(variant, SHIPPED, runs_dir=folder, cache_dir=index_cache)
    return folder


COMMANDS = [
    ["runs"],
    ["show", "latest:hybrid_rerank"],
    ["show", "latest:hybrid_rerank", "--slice", "failure_class"],
    ["compare", "latest:baseline", "latest:hybrid_rerank", "--resamples", "200"],
    ["diff", "latest:hybrid_rerank", "--against", "latest:baseline"],
    [
        "gate",
        "latest:hybrid_rerank",
        "--baseline",
        "latest:baseline",
        "--max-drop",
        "recall@10=0.02",
        "--max-drop",
        "over_refusal=0.01",
    ],
    ["diagnose", "latest:hybrid_rerank", "--against", "latest:baseline"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_tables_fit_120_columns(rag_bench, runs, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "120")
    out = rag_bench(*command, "--runs-dir", runs)
    assert out.exit_code in (0, 1), out.stderr
    widest = max(out.stdout.splitlines(), key=len)
    assert len(widest) <= 120, widest


@pytest.mark.parametrize(
    "command", [["components"], ["components", "generator"], ["variants"]], ids=" ".join
)
def test_listings_fit_120_columns(rag_bench, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "120")
    out = rag_bench(*command)
    assert out.exit_code == 0, out.stderr
    widest = max(out.stdout.splitlines(), key=len)
    assert len(widest) <= 120, widest


def test_eval_fits_120_columns(rag_bench, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    out = rag_bench(
        "eval", "--qrels", EXAMPLE / "qrels.txt", "--run", EXAMPLE / "run.txt", "--per-query"
    )
    assert out.exit_code == 0, out.stderr
    assert max(len(line) for line in out.stdout.splitlines()) <= 120


def test_wide_and_json_keep_every_column(rag_bench, runs, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    narrow = rag_bench("runs", "--runs-dir", runs).stdout
    wide = rag_bench("runs", "--runs-dir", runs, "--wide").stdout
    assert "created_at" not in narrow.splitlines()[0] and "not shown" in narrow
    assert "created_at" in wide.splitlines()[0] and "not shown" not in wide
    rows = json.loads(rag_bench("runs", "--runs-dir", runs, "--format", "json").stdout)
    assert "created_at" in rows[0]
