"""Data as users have it: qrels naming documents the corpus lacks (ArguAna's published qrels
name 5) and a system's outputs retrieving documents outside the evaluation corpus. Refused by
default, with a hint; with ``--drop-unknown`` left out, counted and named."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import SHIPPED, assert_one_line_error
from rag_bench.data.dataset import load_dataset
from rag_bench.errors import DataError
from rag_bench.runs import open_runs

GHOSTS = ("ghost-doc-1", "ghost-doc-2")


@pytest.fixture
def published(tmp_path):
    """kestrel-kb with three judgements naming two documents its corpus lacks."""
    folder = tmp_path / "kestrel-published"
    shutil.copytree(SHIPPED, folder)
    with (folder / "qrels" / "test.tsv").open("a") as qrels:
        qrels.write(f"q-nas-001\t{GHOSTS[0]}\t1\nq-nas-002\t{GHOSTS[0]}\t1\n")
        qrels.write(f"q-nas-002\t{GHOSTS[1]}\t2\n")
    return folder


def test_unknown_judgements_are_refused_then_dropped_and_named(published):
    with pytest.raises(DataError, match="ghost-doc-1.*1 more unknown.*--drop-unknown"):
        load_dataset(published)
    strict = load_dataset(SHIPPED)
    data = load_dataset(published, drop_unknown=True)
    assert data.n_dropped == 3 and data.dropped == {"document": list(GHOSTS)}
    assert (
        "dropped 3 judgements (2 document ids not in corpus.jsonl: ghost-doc-1"
        in (data.warnings[0])
    )
    assert data.qrels.to_dict() == strict.qrels.to_dict()  # what is left is the clean set


def test_run_with_drop_unknown_records_what_it_dropped(published, rag_bench, tmp_path):
    runs = tmp_path / "runs"
    refused = rag_bench("run", "--variant", "baseline", "--dataset", published, "--runs-dir", runs)
    assert_one_line_error(refused, "test.tsv", "ghost-doc-1", "--drop-unknown")
    out = rag_bench(
        "run", "--variant", "baseline", "--dataset", published, "--tag", "smoke",
        "--runs-dir", runs, "--drop-unknown",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    assert "warning: " in out.stderr and "dropped 3 judgements" in out.stderr
    manifest = open_runs(runs).get("latest:baseline+").manifest
    assert manifest["dataset"]["dropped"] == {"judgements": 3, "document": list(GHOSTS)}


def test_import_drops_retrieved_documents_outside_the_corpus(rag_bench, tmp_path):
    runs = tmp_path / "runs"
    clean, superset = tmp_path / "clean.jsonl", tmp_path / "superset.jsonl"
    records = [
        {"query_id": "q-nas-001", "retrieved": ["nas-001", "nas-002"], "answer": "It has 4 bays."},
        {"query_id": "q-nas-002", "retrieved": ["nas-003", "nas-001"], "answer": "No."},
    ]
    clean.write_text("".join(json.dumps(r) + "\n" for r in records))
    records[0]["retrieved"] = ["prod-77", "nas-001", "prod-78", "nas-002"]  # the index's extras
    records[1]["retrieved"] = ["nas-003", "prod-77", "nas-001"]
    superset.write_text("".join(json.dumps(r) + "\n" for r in records))
    refused = rag_bench("import", superset, "--name", "prod", "--runs-dir", runs)
    assert_one_line_error(refused, "superset.jsonl:1", "prod-77", "--drop-unknown")
    for path, name in ((clean, "clean"), (superset, "prod")):
        args = ("--name", name, "--runs-dir", runs, "--drop-unknown")
        out = rag_bench("import", path, *args)
        assert out.exit_code == 0, out.stderr
    assert "dropped 3 retrieved entries naming 2 documents not in the corpus: prod-77, prod-78" in (
        out.stderr
    )
    store = open_runs(runs)
    dropped = store.get("latest:prod+").manifest["outputs"]["dropped"]
    assert dropped == {"retrieved": 3, "documents": 2, "ids": ["prod-77", "prod-78"]}
    values = [
        store.metrics(ref).set_index(["query_id", "metric"])["value"]
        for ref in ("latest:clean+", "latest:prod+")
    ]
    assert values[0].dropna().equals(values[1].dropna())  # as if it had searched the corpus
