"""rag-bench report: the tables it is built from, escaping, the CLI, and the page in Chromium."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from runs_helpers import locate, manifest_file, read_table, write_table

from conftest import ROOT, SHIPPED, assert_one_line_error
from rag_bench.errors import UnknownNameError
from rag_bench.evaluation.stats import bootstrap_ci
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.report.page import report, report_data
from rag_bench.runs import open_runs

pytestmark = pytest.mark.slow  # reports of several runs

needs_plotly = pytest.mark.skipif(
    importlib.util.find_spec("plotly") is None,
    reason="plotly is not installed: pip install -e '.[report]' (the dev extra has it)",
)

SMOKE = Selection(tag="smoke")
RESAMPLES = 500
ARTIFACTS = ROOT / "tests" / "artifacts"
PAYLOAD = (
    "</script><script>document.body.dataset.pwned=1</script>"
    "<img src=x onerror=\"document.body.dataset.pwned=2\"> & 'q'"
)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A baseline and a hybrid_rerank run on the smoke queries."""
    runs = tmp_path_factory.mktemp("report-store")
    cache = tmp_path_factory.getbasetemp() / "cache"
    ids = {
        name: run_variant(name, SHIPPED, selection=SMOKE, runs_dir=runs, cache_dir=cache).run_id
        for name in ("baseline", "hybrid_rerank")
    }
    return runs, ids


@pytest.fixture(scope="module")
def data(store):
    runs, ids = store
    return report_data(
        open_runs(runs), [ids["baseline"], ids["hybrid_rerank"]], resamples=RESAMPLES
    )


@pytest.fixture(scope="module")
def poisoned(store, tmp_path_factory):
    """A copy of the store whose candidate carries HTML/JS in every user-provided string."""
    runs, ids = store
    target = tmp_path_factory.mktemp("poisoned") / "runs"
    shutil.copytree(runs, target)
    for run_id in ids.values():  # the scatter shows the first run's text, the traces the last's
        run = locate(target, run_id)
        queries = read_table(run, "queries")
        queries["query"] = PAYLOAD + " " + queries["query"]
        queries["answer"] = PAYLOAD
        write_table(run, "queries", queries)
    run = locate(target, ids["hybrid_rerank"])
    retrieved = read_table(run, "retrieved")
    top = (retrieved["stage"] == "documents") & (retrieved["rank"] == 1)
    retrieved.loc[top, "doc_id"] = "doc" + PAYLOAD
    write_table(run, "retrieved", retrieved)
    claims = read_table(run, "claims")
    claims["text"] = PAYLOAD
    claims["reason"] = PAYLOAD
    claims["citations"] = [["cite" + PAYLOAD] for _ in range(len(claims))]
    write_table(run, "claims", claims)
    path = manifest_file(target, ids["hybrid_rerank"])
    manifest = json.loads(path.read_text())
    manifest["params"]["retriever"]["method"] = PAYLOAD
    manifest["dataset"]["name"] = PAYLOAD
    path.write_text(json.dumps(manifest))
    return target, ids


def read(runs, run_id, table):
    return read_table(locate(runs, run_id), table)


# --- the tables --------------------------------------------------------------------------


