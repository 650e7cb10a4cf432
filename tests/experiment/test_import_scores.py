"""Scores teams already have: result files written by ragas, DeepEval and promptfoo themselves
(tests/fixtures/peers, README there says how) imported as runs, so compare and gate give paired
statistics over the tools' own scores."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from conftest import ROOT, SHIPPED, assert_one_line_error
from rag_bench.analysis.compare import compare
from rag_bench.analysis.gate import gate
from rag_bench.data.dataset import load_dataset
from rag_bench.experiment.importer import import_scores
from rag_bench.runs import open_runs

PEERS = ROOT / "tests" / "fixtures" / "peers"


@pytest.fixture
def promptfoo_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_bytes(gzip.decompress((PEERS / "promptfoo-results.json.gz").read_bytes()))
    return path


def _stored(runs, ref: str, metric: str) -> pd.Series:
    frame = open_runs(runs).metrics(ref)
    return frame[frame["metric"] == metric].set_index("query_id")["value"]


def test_ragas_tables_are_matched_by_question_and_compared(tmp_path, rag_bench):
    runs = tmp_path / "runs"
    for system in ("bare", "with-answer"):
        out = rag_bench(
            "import", PEERS / f"ragas-{system}.csv", "--from", "ragas", "--name", system,
            "--dataset", SHIPPED, "--runs-dir", runs,
        )  # fmt: skip
        assert out.exit_code == 0, out.stderr
        assert "ragas:exact_match" in out.stdout and "stored run" in out.stderr
    written = pd.read_csv(PEERS / "ragas-with-answer.csv")
    by_text = {q.text: q.id for q in load_dataset(SHIPPED).queries.values()}
    expected = dict(zip(written["user_input"].map(by_text), written["non_llm_string_similarity"]))
    stored = _stored(runs, "latest:with-answer+", "ragas:non_llm_string_similarity")
    assert stored.to_dict() == expected and len(stored) == 12
    result = compare(runs, ["latest:bare+", "latest:with-answer+"], slice_by=None, seed=0)
    row = result.rows.set_index("metric").loc["ragas:exact_match"]
    bare = pd.read_csv(PEERS / "ragas-bare.csv")["exact_match"].mean()
    assert row["delta"] == pytest.approx(written["exact_match"].mean() - bare)
    assert row["n"] == 12 and row["p_adjusted"] < 0.05 and row["wins"] == 12
    failed = gate(runs, "latest:bare+", "latest:with-answer+", {"ragas:exact_match": 0.1})
    assert not failed.passed


def test_deepeval_test_runs_are_matched_by_name(tmp_path):
    runs = tmp_path / "runs"
    for system in ("bare", "with-answer"):
        import_scores(PEERS / f"deepeval-{system}.json", SHIPPED, name=system, runs_dir=runs)
    saved = json.loads((PEERS / "deepeval-with-answer.json").read_text())
    expected = {
        case["name"]: next(m["score"] for m in case["metricsData"] if m["name"] == "Answer Overlap")
        for case in saved["testCases"]
    }
    stored = _stored(runs, "latest:with-answer+", "deepeval:answer_overlap")
    assert stored.to_dict() == expected
    result = compare(runs, ["latest:bare+", "latest:with-answer+"], slice_by=None, seed=0)
    rows = result.rows.set_index("metric")
    assert rows.loc["deepeval:answer_overlap", "delta"] > 0
    assert rows.loc["deepeval:context_mentions_answer", "delta"] == 0  # the same contexts
    assert result.n_paired == {open_runs(runs).resolve("latest:with-answer+"): 12}


def test_promptfoo_output_is_one_system_at_a_time(tmp_path, promptfoo_file, rag_bench):
    runs = tmp_path / "runs"
    both = rag_bench(
        "import", promptfoo_file, "--from", "promptfoo", "--name", "x", "--runs-dir", runs,
        "--dataset", SHIPPED,
    )  # fmt: skip
    assert_one_line_error(both, "holds 2 systems", "echo · bare", "echo · with-answer", "--system")
    for label in ("bare", "with-answer"):
        import_scores(promptfoo_file, SHIPPED, name=label, system=f"echo · {label}", runs_dir=runs)
    results = json.loads(promptfoo_file.read_text())["results"]["results"]
    expected = {
        r["vars"]["query_id"]: r["namedScores"]["answer_overlap"]
        for r in results
        if r["prompt"]["label"] == "with-answer"
    }
    assert _stored(runs, "latest:with-answer+", "promptfoo:answer_overlap").to_dict() == expected
    result = compare(runs, ["latest:bare+", "latest:with-answer+"], slice_by=None, seed=0)
    row = result.rows.set_index("metric").loc["promptfoo:score"]
    assert row["n"] == 12 and row["delta"] > 0 and row["p_adjusted"] < 0.05


def test_without_a_dataset_the_questions_are_the_queries(tmp_path):
    runs = tmp_path / "runs"
    for system in ("bare", "with-answer"):
        import_scores(PEERS / f"ragas-{system}.csv", name=system, runs_dir=runs)
    store = open_runs(runs)
    assert (
        store.get("latest:bare+").dataset_sha256 == store.get("latest:with-answer+").dataset_sha256
    )
    result = compare(runs, ["latest:bare+", "latest:with-answer+"], slice_by=None, seed=0)
    assert result.rows.set_index("metric").loc["ragas:string_present", "n"] == 12


def test_a_dataframe_and_an_unknown_question(tmp_path, rag_bench):
    frame = pd.read_csv(PEERS / "ragas-bare.csv", index_col=0)
    frame.loc[3, "user_input"] = "A question the dataset does not have?"
    runs = tmp_path / "runs"
    path = tmp_path / "edited.csv"
    frame.to_csv(path)
    refused = rag_bench(
        "import", path, "--from", "ragas", "--name", "x", "--dataset", SHIPPED, "--runs-dir", runs
    )
    assert_one_line_error(
        refused, "edited.csv:5", "names no query of the dataset", "--drop-unknown"
    )
    result = import_scores(frame, SHIPPED, name="frame", runs_dir=runs, drop_unknown=True)
    assert result.manifest["scores"]["unmatched_records"] == [5]
    assert result.manifest["scores"]["n_records"] == 11
