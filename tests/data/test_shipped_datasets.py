"""Rules both shipped datasets (``data/kestrel-kb``, ``data/lumen-mall-zh``) follow: every record
loads, the categories mean what the dataset cards say, and every recorded answer carries the
failure class the cards' diagnosis rules give. What differs between the two (sizes, the
language of answers) is in test_shipped_dataset.py and test_shipped_dataset_zh.py."""

from __future__ import annotations

from collections import Counter

import pytest

from rag_bench.data.dataset import load_dataset
from shipped import CATEGORIES, FAILURE_CLASSES, KESTREL, LUMEN, norm


@pytest.fixture(scope="module", params=[KESTREL, LUMEN], ids=lambda s: s.folder.name)
def shipped(request):
    return request.param


@pytest.fixture(scope="module")
def data(shipped):
    return load_dataset(shipped.folder)


@pytest.fixture(scope="module")
def grades(data):
    return data.qrels.to_dict()


def test_loads_without_warnings_and_keeps_every_record(shipped, data, grades):
    assert data.warnings == []
    assert len(data.docs) == shipped.lines("corpus.jsonl")
    # every query is evaluated: judged in the test split, or a refusal query
    assert len(data.queries) == shipped.lines("queries.jsonl")
    assert len(data.answers) == shipped.lines("answers.jsonl")
    assert sum(len(judged) for judged in grades.values()) == shipped.lines("qrels/test.tsv") - 1
    assert set(grades) <= set(data.queries)
    assert all(doc in data.docs for judged in grades.values() for doc in judged)


def test_typo_queries_are_paraphrases(data):
    typo = [q for q in data.queries.values() if "typo" in q.tags]
    assert typo
    assert {q.category for q in typo} == {"paraphrase"}


def test_answerable_queries_have_a_gold_answer(data):
    for query in data.queries.values():
        if query.category == "unanswerable":
            continue
        assert not query.should_refuse, query.id
        assert query.answer and query.answer.strip(), query.id


def test_literal_and_paraphrase_answers_appear_verbatim_in_a_grade_3_document(data, grades):
    missing = []
    for query in data.queries.values():
        if query.category not in ("literal", "paraphrase"):
            continue
        best = [doc for doc, grade in grades.get(query.id, {}).items() if grade == 3]
        answer = norm(query.answer or "")
        if not answer or not any(answer in norm(data.docs[doc].full_text()) for doc in best):
            missing.append(query.id)
    assert missing == []


def test_multi_hop_queries_need_two_documents(data, grades):
    for query in data.queries.values():
        if query.category != "multi-hop":
            continue
        judged = grades.get(query.id, {})
        assert sum(grade >= 1 for grade in judged.values()) >= 2, query.id
        assert sum(grade >= 2 for grade in judged.values()) >= 2, query.id


def test_unanswerable_queries_have_only_distractors(data, grades):
    for query in data.queries.values():
        refusable = query.category == "unanswerable"
        assert query.should_refuse == refusable, query.id
        if not refusable:
            continue
        assert query.answer is None, query.id
        judged = grades.get(query.id, {})
        assert judged, query.id  # at least one judged distractor
        assert all(grade == 0 for grade in judged.values()), query.id


def test_expected_failure_classes_follow_the_rules(shipped, data, grades):
    wrong = {}
    for recorded in data.answers.values():
        query = data.queries[recorded.query_id]
        computed = shipped.expected_class(query, recorded, grades.get(query.id, {}))
        if recorded.expected_failure_class != computed:
            wrong[recorded.query_id] = (recorded.expected_failure_class, computed)
    assert wrong == {}
    seen = Counter(r.expected_failure_class for r in data.answers.values())
    assert set(seen) == set(FAILURE_CLASSES)


def test_recorded_answers_cover_every_category(data):
    categories = {data.queries[qid].category for qid in data.answers}
    assert categories == set(CATEGORIES)