def test_means_are_each_runs_mean_with_a_seeded_bootstrap_interval(store, data):
    runs, ids = store
    means = data.means
    assert set(means["slice"]) == {"all", "literal", "paraphrase", "multi-hop", "unanswerable"}
    assert set(means["run_id"]) == set(ids.values())
    assert (means["ci_low"] <= means["mean"] + 1e-12).all()
    assert (means["mean"] <= means["ci_high"] + 1e-12).all()
    for run_id in ids.values():
        metrics = read(runs, run_id, "metrics")
        recall = metrics[(metrics["metric"] == "recall@10")]["value"].dropna()
        row = means[
            (means["run_id"] == run_id)
            & (means["metric"] == "recall@10")
            & (means["slice"] == "all")
        ].iloc[0]
        assert row["n"] == len(recall) == 24  # the six unanswerable smoke queries are NULL
        assert row["mean"] == pytest.approx(recall.mean())
        low, high = bootstrap_ci(recall.to_numpy(), resamples=RESAMPLES, seed=0)
        assert (row["ci_low"], row["ci_high"]) == (low, high)
        literal = metrics[
            (metrics["metric"] == "faithfulness") & (metrics["category"] == "literal")
        ]
        row = means[
            (means["run_id"] == run_id)
            & (means["metric"] == "faithfulness")
            & (means["slice"] == "literal")
        ].iloc[0]
        assert row["mean"] == pytest.approx(literal["value"].dropna().mean())
    # retrieval metrics are undefined on unanswerable queries: no row rather than a zero
    assert means[(means["slice"] == "unanswerable") & (means["metric"] == "recall@10")].empty


def test_tables_are_deterministic(store, data):
    runs, ids = store
    again = report_data(
        open_runs(runs), [ids["baseline"], ids["hybrid_rerank"]], resamples=RESAMPLES
    )
    pd.testing.assert_frame_equal(again.means, data.means)
    pd.testing.assert_frame_equal(again.worst, data.worst)


def test_scatter_pairs_first_and_last_run_per_query(store, data):
    runs, ids = store
    metrics = {
        name: read(runs, run_id, "metrics").query("metric == 'ndcg@10'").set_index("query_id")
        for name, run_id in ids.items()
    }
    pairs = data.pairs.set_index("query_id")
    defined = (
        metrics["baseline"]["value"]
        .dropna()
        .index.intersection(metrics["hybrid_rerank"]["value"].dropna().index)
    )
    assert sorted(pairs.index) == sorted(defined)
    assert np.allclose(pairs["a"], metrics["baseline"].loc[pairs.index, "value"])
    assert np.allclose(pairs["b"], metrics["hybrid_rerank"].loc[pairs.index, "value"])
    assert np.allclose(pairs["delta"], pairs["b"] - pairs["a"])
    queries = read(runs, ids["baseline"], "queries").set_index("query_id")
    assert (pairs["query"] == queries.loc[pairs.index, "query"]).all()
    assert (pairs["group"] == queries.loc[pairs.index, "category"]).all()


def test_failure_breakdown_counts_every_query_once_per_slice(store, data):
    runs, ids = store
    failures = data.failures
    for run_id in ids.values():
        queries = read(runs, run_id, "queries")
        overall = failures[(failures["run_id"] == run_id) & (failures["slice"] == "all")]
        assert dict(zip(overall["failure_class"], overall["n"])) == (
            queries["failure_class"].value_counts().to_dict()
        )
        assert overall["share"].sum() == pytest.approx(1.0)
        sliced = failures[(failures["run_id"] == run_id) & (failures["slice"] != "all")]
        assert sliced["n"].sum() == len(queries) == 30


def test_worst_queries_of_the_candidate_with_their_trace(store, data):
    runs, ids = store
    worst = data.worst
    assert len(worst) == 10
    values = list(worst["value"])
    assert values == sorted(values)
    metrics = read(runs, ids["hybrid_rerank"], "metrics").query("metric == 'ndcg@10'")
    assert values[0] == metrics["value"].min()
    assert set(data.rankings["query_id"]) <= set(worst["query_id"])
    shown = data.rankings
    assert ((shown["rank"] <= 10) | (shown["relevance"] >= 1)).all()
    retrieved = read(runs, ids["hybrid_rerank"], "retrieved")
    first = worst["query_id"].iloc[0]
    expected = retrieved[
        (retrieved["query_id"] == first) & (retrieved["stage"] == "documents")
    ].query("rank <= 10")
    assert list(shown[shown["query_id"] == first].query("rank <= 10")["doc_id"]) == list(
        expected["doc_id"]
    )
    claims = read(runs, ids["hybrid_rerank"], "claims")
    expected_claims = claims[claims["query_id"].isin(worst["query_id"])]
    assert len(data.claims) == len(expected_claims)


