"""Loading dataset folders: the BEIR layout with rag-bench's extras, and bad input."""

from __future__ import annotations

import json
import shutil

import pytest

from rag_bench.data.dataset import SHIPPED_FOLDER, load_dataset, shipped_datasets
from rag_bench.errors import DataError

DOCS = [
    {"_id": "d1", "title": "Returns", "text": "Items can be returned within 7 days of delivery."},
    {"_id": "d2", "title": "Fresh food", "text": "Fresh food cannot be returned."},
    {"_id": "d3", "title": "Refunds", "text": "Refunds reach your account in 3 to 5 days."},
]
QUERIES = [
    {"_id": "q1", "text": "What is the return window?", "category": "literal", "answer": "7 days"},
    {"_id": "q2", "text": "can i send back lettuce", "category": "paraphrase", "tags": ["typo"]},
    {
        "_id": "q3",
        "text": "Do you ship to Mars?",
        "category": "unanswerable",
        "should_refuse": True,
    },
    {"_id": "q9", "text": "a query of another split"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t3\nq1\td3\t0\nq2\td2\t2\n"


def write(folder, docs=DOCS, queries=QUERIES, qrels=QRELS, answers=None):
    folder.mkdir(exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    if answers is not None:
        (folder / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    return folder


def test_loads_beir_layout_with_extras(tmp_path):
    answer = {
        "query_id": "q1",
        "ranking": ["d3", "d1"],
        "answer": "Within 7 days [d1].",
        "claims": [{"text": "Within 7 days.", "citations": ["d1"], "supported_by": ["d1"]}],
    }
    data = load_dataset(write(tmp_path / "mini", answers=[answer]))
    assert set(data.docs) == {"d1", "d2", "d3"}
    # q9 is neither judged in this split nor unanswerable: it belongs to another split.
    assert set(data.queries) == {"q1", "q2", "q3"}
    assert data.queries["q2"].tags == ("typo",)
    assert data.queries["q3"].should_refuse and data.queries["q1"].category == "literal"
    assert data.answers["q1"].claims[0].supported_by == ("d1",)
    assert data.warnings == []
    assert len(data.sha256) == 64


def test_hash_changes_with_content(tmp_path):
    first = load_dataset(write(tmp_path / "a")).sha256
    docs = [*DOCS[:2], {**DOCS[2], "text": "Refunds take a week."}]
    assert load_dataset(write(tmp_path / "b", docs=docs)).sha256 != first


def test_missing_category_is_uncategorized(tmp_path):
    queries = [{"_id": "q1", "text": "x"}, *QUERIES[1:]]
    assert (
        load_dataset(write(tmp_path / "d", queries=queries)).queries["q1"].category
        == "uncategorized"
    )


def test_category_typo_warns_with_known_names(tmp_path):
    queries = [{**QUERIES[0], "category": "paraphase"}, *QUERIES[1:]]
    warnings = load_dataset(write(tmp_path / "d", queries=queries)).warnings
    assert len(warnings) == 1 and "'paraphrase'" in warnings[0] and "queries.jsonl:1" in warnings[0]


def expect_error(folder, *fragments):
    with pytest.raises(DataError) as info:
        load_dataset(folder)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_malformed_json_line(tmp_path):
    folder = write(tmp_path / "d")
    with (folder / "corpus.jsonl").open("a") as handle:
        handle.write('{"_id": "d4", "text": \n')
    expect_error(folder, "corpus.jsonl:4", "not valid JSON")


def test_duplicate_doc_id(tmp_path):
    expect_error(
        write(tmp_path / "d", docs=[*DOCS, DOCS[0]]),
        "corpus.jsonl:4",
        "'d1' appears twice",
        "line 1",
    )


def test_duplicate_query_id(tmp_path):
    expect_error(
        write(tmp_path / "d", queries=[*QUERIES, QUERIES[1]]),
        "queries.jsonl:5",
        "'q2' appears twice",
    )


def test_qrels_unknown_document(tmp_path):
    expect_error(
        write(tmp_path / "d", qrels=QRELS + "q2\td7\t1\n"),
        "test.tsv:5",
        "'d7' is not in corpus.jsonl",
    )


def test_qrels_unknown_query(tmp_path):
    expect_error(
        write(tmp_path / "d", qrels=QRELS + "q8\td1\t1\n"),
        "test.tsv:5",
        "'q8' is not in queries.jsonl",
    )


def test_qrels_non_integer_grade(tmp_path):
    expect_error(write(tmp_path / "d", qrels=QRELS + "q2\td1\tyes\n"), "test.tsv:5", "whole number")


def test_non_utf8_bytes(tmp_path):
    folder = write(tmp_path / "d")
    (folder / "queries.jsonl").write_bytes(b'{"_id": "q1", "text": "caf\xe9"}\n')
    expect_error(folder, "queries.jsonl:1", "not UTF-8")


def test_bom_and_crlf_are_accepted(tmp_path):
    folder = write(tmp_path / "d")
    corpus = folder / "corpus.jsonl"
    corpus.write_bytes(b"\xef\xbb\xbf" + corpus.read_bytes().replace(b"\n", b"\r\n"))
    assert len(load_dataset(folder).docs) == 3


def test_empty_corpus(tmp_path):
    expect_error(write(tmp_path / "d", docs=[]), "corpus.jsonl", "no documents")


def test_empty_query_text(tmp_path):
    expect_error(
        write(tmp_path / "d", queries=[{"_id": "q1", "text": "  "}]),
        "queries.jsonl:1",
        "empty text",
    )


def test_missing_files(tmp_path):
    folder = write(tmp_path / "d")
    (folder / "queries.jsonl").unlink()
    expect_error(folder, "queries.jsonl", "missing queries file")
    expect_error(tmp_path / "nowhere", "no such dataset folder")


def test_a_shipped_dataset_loads_by_name_unless_a_folder_of_that_name_exists(tmp_path, monkeypatch):
    assert shipped_datasets() == ["kestrel-kb", "lumen-mall-zh", "seed-example"]
    monkeypatch.chdir(tmp_path)
    shipped = load_dataset("seed-example")
    assert shipped.path == SHIPPED_FOLDER / "seed-example" and shipped.name == "seed-example"
    assert load_dataset().path == SHIPPED_FOLDER / "kestrel-kb"
    local = load_dataset(write(tmp_path / "seed-example"))
    assert load_dataset("seed-example").sha256 == local.sha256 != shipped.sha256
    expect_error("kestrel", "no such dataset folder", "kestrel-kb, lumen-mall-zh, seed-example")


def test_missing_split_names_the_available_ones(tmp_path):
    folder = write(tmp_path / "d")
    with pytest.raises(DataError) as info:
        load_dataset(folder, split="dev")
    assert "use --split test" in str(info.value)


def test_wrong_field_type(tmp_path):
    queries = [{**QUERIES[0], "should_refuse": "no"}, *QUERIES[1:]]
    expect_error(
        write(tmp_path / "d", queries=queries), "queries.jsonl:1", "'should_refuse'", "bool"
    )


def test_answers_naming_unknown_documents(tmp_path):
    answer = {"query_id": "q1", "ranking": ["d1", "d8"], "answer": "x", "claims": []}
    expect_error(write(tmp_path / "d", answers=[answer]), "answers.jsonl:1", "'d8'")


def test_a_category_misspelt_against_the_datasets_own_categories_is_warned(tmp_path):
    """``logistcs`` once among several ``logistics`` is a typo; a label of its own is not."""
    folder = tmp_path / "d"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "", "text": "Parcels ship on Mondays."}) + "\n"
    )
    labels = ["logistics"] * 3 + ["logistcs", "billing"]
    queries = [
        {"_id": f"q{i}", "text": "When do parcels ship?", "category": label}
        for i, label in enumerate(labels, 1)
    ]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td1\t1\n" for i in range(1, 6))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    warnings = load_dataset(folder).warnings
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{folder / 'queries.jsonl'}:4: category 'logistcs' looks like")
    assert "a typo of 'logistics'" in warnings[0]


def test_the_data_folder_holds_a_users_own_datasets_by_name(tmp_path, monkeypatch):
    """A dataset folder put beside the shipped ones (data/ of a checkout) is named by its name;
    it is not a shipped one, so tiers may rewrite it; a name cannot climb out of the folder."""
    from rag_bench.data import dataset

    data = tmp_path / "data"
    shutil.copytree(SHIPPED_FOLDER / "seed-example", data / "seed-example")
    write(data / "my-kb")
    monkeypatch.setattr(dataset, "SHIPPED_FOLDER", data)
    monkeypatch.chdir(tmp_path / "data" / "my-kb")  # no folder named "my-kb" here
    assert load_dataset("my-kb").path == data / "my-kb"
    assert dataset.is_shipped(data / "seed-example") and not dataset.is_shipped(data / "my-kb")
    assert shipped_datasets() == ["seed-example"]
    expect_error("../data/my-kb", "no such dataset folder")
