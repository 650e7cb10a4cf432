"""Every command's output fits a 120-column terminal (COLUMNS=120), standard output and error
alike; the text a reader acts on (a fix to try, a class name, a sweep's name) wraps rather than
being cut; and --wide and the other formats keep every column."""

from __future__ import annotations

import json

import pytest
from table_text import cells, columns, joined, wrapped_rows

from conftest import ROOT, SHIPPED
from rag_bench.evaluation.measures import headline_metrics, improvement
from rag_bench.experiment.runner import run_variant
from rag_bench.experiment.sweep import run_sweep
from rag_bench.runs import open_runs

pytestmark = pytest.mark.slow  # four full-dataset runs

EXAMPLE = ROOT / "data" / "example"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, index_cache):
    folder = tmp_path_factory.mktemp("runs")
    for variant in ("baseline", "hybrid_rerank"):
        run_variant(variant, SHIPPED, runs_dir=folder, cache_dir=index_cache)
    # two runs named by their sweep point, differing only at the end of the name
    axes = ["retriever.k1=0.9", "chunker.size=96,160"]
    run_sweep("baseline", axes, SHIPPED, runs_dir=folder, cache_dir=index_cache)
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
    widest = max([*out.stdout.splitlines(), *out.stderr.splitlines()], key=columns)
    assert columns(widest) <= 120, widest


def test_the_gate_warns_within_120_columns(rag_bench, runs, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    gate = next(command for command in COMMANDS if command[0] == "gate")
    out = rag_bench(*gate, "--runs-dir", runs)
    warned = [line for line in out.stderr.splitlines() if line.strip()]
    assert warned[0].startswith("warning: recall@10: 235 paired queries detect"), out.stderr
    assert max(columns(line) for line in warned) <= 120, out.stderr


@pytest.mark.parametrize("width", [120, 160])
def test_a_diff_of_two_chunkings_fits_the_terminal(rag_bench, runs, monkeypatch, width):
    """Two chunkings move the same documents up and down the ranking: from 160 columns on the
    moved-documents column (ids and ranks with arrows) shows beside both answers; at any width
    every line fits."""
    monkeypatch.setenv("COLUMNS", str(width))
    first, second = (f"baseline[retriever.k1=0.9,chunker.size={s}]" for s in (96, 160))
    out = rag_bench("diff", second, "--against", first, "--runs-dir", runs)
    assert out.exit_code == 0, out.stderr
    rows = cells(out.stdout.split("\n\n", 1)[1])
    if width == 160:
        assert any("→" in row.get("moved", "") for row in rows), out.stdout
    assert max(columns(line) for line in out.stdout.splitlines()) <= width


def wrapped_column(rag_bench, runs, command, key, column):
    """The text of each ``key`` row's ``column`` as the table shows it (its wrapped lines
    joined) and as the json output holds it, whitespace left out of both."""
    table = rag_bench(*command, "--runs-dir", runs).stdout
    rows = json.loads(rag_bench(*command, "--runs-dir", runs, "--format", "json").stdout)
    shown = [joined(lines[column]) for lines in wrapped_rows(cells(table), key)]
    return table, shown, [joined([str(row[column])]) for row in rows]


@pytest.mark.parametrize("column", ["culprit", "what_to_try"])
def test_diagnose_wraps_what_to_try_and_the_culprit(rag_bench, runs, monkeypatch, column):
    monkeypatch.setenv("COLUMNS", "120")
    command = ["diagnose", "latest:hybrid_rerank", "--against", "latest:baseline"]
    table, shown, stored = wrapped_column(rag_bench, runs, command, "share", column)
    assert "…" not in table
    assert shown == stored, table


def test_show_wraps_failure_class_names(rag_bench, runs, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    command = ["show", "latest:hybrid_rerank", "--slice", "failure_class"]
    out = rag_bench(*command, "--runs-dir", runs).stdout
    table = out[out.index("failure_class  ") :]
    rows = json.loads(rag_bench(*command, "--runs-dir", runs, "--format", "json").stdout)
    assert "…" not in table
    shown = [joined(lines["failure_class"]) for lines in wrapped_rows(cells(table), "n")]
    assert shown == [row["failure_class"] for row in rows["slices"]]
    assert "answered_unanswerable" in shown and "retrieved_not_used" in shown


def test_runs_wraps_sweep_names(rag_bench, runs, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    table, shown, stored = wrapped_column(rag_bench, runs, ["runs"], "run_id", "name")
    assert "…" not in table
    assert shown == [name if name != "None" else "-" for name in stored]
    assert "baseline[retriever.k1=0.9,chunker.size=160]" in shown, table


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


def test_the_run_table_keeps_the_metrics_that_regressed(rag_bench, tmp_path, monkeypatch):
    """The closing table of two variants hides metric columns to fit, but never one whose mean
    got worse (in its own direction) from the first variant to the second, computed here
    from the stored per-query values."""
    monkeypatch.setenv("COLUMNS", "120")
    folder = tmp_path / "runs"
    out = rag_bench("run", "--variant", "baseline,hybrid_rerank", "--runs-dir", folder)
    assert out.exit_code == 0, out.stderr
    store = open_runs(folder)
    first, second = (store.get(f"latest:{v}").run_id for v in ("baseline", "hybrid_rerank"))
    means = store.metrics([first, second]).groupby(["metric", "run_id"])["value"].mean()
    shown = list(cells(out.stdout)[0])
    worse = [
        metric
        for metric in headline_metrics()
        if improvement(metric, means[(metric, second)] - means[(metric, first)]) < 0
    ]
    assert "over_refusal" in worse  # 0.0723 → 0.0894 on kestrel-kb
    assert set(worse) <= set(shown), (worse, out.stdout)
    assert "(not shown, to fit 120 columns:" in out.stdout
    assert "kept as they moved: " in " ".join(out.stdout.split())
