"""rag-bench report: the tables it is built from (compare's, diff's and diagnose's own), each
section's content, escaping, the page size, the CLI, and the page in Chromium."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess

import numpy as np
import pandas as pd
import pytest
from review_browser import FLAGS, chromium
from runs_helpers import locate, manifest_file, read_table, write_table

from conftest import ROOT, SHIPPED, assert_one_line_error
from rag_bench.analysis.compare import compare
from rag_bench.analysis.diagnose import diagnose
from rag_bench.analysis.diff import diff
from rag_bench.errors import UnknownNameError
from rag_bench.evaluation.stats import bootstrap_ci
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.report.data import report_data
from rag_bench.report.html import change_class
from rag_bench.report.page import render_report, report
from rag_bench.runs import open_runs

pytestmark = pytest.mark.slow  # reports of several runs

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
    pd.testing.assert_frame_equal(again.changed, data.changed)
    assert render_report(again) == render_report(data)


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


def test_the_significance_options_are_checked_even_for_one_run(store, rag_bench):
    runs, ids = store
    with pytest.raises(UnknownNameError, match="randomization"):
        report_data(open_runs(runs), [ids["baseline"]], test="coin")
    for alpha in ("0", "nan", "1.5"):
        out = rag_bench("report", ids["baseline"], "--runs-dir", runs, "--alpha", alpha)
        assert_one_line_error(out, "alpha")


# --- the sections --------------------------------------------------------------------------


def section(page: str, anchor: str) -> str:
    """The HTML of one section: from its heading to the next one."""
    start = page.index(f'<h2 id="{anchor}">')
    end = page.find("<h2 ", start + 1)
    return page[start : end if end > 0 else len(page)]


def cells(row: str) -> list[tuple[str, str]]:
    """(class, text without tags) of each cell of a table row."""
    found = re.findall(r"<td(?: class='([^']*)')?>(.*?)</td>", row)
    return [(cls, re.sub(r"<[^>]+>", "", text).strip()) for cls, text in found]


@pytest.fixture(scope="module")
def page(data):
    return render_report(data)


def test_the_paired_table_is_compares_own_numbers(store, data, page):
    runs, ids = store
    expected = compare(
        open_runs(runs), [ids["baseline"], ids["hybrid_rerank"]], resamples=RESAMPLES
    )
    pd.testing.assert_frame_equal(data.comparison.rows, expected.rows)
    shown = expected.rows[~expected.rows["metric"].isin(list(expected.constant))]
    paired = section(page, "paired")
    body = paired[paired.index("<tbody>") : paired.index("</tbody>")]
    rows = re.findall(r"<tr class='(sig|)'>(.*?)</tr>", body)
    assert len(rows) == len(shown) > 10
    for (marked, html), row in zip(rows, shown.itertuples()):
        got = cells(html)
        assert [text for _, text in got] == [
            row.slice,
            row.metric + (" ↓ better" if row.metric == "over_refusal" else ""),
            f"{row.mean_a:.3f}",
            f"{row.mean_b:.3f}",
            f"{row.delta:+.3f}",
            f"[{row.ci_low:+.3f}, {row.ci_high:+.3f}]",
            f"{row.p_value:.4f}",
            f"{row.p_adjusted:.4f}",
            f"{row.wins}/{row.ties}/{row.losses}",
            str(row.n),
            ("★" if row.family == "confirmatory" else "☆") if row.significant else "",
        ]
        assert (marked == "sig") == row.significant
        # the delta's colour reads the metric's direction: a rise of over_refusal is worse
        gain = -row.delta if row.metric == "over_refusal" else row.delta
        expected_class = "better" if gain > 1e-12 else "worse" if gain < -1e-12 else "same"
        assert got[4][0] == f"num {expected_class}"


def test_direction_comes_from_the_metric_catalogue():
    assert change_class("over_refusal", 0.05) == "worse"
    assert change_class("over_refusal", -0.05) == "better"
    assert change_class("recall@10", 0.05) == "better"
    assert change_class("recall@10", 0.0) == "same"


def test_a_constant_metric_collapses_to_one_line(store, data, page):
    runs, ids = store
    for run_id in ids.values():  # faithfulness is 1.0 wherever defined, in both runs
        metrics = read(runs, run_id, "metrics")
        assert set(metrics[metrics["metric"] == "faithfulness"]["value"].dropna()) == {1.0}
    assert data.constant["faithfulness"] == 1.0
    assert data.constant == data.comparison.constant
    line = "<li><b>faithfulness</b>: 1 in every query of both runs</li>"
    assert page.count(line) == 1 and line in section(page, "paired")
    assert "<td>faithfulness" not in section(page, "paired")
    means = section(page, "means")
    assert ">faithfulness<" not in means and "<td>faithfulness" not in means
    assert "<td>recall@10</td>" in means  # a metric that varies keeps its rows


def test_what_changed_shows_the_top_regression_with_both_traces(store, data, page):
    runs, ids = store
    listed = diff(open_runs(runs), ids["hybrid_rerank"], ids["baseline"], "ndcg@10", 10)
    pd.testing.assert_frame_equal(data.changed, listed)
    worst = listed[listed["change"] == "worse"].iloc[0]
    assert worst["delta"] < 0
    changed = section(page, "changed")
    start = changed.index(f"<code>{worst['query_id']}</code>")
    block = changed[start : changed.index("</details>", start)]
    assert f"ndcg@10 {worst['before']:.3f} → {worst['after']:.3f}" in block
    left, right = block.index("<h4>baseline</h4>"), block.index("<h4>hybrid_rerank</h4>")
    assert left < right
    for run_id, part in (
        (ids["baseline"], block[left:right]),
        (ids["hybrid_rerank"], block[right:]),
    ):
        retrieved = read(runs, run_id, "retrieved")
        top = retrieved[
            (retrieved["query_id"] == worst["query_id"])
            & (retrieved["stage"] == "documents")
            & (retrieved["rank"] <= 10)
        ].sort_values("rank")
        ranking = part[part.index("<table class='ranking'>") :]
        ranking = ranking[: ranking.index("</table>")]
        shown = re.findall(r"<td><code>([^<]+)</code></td>", ranking)
        assert shown == list(top["doc_id"])  # the ranking, in order
        query = read(runs, run_id, "queries").set_index("query_id").loc[worst["query_id"]]
        assert query["failure_class"] in part
        claims = read(runs, run_id, "claims")
        for text in claims[claims["query_id"] == worst["query_id"]]["text"]:
            assert html_escape(text) in part
    # only the listed queries' traces are on the page
    assert changed.count("<details class='change'") == len(listed)


def html_escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_diagnosis_is_diagnose_against_the_first_run(store, data, page):
    runs, ids = store
    expected = diagnose(open_runs(runs), ids["hybrid_rerank"], ids["baseline"], "category")
    pd.testing.assert_frame_equal(data.diagnosis, expected)
    part = section(page, "diagnosis")
    overall = part[: part.index("<details>")]
    rows = re.findall(r"<tr>(<td>.*?)</tr>", overall)
    everything = expected[expected["slice"] == "all"]
    assert len(rows) == len(everything) == 7
    for html, row in zip(rows, everything.itertuples()):
        got = [text for _, text in cells(html)]
        assert got[0] == row.symptom
        word = (
            "–"
            if pd.isna(row.delta)
            else ("grew" if row.delta > 1e-12 else "shrank" if row.delta < -1e-12 else "same")
        )
        assert got[4].startswith(word)
        assert got[5] == f"+{row.appeared} / −{row.cleared}"


@pytest.fixture(scope="module")
def unanswered(store, tmp_path_factory):
    """A copy of the store whose candidate has no defined faithfulness or citation precision
    (as when a run refuses every answer)."""
    runs, ids = store
    target = tmp_path_factory.mktemp("unanswered") / "runs"
    shutil.copytree(runs, target)
    run = locate(target, ids["hybrid_rerank"])
    metrics = read_table(run, "metrics")
    gone = metrics["metric"].isin(["faithfulness", "citation_precision"])
    metrics.loc[gone, "value"] = None
    metrics.loc[gone, "status"] = "undefined"
    write_table(run, "metrics", metrics)
    return target, ids


def test_a_metric_without_any_value_in_a_run_is_said_not_a_crash(unanswered, rag_bench, tmp_path):
    runs, ids = unanswered
    refs = [ids["baseline"], ids["hybrid_rerank"]]
    data = report_data(open_runs(runs), refs, resamples=50)
    assert data.undefined == {
        "faithfulness": [ids["hybrid_rerank"]],
        "citation_precision": [ids["hybrid_rerank"]],
    }
    assert "faithfulness" not in data.constant
    page = render_report(data)
    assert "<b>faithfulness</b> has no defined value in hybrid_rerank" in page
    assert "<td class='same'>no defined value</td>" in section(page, "means")
    out = tmp_path / "r.html"
    result = rag_bench("report", *refs, "--runs-dir", runs, "--resamples", "50", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "has no defined value in hybrid_rerank" in out.read_text(encoding="utf-8")
    # as the metric of what changed and of the scatter
    page = report(open_runs(runs), refs, metric="faithfulness", resamples=50)
    for anchor in ("changed", "scatter"):
        assert "faithfulness has no defined value in hybrid_rerank" in section(page, anchor)


# --- the page ----------------------------------------------------------------------------

SECTIONS = ("paired", "changed", "diagnosis", "means", "scatter", "failures", "manifests")


def test_html_is_one_self_contained_page(store, tmp_path):
    runs, ids = store
    out = tmp_path / "r.html"
    page = report(
        open_runs(runs), [ids["baseline"], ids["hybrid_rerank"]], resamples=RESAMPLES, output=out
    )
    assert out.read_text(encoding="utf-8") == page
    assert page.startswith("<!DOCTYPE html>")
    for anchor in SECTIONS:
        assert f'<h2 id="{anchor}">' in page
    # offline and inert: no script at all, no external stylesheet, image or font
    assert "<script" not in page.lower()
    assert not re.search(r"<link[^>]+href=", page)
    assert not re.search(r"""(src|href)=["']?https?:""", page)
    for chart in ("chart-means", "chart-scatter", "chart-failures"):
        assert f'<svg class="chart" id="{chart}"' in page


