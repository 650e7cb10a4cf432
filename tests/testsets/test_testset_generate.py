"""A generated set on disk: a dataset that loads and runs, its review items in the shared
format, the same bytes for the same seed, and the review applied by ``accept``."""

from __future__ import annotations

import json

import pytest

from conftest import SHIPPED, assert_one_line_error
from rag_bench.data.dataset import load_dataset
from rag_bench.errors import DataError, UsageError
from rag_bench.testsets.generate import accept, generate

REVIEW_FIELDS = {
    "kind", "dataset", "query_id", "query", "category", "doc_ids", "gold_answer",
    "source_span", "doc_text",
}  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "set"
    return generate(SHIPPED, out, n=8, seed=1, cache_dir=tmp_path_factory.mktemp("cache"))


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_set_is_a_dataset_of_unreviewed_generated_queries(made):
    data = load_dataset(made.folder)
    assert len(data.queries) == 8 == len(made.queries)
    assert all({"generated", "unreviewed"} <= set(q.tags) for q in data.queries.values())
    assert any("8 of 8 queries are generated and unreviewed" in w for w in data.warnings)
    grades = data.qrels.to_dict()
    for query_id, proposal in made.queries:
        assert sorted(grades.get(query_id, {})) == sorted(proposal.doc_ids)
        query = data.queries[query_id]
        assert query.should_refuse == (proposal.category == "unanswerable")
        assert query.answer == proposal.gold_answer
    for record in records(made.folder / "queries.jsonl"):
        assert record["generated"]["method"].startswith("offline:")
        assert record["generated"]["seed"] == 1
    corpus = (made.folder / "corpus.jsonl").read_bytes()
    assert corpus == (SHIPPED / "corpus.jsonl").read_bytes()


def test_review_items_are_the_shared_generated_kind(made):
    items = records(made.folder / "review.jsonl")
    assert [i["query_id"] for i in items] == [q for q, _ in made.queries]
    for item, (_, proposal) in zip(items, made.queries):
        assert set(item) == REVIEW_FIELDS and item["kind"] == "generated"
        assert item["source_span"] in item["doc_text"]
        if proposal.gold_answer:
            assert item["gold_answer"] in item["source_span"]


def test_the_same_seed_writes_the_same_bytes(made, tmp_path):
    again = generate(SHIPPED, tmp_path / "again", n=8, seed=1, cache_dir=tmp_path / "c")
    for name in ("queries.jsonl", "qrels/test.tsv"):
        assert (again.folder / name).read_bytes() == (made.folder / name).read_bytes(), name
    for name in ("review.jsonl", "quality.json"):  # the same but for the folder's name
        mine, theirs = (f.read_text() for f in (again.folder / name, made.folder / name))
        assert mine.replace('"again"', '"set"') == theirs, name


def test_an_existing_folder_is_never_written_over(made):
    before = (made.folder / "queries.jsonl").read_bytes()
    with pytest.raises(UsageError, match="already exists"):
        generate(SHIPPED, made.folder, n=2)
    assert (made.folder / "queries.jsonl").read_bytes() == before


def label(query_id, accept_it, query=None, who="ana", at="2026-12-05T19:04:11Z"):
    line = {"kind": "generated", "query_id": query_id, "accept": accept_it, "labeller": who}
    line["labelled_at"] = at
    if query is not None:
        line["query"] = query
    return json.dumps(line)


def test_accept_applies_accept_reject_and_edits(made, tmp_path):
    folder = tmp_path / "copy"
    import shutil

    shutil.copytree(made.folder, folder)
    ids = [q for q, _ in made.queries]
    answered = [q for q, p in made.queries if p.doc_ids]
    edited, rejected = answered[0], answered[1]
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "\n".join(
            [
                label(rejected, True),
                json.dumps(
                    {
                        "kind": "pair",
                        "query_id": "x",
                        "doc_id": "d",
                        "grade": 1,
                        "labeller": "ana",
                        "labelled_at": "2026-12-05T19:00:00Z",
                    }
                ),
                label(edited, True, "Which platform code does it use?"),
                label(rejected, False, who="bo"),  # a later line overrides the earlier one
                label("gen-9-0001", True),
            ]
        )
        + "\n"
    )
    done = accept(folder, labels)
    assert done.accepted == [edited] and done.edited == [edited]
    assert done.rejected == [rejected] and done.unknown == ["gen-9-0001"]
    assert done.unlabelled == [q for q in ids if q not in (edited, rejected)]
    data = load_dataset(folder)
    assert rejected not in data.queries and rejected not in data.qrels.to_dict()
    query = data.queries[edited]
    assert query.text == "Which platform code does it use?"
    assert "reviewed" in query.tags and "unreviewed" not in query.tags
    kept = {r["_id"]: r for r in records(folder / "queries.jsonl")}
    assert kept[edited]["generated"]["review"]["labeller"] == "ana"
    assert kept[edited]["generated"]["proposed_text"] == dict(made.queries)[edited].text
    (gone,) = records(folder / "rejected.jsonl")
    assert gone["_id"] == rejected and gone["generated"]["review"]["labeller"] == "bo"
    assert gone["qrels"] and all(row.startswith(f"{rejected}\t") for row in gone["qrels"])


def test_a_bad_label_line_names_the_file_and_line(made, tmp_path, rag_bench):
    labels = tmp_path / "labels.jsonl"
    labels.write_text(label("a", True) + "\n" + '{"kind": "generated", "query_id": "b"}\n')
    with pytest.raises(DataError, match="accept"):
        accept(made.folder, labels)
    outcome = rag_bench("generate", "--accept", labels, "--dataset", made.folder)
    assert_one_line_error(outcome, "labels.jsonl:2", "accept")
