"""The diagnosis table from stored traces, by hand on the seed example and through the CLI."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from rag_bench.analysis.diagnose import diagnose_run
from rag_bench.experiment.runner import run_variant
from rag_bench.runs import open_runs

SEED = ROOT / "data" / "seed-example"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    run_variant("recorded", SEED, runs_dir=folder, ks=(2, 3))
    run_variant("recorded", SEED, runs_dir=folder, ks=(2, 3), overrides=["judge.name=lexical"])
    return folder


def test_symptoms_of_the_seed_example(runs):
    store = open_runs(runs)
    annotated = [r for r in store.list() if r.manifest["judge"]["name"] == "annotated"][0]
    table = diagnose_run(store, annotated, slice_by=None).set_index("symptom")
    # q1 has one unsupported claim of three (faithfulness 2/3) and a citation to a document
    # that does not support its claim; q2 has no citation, so it is not counted there
    assert table.loc["unsupported claims", ["n", "of"]].tolist() == [1, 2]
    assert table.loc["unsupported claims", "examples"] == "q1"
    assert table.loc["citations to non-supporting documents", ["n", "of"]].tolist() == [1, 1]
    # recall@2 of q1 is 0.5 (not low); its second relevant document is at rank 3 > k = 2
    assert table.loc["low recall@k", "n"] == 0
    assert table.loc["unsupported claims", "culprit"] == "generator"


def test_against_pairs_the_same_queries(runs, rag_bench):
    store = open_runs(runs)
    annotated, lexical = sorted(store.list(), key=lambda r: r.manifest["judge"]["name"])
    table = diagnose_run(store, lexical, annotated, slice_by=None).set_index("symptom")
    row = table.loc["unsupported claims"]
    assert row["n_against"] == 1
    assert row["delta"] == pytest.approx(row["share"] - row["share_against"])
    assert row["n"] - row["n_against"] == row["appeared"] - row["cleared"]
    out = rag_bench(
        "diagnose",
        lexical.run_id,
        "--against",
        annotated.run_id,
        "--runs-dir",
        runs,
        "--slice",
        "category",
        "--format",
        "json",
    )
    assert out.exit_code == 0, out.stderr
    rows = json.loads(out.stdout)
    assert {r["slice"] for r in rows} >= {"all"}
    assert {"appeared", "cleared", "culprit", "what_to_try"} <= set(rows[0])


def test_an_unknown_run_is_one_line(runs, rag_bench):
    out = rag_bench("diagnose", "nope", "--runs-dir", runs)
    assert out.exit_code != 0 and "Traceback" not in out.stderr


def test_low_recall_is_judged_against_what_the_top_k_can_hold():
    import numpy as np
    import pandas as pd

    from rag_bench.analysis.diagnose import SYMPTOMS

    low_recall = next(s for s in SYMPTOMS if s.name == "low recall@k")
    # (relevant documents, of them in the top 5): 70 with 5 found is all the top 5 can hold;
    # 10 with 2 found is 2 of 5 places; 4 with 1 is 1 of 4; 2 with 1 is half; an unanswerable
    # query (no relevant document) has no recall to judge
    cases = [(70, 5), (10, 2), (4, 1), (2, 1), (1, 1), (0, None)]
    frame = pd.DataFrame(
        {
            "n_relevant": [n for n, _ in cases],
            "recall@5": [np.nan if f is None else f / n for n, f in cases],
        }
    )
    flagged = low_recall.test(frame, 5, 100)
    assert flagged.iloc[:5].tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert np.isnan(flagged.iloc[5])


def test_explain_prints_every_rule_at_the_runs_cutoffs(runs, rag_bench):
    from rag_bench.analysis.diagnose import SYMPTOMS

    store = open_runs(runs)
    ref = store.list()[0].run_id
    out = rag_bench("diagnose", ref, "--runs-dir", runs, "--explain", "--format", "json")
    assert out.exit_code == 0, out.stderr
    rules = json.loads(out.stdout)["rules"]
    assert [r["symptom"] for r in rules] == [s.name for s in SYMPTOMS]
    assert rules[0]["rule"].startswith("recall@2 x relevant / min(2, relevant) < 0.5")
    assert "hit@3 = 1" in rules[1]["rule"]
    text = rag_bench("diagnose", ref, "--runs-dir", runs, "--explain", "--wide")
    assert "recall@2 x relevant" in text.stdout and "hit@3 = 1" in text.stdout