def test_manifest_table_puts_runs_side_by_side_and_marks_differences(store, data):
    runs, ids = store
    table = data.manifests.set_index("field")
    assert list(table.columns) == ["baseline", "hybrid_rerank", "differs"]
    assert table.loc["run_id", "baseline"] == ids["baseline"]
    assert table.loc["params.reranker", "differs"]
    assert table.loc["params.reranker", "baseline"] == ""
    assert table.loc["params.reranker", "hybrid_rerank"].startswith("ltr ")
    assert not table.loc["dataset sha256", "differs"]
    assert "packages.numpy" in table.index


def test_slices_tag_failure_class_and_none(store):
    runs, ids = store
    refs = [ids["baseline"], ids["hybrid_rerank"]]
    opened = open_runs(runs)
    by_tag = report_data(opened, refs, slice_by="tag", resamples=50)
    assert "smoke" in set(by_tag.means["slice"])
    by_class = report_data(opened, refs, slice_by="failure_class", resamples=50)
    baseline = read(runs, ids["baseline"], "queries")
    assert set(by_class.means["slice"]) - {"all"} <= set(baseline["failure_class"])
    flat = report_data(opened, refs, slice_by=None, resamples=50)
    assert set(flat.means["slice"]) == {"all"} == set(flat.failures["slice"])


def test_unknown_metric_is_a_user_mistake(store):
    runs, ids = store
    with pytest.raises(UnknownNameError, match="ndcg@10"):
        report_data(open_runs(runs), [ids["baseline"]], metric="ndcg@7")


# --- the page ----------------------------------------------------------------------------


@needs_plotly
def test_html_is_one_self_contained_page(store, tmp_path):
    runs, ids = store
    out = tmp_path / "r.html"
    page = report(
        open_runs(runs), [ids["baseline"], ids["hybrid_rerank"]], resamples=RESAMPLES, output=out
    )
    assert out.read_text(encoding="utf-8") == page
    assert page.startswith("<!DOCTYPE html>")
    for anchor in ("means", "scatter", "failures", "worst", "manifests"):
        assert f'id="{anchor}"' in page
    # offline: no external script, stylesheet or font; plotly.js inlined exactly once
    assert not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"<link[^>]+href=", page)
    assert page.count("plotly.js v") == 1
    assert len(page) < 6_000_000


@needs_plotly
def test_user_strings_are_escaped(store, poisoned):
    clean_runs, ids = store
    runs, _ = poisoned
    refs = [ids["baseline"], ids["hybrid_rerank"]]
    page = report(open_runs(runs), refs, resamples=50)
    clean = report(open_runs(clean_runs), refs, resamples=50)
    assert PAYLOAD not in page
    assert "<img" not in page
    assert 'onerror="document' not in page
    assert "&lt;img src=x onerror=&quot;document.body.dataset.pwned=2&quot;&gt;" in page
    assert "doc&lt;/script&gt;" in page  # a document id in the ranking
    assert "cite&lt;/script&gt;" in page  # a citation of a claim
    # the scatter's hover text, inside plotly's JSON (which also encodes "/" as \u002f)
    assert "&lt;\\u002fscript&gt;&lt;script&gt;document.body.dataset.pwned=1" in page
    # the page has exactly the script elements of the clean report: none came from the data
    assert page.count("<script") == clean.count("<script")
    assert page.lower().count("</script") == clean.lower().count("</script")


