"""The shipped benchmark dataset ``data/kestrel-kb``: its shape, its judgements and the
labels of its recorded answers, checked against the rules of its dataset card."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from rag_bench.dataset import load_dataset

DATA = Path(__file__).resolve().parent.parent / "data" / "kestrel-kb"

CATEGORIES = ("literal", "paraphrase", "multi-hop", "unanswerable")
FAILURE_CLASSES = (
    "ok",
    "correct_refusal",
    "answered_unanswerable",
    "retrieval_miss",
    "wrongly_refused",
    "fabricated",
    "wrong_citation",
    "retrieved_not_used",
)
REFUSAL_PREFIXES = (
    "I don't know",
    "I can't answer",
    "The documents don't say",
    "There is not enough information",
)
MARKER = re.compile(r"\[([^\[\]]+)\]")


@pytest.fixture(scope="module")
def data():
    return load_dataset(DATA)


@pytest.fixture(scope="module")
def grades(data):
    return data.qrels.to_dict()


def lines(name: str) -> int:
    return sum(1 for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip())


def norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def words(text: str) -> int:
    return len(text.split())


def is_refusal(answer: str) -> bool:
    return answer.strip().startswith(REFUSAL_PREFIXES)


def expected_class(query, recorded, judged: dict[str, int]) -> str:
    """The diagnosis rules of the dataset card, applied in order."""
    relevant = {doc for doc, grade in judged.items() if grade >= 1}
    refused = is_refusal(recorded.answer)
    if query.should_refuse:
        return "correct_refusal" if refused else "answered_unanswerable"
    if not relevant & set(recorded.ranking):
        return "retrieval_miss"
    if refused:
        return "wrongly_refused"
    if any(not claim.supported_by for claim in recorded.claims):
        return "fabricated"
    if any(set(claim.citations) - set(claim.supported_by) for claim in recorded.claims):
        return "wrong_citation"
    if not any(set(claim.supported_by) & relevant for claim in recorded.claims):
        return "retrieved_not_used"
    return "ok"


def test_loads_without_warnings_and_keeps_every_record(data, grades):
    assert data.warnings == []
    assert len(data.docs) == lines("corpus.jsonl")
    # every query is evaluated: judged in the test split, or a refusal query
    assert len(data.queries) == lines("queries.jsonl")
    assert len(data.answers) == lines("answers.jsonl")
    assert sum(len(judged) for judged in grades.values()) == lines("qrels/test.tsv") - 1
    assert set(grades) <= set(data.queries)
    assert all(doc in data.docs for judged in grades.values() for doc in judged)


def test_category_counts(data):
    counts = Counter(q.category for q in data.queries.values())
    assert set(counts) == set(CATEGORIES)
    assert counts["literal"] >= 60
    assert counts["paraphrase"] >= 60
    assert counts["multi-hop"] >= 60
    assert counts["unanswerable"] >= 30
    assert sum(counts.values()) >= 240


def test_documents_and_their_length(data):
    assert len(data.docs) >= 150
    short = {
        doc.id: words(doc.text) for doc in data.docs.values() if not 80 <= words(doc.text) <= 2000
    }
    assert short == {}
    assert all(doc.title.strip() for doc in data.docs.values())


def test_smoke_subset_spans_all_categories(data):
    smoke = [q for q in data.queries.values() if "smoke" in q.tags]
    assert len(smoke) == 30
    assert {q.category for q in smoke} == set(CATEGORIES)


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


def test_recorded_answers_are_well_formed(data):
    assert len(data.answers) >= 80
    for recorded in data.answers.values():
        ranking = set(recorded.ranking)
        assert recorded.ranking and len(ranking) == len(recorded.ranking), recorded.query_id
        assert ranking <= set(data.docs)
        if is_refusal(recorded.answer):
            assert recorded.claims == (), recorded.query_id
            assert not MARKER.search(recorded.answer), recorded.query_id
            continue
        assert recorded.claims, recorded.query_id
        stripped = norm(re.sub(r"\s*\[[^\[\]]+\]", "", recorded.answer))
        for claim in recorded.claims:
            assert claim.supported_by is not None, recorded.query_id
            assert set(claim.citations) <= ranking, recorded.query_id
            assert set(claim.supported_by) <= ranking, recorded.query_id
            assert norm(claim.text) in stripped, (recorded.query_id, claim.text)
        # the markers of the answer are exactly the claims' citations, in order
        markers = MARKER.findall(recorded.answer)
        assert markers == [doc for claim in recorded.claims for doc in claim.citations]


def test_expected_failure_classes_follow_the_rules(data, grades):
    wrong = {}
    for recorded in data.answers.values():
        query = data.queries[recorded.query_id]
        computed = expected_class(query, recorded, grades.get(query.id, {}))
        if recorded.expected_failure_class != computed:
            wrong[recorded.query_id] = (recorded.expected_failure_class, computed)
    assert wrong == {}
    seen = Counter(r.expected_failure_class for r in data.answers.values())
    assert set(seen) == set(FAILURE_CLASSES)


def test_recorded_answers_cover_every_category(data):
    categories = {data.queries[qid].category for qid in data.answers}
    assert categories == set(CATEGORIES)
