"""The diagnosis table from stored traces, by hand on the seed example and through the CLI."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from rag_bench.analysis.diagnose import diagnose_run
from rag_bench.experiment.runner import run_variant
from rag_bench.runs import open_runs

SEED = ROOT / "rag_bench" / "data" / "shipped" / "seed-example"


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