@needs_plotly
def test_cli_writes_the_report(rag_bench, store, tmp_path):
    runs, ids = store
    out = tmp_path / "report.html"
    result = rag_bench(
        "report",
        "latest:baseline+",
        "latest:hybrid_rerank+",
        "--runs-dir",
        runs,
        "--slice",
        "category",
        "--metric",
        "recall@10",
        "--resamples",
        "200",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert f"wrote {out}" in result.stderr
    page = out.read_text(encoding="utf-8")
    assert "Worst queries of hybrid_rerank on recall@10" in page
    assert_one_line_error(
        rag_bench("report", "latest:baseline+", "--runs-dir", runs, "--metric", "ndcg@7"),
        "ndcg@7",
        "ndcg@10",
    )
    assert_one_line_error(
        rag_bench("report", "latest:baseline+", "latest:baseline+", "--runs-dir", runs),
        "named twice",
    )


@needs_plotly
def test_one_run_reports_without_a_scatter(store):
    runs, ids = store
    page = report(open_runs(runs), [ids["hybrid_rerank"]], resamples=50)
    assert "The per-query scatter needs two runs" in page
    assert 'id="chart-scatter"' not in page


def test_missing_plotly_names_the_pip_install(rag_bench, store, tmp_path, monkeypatch):
    runs, _ = store
    monkeypatch.setitem(sys.modules, "plotly", None)
    out = tmp_path / "r.html"
    result = rag_bench("report", "latest:baseline+", "--runs-dir", runs, "-o", out)
    assert_one_line_error(result, "plotly", "pip install 'rag-bench[report]'")
    assert not out.exists()


# --- in a browser, as a person sees it -----------------------------------------------------

BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("chromium not found: `make browser` installs Debian's chromium package")


def browse(page, tmp_path, *flags):
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    done = subprocess.run(
        [chromium(), *BROWSER_FLAGS, f"--user-data-dir={profile}", *flags, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, "console messages:\n" + "\n".join(console)
    assert "Uncaught" not in done.stderr
    return done.stdout


@pytest.mark.browser
@needs_plotly
def test_charts_draw_in_chromium_and_screenshot(store, data, tmp_path):
    runs, ids = store
    ARTIFACTS.mkdir(exist_ok=True)
    page = ARTIFACTS / "report.html"
    report(
        open_runs(runs), [ids["baseline"], ids["hybrid_rerank"]], resamples=RESAMPLES, output=page
    )
    dom = browse(page, tmp_path, "--dump-dom")
    # plotly ran: each of the three charts holds its SVG, bars and the scatter's points
    for chart in ("chart-means", "chart-scatter", "chart-failures"):
        start = dom.index(f'id="{chart}"')
        assert "main-svg" in dom[start : start + 400_000], chart
    assert dom.count('class="main-svg"') >= 3
    assert 'class="trace bars"' in dom
    assert 'class="trace scatter' in dom
    assert dom.count('class="point"') >= len(data.pairs)
    assert dom.count('class="trace"') >= 10  # the worst queries' traces (details elements)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    browse(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2400")
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", header[16:24]) == (1280, 2400)
    assert shot.stat().st_size > 50_000  # a blank page compresses to a few kB


@pytest.mark.browser
@needs_plotly
def test_injected_markup_does_not_run_in_chromium(store, poisoned, tmp_path):
    runs, ids = poisoned
    page = tmp_path / "poisoned.html"
    report(open_runs(runs), [ids["baseline"], ids["hybrid_rerank"]], resamples=50, output=page)
    dom = browse(page, tmp_path, "--dump-dom")
    assert "data-pwned" not in dom
    assert "<img" not in dom
    assert "&lt;img src=x onerror=" in dom  # shown as text


def test_plot_text_escapes_before_wrapping():
    from rag_bench.report.page import plot_text

    wrapped = plot_text("<b>bold</b> & " + "x" * 90 + "<i>", width=40)
    assert "<b>" not in wrapped and "<i>" not in wrapped
    assert wrapped.count("<br>") >= 2
    for line in wrapped.split("<br>"):  # no entity cut in two by a line break
        assert not re.search(r"&(?!lt;|gt;|amp;)", line), line