def test_user_strings_are_escaped(store, poisoned):
    runs, ids = poisoned
    refs = [ids["baseline"], ids["hybrid_rerank"]]
    page = report(open_runs(runs), refs, resamples=50)
    assert PAYLOAD not in page
    assert "<img" not in page
    assert 'onerror="document' not in page
    assert "&lt;img src=x onerror=&quot;document.body.dataset.pwned=2&quot;&gt;" in page
    assert "doc&lt;/script&gt;" in page  # a document id in a ranking
    assert "cite&lt;/script&gt;" in page  # a citation of a claim
    scatter = section(page, "scatter")  # a point's hover text in the SVG
    assert "<title>" in scatter and "&lt;/script&gt;&lt;script&gt;document.body" in scatter
    assert "<script" not in page.lower()


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
    assert "What changed on recall@10" in page
    assert_one_line_error(
        rag_bench("report", "latest:baseline+", "--runs-dir", runs, "--metric", "ndcg@7"),
        "ndcg@7",
        "ndcg@10",
    )
    assert_one_line_error(
        rag_bench("report", "latest:baseline+", "latest:baseline+", "--runs-dir", runs),
        "named twice",
    )


def test_one_run_reports_without_pairs(store):
    runs, ids = store
    page = report(open_runs(runs), [ids["hybrid_rerank"]], resamples=50)
    assert "The paired comparison needs two runs" in page
    assert "What changed needs two runs" in page
    assert "The per-query scatter needs two runs" in page
    assert 'id="chart-scatter"' not in page
    assert "<td>low recall@k</td>" in section(page, "diagnosis")  # the run's own symptoms
    assert "<b>faithfulness</b>: 1 in every query of the run" in section(page, "means")


