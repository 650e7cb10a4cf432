"""`rag-bench eval`: formats, options and what a user sees for bad input."""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLE, assert_one_line_error

QRELS, RUN = EXAMPLE / "qrels.txt", EXAMPLE / "run.txt"


def test_table_output(rag_bench):
    out = rag_bench("eval", "--qrels", QRELS, "--run", RUN, "--metrics", "ndcg@10,mrr")
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["metric", "value"]
    assert lines[2].split()[0] == "ndcg@10"
    assert "queries evaluated: 5" in out.stdout


def test_json_output_with_per_query(rag_bench):
    out = rag_bench(
        "eval",
        "--qrels",
        QRELS,
        "--run",
        RUN,
        "--metrics",
        "recall@2,ndcg@2",
        "--per-query",
        "--format",
        "json",
    )
    payload = json.loads(out.stdout)
    assert payload["n_queries"] == 5
    assert set(payload["means"]) == {"recall@2", "ndcg@2"}
    q1 = {row["metric"]: row["value"] for row in payload["per_query"] if row["query_id"] == "q1"}
    assert q1["recall@2"] == 0.5
    assert round(q1["ndcg@2"], 3) == 0.387
    assert len(payload["per_query"]) == 2 * 5


def test_markdown_output_carries_the_means_and_the_per_query_rows(rag_bench):
    args = ["eval", "--qrels", QRELS, "--run", RUN, "--metrics", "ndcg@10,mrr"]
    means = json.loads(rag_bench(*args, "--format", "json").stdout)["means"]
    out = rag_bench(*args, "--format", "markdown")
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["| metric | value |", "| --- | ---: |"]
    assert lines[2:4] == [f"| {m} | {v:.4f} |" for m, v in means.items()]
    assert "queries evaluated: 5" in out.stdout
    per_query = rag_bench(*args, "--format", "markdown", "--per-query").stdout.splitlines()
    assert per_query[0] == "| query_id | ndcg@10 | mrr |"
    assert per_query[-3] == f"| all | {means['ndcg@10']:.4f} | {means['mrr']:.4f} |"


def test_complete_counts_missing_query(rag_bench):
    out = rag_bench(
        "eval",
        "--qrels",
        QRELS,
        "--run",
        RUN,
        "--metrics",
        "hit@10",
        "--complete",
        "--format",
        "json",
    )
    payload = json.loads(out.stdout)
    assert payload["n_queries"] == 6
    assert payload["means"]["hit@10"] == pytest.approx(4 / 6)


def test_csv_per_query_has_an_all_row(rag_bench):
    out = rag_bench(
        "eval", "--qrels", QRELS, "--run", RUN, "--metrics", "mrr", "--per-query", "--format", "csv"
    )
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "query_id,mrr"
    assert lines[-1].startswith("all,")


def test_beir_qrels_are_accepted(rag_bench, tmp_path):
    beir = tmp_path / "test.tsv"
    rows = [line.split() for line in QRELS.read_text().splitlines()]
    beir.write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, _, d, g in rows)
    )
    trec = json.loads(rag_bench("eval", "--qrels", QRELS, "--run", RUN, "--format", "json").stdout)
    tsv = json.loads(rag_bench("eval", "--qrels", beir, "--run", RUN, "--format", "json").stdout)
    assert trec == tsv


def test_unknown_metric_gets_a_suggestion(rag_bench):
    out = rag_bench("eval", "--qrels", QRELS, "--run", RUN, "--metrics", "ndgc@10")
    assert_one_line_error(out, "ndgc@10", "did you mean 'ndcg@10'?")
    out = rag_bench("eval", "--qrels", QRELS, "--run", RUN, "--metrics", "faithfulness")
    assert_one_line_error(out, "'faithfulness' cannot be computed here", "precision@k", "rprec")


def test_trec_eval_names_are_shown_canonically(rag_bench):
    out = rag_bench(
        "eval", "--qrels", QRELS, "--run", RUN, "--metrics", "P_5,ndcg_cut.10,RR", "--format", "csv"
    )
    assert out.exit_code == 0, out.stderr
    assert [line.split(",")[0] for line in out.stdout.splitlines()[1:]] == [
        "precision@5",
        "ndcg@10",
        "mrr",
    ]


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("q1 Q0 d1 1 0.5\n", ["run.txt:1", "expected 6 fields"]),
        ("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n", ["run.txt:2", "'high'"]),
        ("q1 Q0 d1 1 nan t\n", ["run.txt:1", "finite"]),
        ("q1 Q0 d1 1 inf t\n", ["run.txt:1", "finite"]),
        ("q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n", ["run.txt:2", "twice", "first on line 1"]),
        ("", ["run.txt", "empty"]),
        ("q1 Q0 d1 1 0.5 t\nq1 Q0 d\xff 2 0.4 t\n", ["run.txt:2", "UTF-8"]),
        ("zz Q0 d1 1 0.5 t\n", ["run.txt", "no query of the run appears in the qrels"]),
    ],
)
def test_bad_run_files(rag_bench, tmp_path, content, fragments):
    run = tmp_path / "run.txt"
    run.write_bytes(content.encode("latin-1"))
    assert_one_line_error(rag_bench("eval", "--qrels", QRELS, "--run", run), *fragments)


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("q1 0 d1 1\nq1 0 d2 1.5\n", ["qrels.txt:2", "'1.5'", "whole number"]),
        ("q1 0 d1 -1\nq1 0 d2 200\n", ["qrels.txt:2", "whole number from -127 to 127"]),
        ("q1 0 d1 1\nq1 0 d1 2\n", ["qrels.txt:2", "twice"]),
        ("q1 0 d1 1 extra more\n", ["qrels.txt:1", "3 fields (BEIR) or 4 (TREC)"]),
        ("q1 0 d1 1\nq1 0 d2\n", ["qrels.txt:2", "expected 4 fields"]),
    ],
)
def test_bad_qrels_files(rag_bench, tmp_path, content, fragments):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(content)
    assert_one_line_error(rag_bench("eval", "--qrels", qrels, "--run", RUN), *fragments)


def test_missing_file(rag_bench, tmp_path):
    out = rag_bench("eval", "--qrels", tmp_path / "nope.txt", "--run", RUN)
    assert_one_line_error(out, "nope.txt", "no such qrels file")


def test_irregular_whitespace_crlf_and_bom_are_accepted(rag_bench, tmp_path):
    run = tmp_path / "run.txt"
    text = RUN.read_text().replace(" Q0 ", "  Q0\t").replace("\n", "\r\n")
    run.write_bytes(b"\xef\xbb\xbf" + text.encode())
    clean = json.loads(rag_bench("eval", "--qrels", QRELS, "--run", RUN, "--format", "json").stdout)
    messy = json.loads(rag_bench("eval", "--qrels", QRELS, "--run", run, "--format", "json").stdout)
    assert clean == messy


def test_rel_level_below_one_is_refused(rag_bench):
    assert_one_line_error(
        rag_bench("eval", "--qrels", QRELS, "--run", RUN, "--rel-level", "0"), "rel-level"
    )
