"""`rag-bench judge-agreement --labels`: any judge measured on a user's labels file."""

from __future__ import annotations

import json

import pytest
from labels_helpers import write_labels

from conftest import assert_one_line_error, require

PASSAGE = "The ferry leaves at 7:30 from pier 4 and reaches the island in forty minutes."
ROWS = [
    {"id": "a1", "context": [PASSAGE], "answer": "The ferry leaves from pier 4.",
     "label": "supported"},
    {"id": "a2", "context": [PASSAGE], "answer": "The ferry leaves at 9:15 from pier 2.",
     "label": "unsupported"},
    {"id": "c1", "context": PASSAGE, "claim": "It reaches the island in forty minutes.",
     "label": "supported"},
    {"id": "c2", "context": PASSAGE, "claim": "Bicycles ride free on every crossing.",
     "label": "unsupported"},
]  # fmt: skip


def test_the_table_has_the_judge_both_baselines_and_a_verdict(rag_bench, tmp_path):
    path = write_labels(tmp_path, ROWS)
    outcome = rag_bench("judge-agreement", "--labels", path, "--resamples", "200")
    assert outcome.exit_code == 0, outcome.stderr
    out = outcome.stdout
    assert "per claim: 2" in out and "per answer: 2" in out
    for word in ("lexical", "overlap", "constant", "roc_auc", "kappa", "share_flagged"):
        assert word in out
    assert "unigram overlap" in out  # the verdict against the baseline


def test_json_holds_every_interval(rag_bench, tmp_path):
    path = write_labels(tmp_path, ROWS)
    report = json.loads(
        rag_bench(
            "judge-agreement", "--labels", path, "--resamples", "50", "--format", "json"
        ).stdout
    )
    answer = report["levels"]["answer"]["scorers"]["lexical"]
    assert answer["kappa"]["value"] == 1.0  # the wrong time and pier are flagged, the right not
    assert set(answer["roc_auc"]) == {"value", "low", "high"}
    assert report["judge"]["name"] == "lexical"


def test_a_bad_labels_file_is_one_line(rag_bench, tmp_path):
    path = write_labels(tmp_path, [{**ROWS[0], "label": "hallucinated"}])
    assert_one_line_error(
        rag_bench("judge-agreement", "--labels", path), f"{path}:1", "'supported' or 'unsupported'"
    )


def test_labels_and_a_dataset_do_not_mix(rag_bench, tmp_path):
    path = write_labels(tmp_path, ROWS)
    outcome = rag_bench("judge-agreement", "--labels", path, "--dataset", "kestrel-kb")
    assert outcome.exit_code != 0 and "--labels" in outcome.stderr


def test_the_llm_judge_is_measured_the_same_way(fake, rag_bench, tmp_path):
    require("httpx", "pip install -e '.[dev]'")
    path = write_labels(tmp_path, ROWS)
    outcome = rag_bench(
        "judge-agreement", "--labels", path, "--judge", "llm", "--set", "judge.model=judge-3",
        "--resamples", "50", "--format", "json",
    )  # fmt: skip
    assert outcome.exit_code == 0, outcome.stderr
    report = json.loads(outcome.stdout)
    assert report["judge"]["name"] == "llm" and {"claim", "answer"} <= set(report["levels"])
    # the fake grades everything 2: nothing flagged, so κ is 0 and the judge does not beat overlap
    claim = report["levels"]["claim"]
    assert claim["scorers"]["llm"]["share_flagged"]["value"] == 0.0
    assert "does NOT beat" in claim["note"]
    assert {b["model"] for b in fake.chat_bodies()} == {"judge-3"}


def test_a_datasets_claim_labels_get_the_same_table(rag_bench):
    report = json.loads(
        rag_bench("judge-agreement", "--resamples", "50", "--format", "json").stdout
    )
    meta = report["meta"]["levels"]
    assert meta["claim"]["n"] == report["n_claims"]  # every labelled claim of kestrel-kb
    assert meta["claim"]["scorers"]["lexical"]["kappa"]["value"] == pytest.approx(report["kappa"])
    assert {"lexical", "overlap", "constant"} == set(meta["answer"]["scorers"])
