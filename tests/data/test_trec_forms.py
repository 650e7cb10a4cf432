"""The input forms trec_eval 10 reads, read alike: ``#`` comment lines in qrels and runs,
negative grades (judged non-relevant), fields after a run line's tag; bad grades and huge lines
refused cleanly and in time linear in the file's size.

Expectations come from pytrec_eval (trec_eval itself) on the same judgements given as dicts, and,
when ``TREC_EVAL_TESTS`` names trec_eval's own ``test/`` folder, from the outputs it ships.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import assert_one_line_error, require
from rag_bench import evaluate_run, load_qrels, load_run
from rag_bench.errors import DataError, RagBenchError
from rag_bench.evaluation.measures import canonical
from rag_bench.io import tabular

pytrec_eval = require("pytrec_eval")

QRELS = {
    "q1": {"d1": 2, "d2": -1, "d3": 1, "d4": 0},
    "q2": {"d5": 1, "d6": -2, "d7": 3},
    "q3": {"d8": -1, "d9": 0},  # nothing relevant
}
RUN = {
    "q1": {"d2": 9.0, "d1": 8.0, "d9": 7.5, "d3": 7.0, "d4": 7.0},
    "q2": {"d6": 3.0, "d7": 2.0, "d5": 1.0},
    "q3": {"d8": 5.0, "d9": 4.0},
}
METRICS = ["P_1", "P_3", "recall_3", "ndcg_cut_3", "ndcg", "recip_rank", "map", "Rprec"]
PYTREC = {"P.1", "P.3", "recall.3", "ndcg_cut.3", "ndcg", "recip_rank", "map", "Rprec"}


def qrels_lines() -> list[str]:
    lines = ["# judged by hand; grades below 0: judged non-relevant"]
    for q, docs in QRELS.items():
        lines += [f"{q} 0 {d} {g}" for d, g in docs.items()]
        lines.append("# a b 1")  # a comment with as many fields as a record
    return lines


def run_lines(trailing) -> list[str]:
    lines = ["# produced by a system"]
    for q, docs in RUN.items():
        for rank, (d, s) in enumerate(docs.items(), start=1):
            lines.append(f"{q} Q0 {d} {rank} {s} tag{trailing(rank)}")
    return lines


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def assert_like_pytrec_eval(qrels, run) -> None:
    ref = pytrec_eval.RelevanceEvaluator(QRELS, PYTREC).evaluate(RUN)
    result = evaluate_run(qrels, run, METRICS)
    assert result.n_queries == len(ref)
    rows = result.per_query
    for name in METRICS:
        ours = rows[rows["metric"] == canonical(name)].set_index("query_id")["value"]
        for q, values in ref.items():
            assert ours[q] == pytest.approx(values[name], abs=1e-12), (name, q)


@pytest.mark.parametrize(
    "trailing",
    [lambda rank: "", lambda rank: " 0.5 extra", lambda rank: " x" * rank],
    ids=["six fields", "two more on every line", "a varying number more"],
)
def test_trec_eval_forms_give_trec_eval_numbers(tmp_path, trailing):
    qrels = load_qrels(write(tmp_path / "qrels.txt", qrels_lines()))
    run = load_run(write(tmp_path / "run.txt", run_lines(trailing)))
    assert (qrels.frame["grade"] < 0).sum() == 3
    assert_like_pytrec_eval(qrels, run)


def test_regular_files_stay_on_the_fast_path(tmp_path, monkeypatch):
    """Comment-free files with a fixed number of fields per line never reach the line-by-line
    reader, trailing fields and negative grades included."""
    qrels_path = write(tmp_path / "qrels.txt", [line for line in qrels_lines() if "#" not in line])
    run_path = write(tmp_path / "run.txt", run_lines(lambda rank: " 0.5 x")[1:])

    def refuse(*args):
        raise AssertionError("read line by line")

    monkeypatch.setattr(tabular, "_read_slow", refuse)
    assert_like_pytrec_eval(load_qrels(qrels_path), load_run(run_path))


def test_a_comment_before_a_beir_header(tmp_path):
    path = write(tmp_path / "test.tsv", ["# exported", "query-id\tcorpus-id\tscore", "q1\td1\t-1"])
    assert load_qrels(path).frame["grade"].tolist() == [-1]


@pytest.mark.parametrize("grade", ["1e23", "100000000000000000000000", "128", "-128", "2.5"])
def test_a_grade_outside_trec_evals_range_is_one_clean_line(rag_bench, tmp_path, grade):
    qrels = write(tmp_path / "qrels.txt", ["q1 0 d1 1", f"q1 0 d2 {grade}"])
    run = write(tmp_path / "run.txt", run_lines(lambda rank: ""))
    assert_one_line_error(
        rag_bench("eval", "--qrels", qrels, "--run", run), "qrels.txt:2", repr(grade), "-127"
    )


def test_qrels_lines_keep_four_fields(tmp_path):
    path = write(tmp_path / "qrels.txt", ["q1 0 d1 1", "q1 0 d2 1 extra"])
    with pytest.raises(DataError, match="qrels.txt:2: expected 4 fields"):
        load_qrels(path)


def test_a_huge_single_line_is_refused_naming_its_line(tmp_path):
    """A file that is one 20 MB line is refused at line 1 (what it costs next to parsing a valid
    file of the same size is measured by benchmarks/bench_refuse.py)."""
    one_line = tmp_path / "one.txt"
    one_line.write_text(" ".join(f"x{i}" for i in range(2_000_000)))
    with pytest.raises(DataError, match="one.txt:1: score .x4. is not a finite number"):
        load_run(one_line)


TREC_EVAL_TESTS = os.environ.get("TREC_EVAL_TESTS")
SHIPPED_CASES = [  # (qrels, results, expected output) as trec_eval's Makefile pairs them
    ("qrels.test", "results.test", "out.test"),
    ("qrels.test.with-comments", "results.test", "out.test"),
    ("qrels.comment.test", "results.comment.test", "out.comment.test"),
]


@pytest.mark.skipif(
    not TREC_EVAL_TESTS, reason="TREC_EVAL_TESTS names no copy of trec_eval's test/ folder"
)
@pytest.mark.parametrize(("qrels", "results", "expected"), SHIPPED_CASES)
def test_trec_evals_own_test_files(qrels, results, expected):
    folder = Path(TREC_EVAL_TESTS)
    wanted = {}
    for line in (folder / expected).read_text().splitlines():
        name, _, value = line.split()
        try:
            wanted[canonical(name)] = float(value)
        except (RagBenchError, ValueError):
            continue  # a measure rag-bench does not compute (bpref, iprec_at_recall, …)
    assert len(wanted) >= 10
    result = evaluate_run(folder / qrels, folder / results, list(wanted))
    assert {m: round(v, 4) for m, v in result.means().items()} == wanted