@pytest.fixture(scope="module")
def shipped_runs(tmp_path_factory):
    """What `make run` stores: the three variants over all of kestrel-kb's queries."""
    runs = tmp_path_factory.mktemp("make-run")
    cache = tmp_path_factory.getbasetemp() / "cache"
    ids = [
        run_variant(name, SHIPPED, runs_dir=runs, cache_dir=cache).run_id
        for name in ("baseline", "hybrid", "hybrid_rerank")
    ]
    return runs, ids


def test_the_page_of_make_runs_runs_stays_under_one_and_a_half_megabytes(shipped_runs):
    runs, ids = shipped_runs
    page = report(open_runs(runs), ids, resamples=1000)
    size = len(page.encode("utf-8"))
    assert size < 1_500_000, size
    # it is the full report, not an empty one: every query a point, 2 × 10 changes with traces
    assert page.count('class="point"') >= 235
    assert section(page, "changed").count("<details class='change'") == 20


# --- in a browser, as a person sees it -----------------------------------------------------

BROWSER_FLAGS = ("--headless", *FLAGS, "--enable-logging=stderr", "--v=0")


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
def test_sections_render_in_chromium_and_screenshot(store, data, tmp_path):
    runs, ids = store
    ARTIFACTS.mkdir(exist_ok=True)
    page = ARTIFACTS / "report.html"
    report(
        open_runs(runs), [ids["baseline"], ids["hybrid_rerank"]], resamples=RESAMPLES, output=page
    )
    dom = browse(page, tmp_path, "--dump-dom")  # fails on any console message or error
    for anchor in SECTIONS:
        assert f'<h2 id="{anchor}">' in dom, anchor
    for chart in ("chart-means", "chart-scatter", "chart-failures"):
        assert f'id="{chart}"' in dom, chart
    assert dom.count('class="point"') == len(data.pairs)  # one circle per paired query
    assert dom.count('<table class="paired">') == 1
    assert dom.count('<details class="change"') == len(data.changed)
    assert dom.count('<table class="diagnosis">') == 2  # all queries, then per category
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    browse(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2400")
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", header[16:24]) == (1280, 2400)
    assert shot.stat().st_size > 50_000  # a blank page compresses to a few kB


@pytest.mark.browser
def test_injected_markup_does_not_run_in_chromium(store, poisoned, tmp_path):
    runs, ids = poisoned
    page = tmp_path / "poisoned.html"
    report(open_runs(runs), [ids["baseline"], ids["hybrid_rerank"]], resamples=50, output=page)
    dom = browse(page, tmp_path, "--dump-dom")
    assert "data-pwned" not in dom
    assert "<img" not in dom
    assert "&lt;img src=x onerror=" in dom  # shown as text


def test_runs_of_two_versions_of_a_dataset_report_side_by_side_only_when_allowed(tmp_path):
    source = SHIPPED.parent / "seed-example"
    edited = tmp_path / "seed-example-edited"
    shutil.copytree(source, edited)
    corpus = edited / "corpus.jsonl"
    corpus.write_text(corpus.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    runs = tmp_path / "runs"
    first = run_variant("recorded", source, runs_dir=runs)
    second = run_variant("recorded", edited, runs_dir=runs)
    refs = [first.run_id, second.run_id]
    with pytest.raises(Exception, match="name runs on one dataset"):
        report(open_runs(runs), refs, resamples=50)
    page = report(open_runs(runs), refs, resamples=50, allow_mismatch=True)
    assert '<h2 id="changed">' in page
