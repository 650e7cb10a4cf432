"""The shipped Chinese benchmark dataset ``data/lumen-mall-zh``: its shape, its judgements, the
labels of its recorded answers, checked against the rules of its dataset card, and a replay of the
recorded answers that reproduces the seed example's numbers and every expected diagnosis."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import pytest

from rag_bench.dataset import load_dataset
from rag_bench.runner import run_variant

DATA = Path(__file__).resolve().parent.parent / "data" / "lumen-mall-zh"

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
REFUSAL_PREFIXES = ("无法回答", "资料中没有", "我不知道")
MARKER = re.compile(r"【([^【】]+)】")
SENTENCE = re.compile(r"(.*?)((?:【[^【】]+】)*)。")


@pytest.fixture(scope="module")
def data():
    return load_dataset(DATA)


@pytest.fixture(scope="module")
def grades(data):
    return data.qrels.to_dict()


@pytest.fixture(scope="module")
def seed(data):
    [query] = [q for q in data.queries.values() if "seed" in q.tags]
    return query


def lines(name: str) -> int:
    return sum(1 for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip())


def norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def characters(text: str) -> int:
    """Length of a Chinese text: its non-whitespace characters."""
    return len(re.sub(r"\s", "", text))


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


def test_ids_follow_the_naming_scheme(data):
    assert all(re.fullmatch(r"zh-\d{3}", doc) for doc in data.docs)
    assert all(re.fullmatch(r"q-zh-\d{3}", query) for query in data.queries)


def test_category_counts(data):
    counts = Counter(q.category for q in data.queries.values())
    assert set(counts) == set(CATEGORIES)
    assert counts["literal"] >= 30
    assert counts["paraphrase"] >= 30
    assert counts["multi-hop"] >= 20
    assert counts["unanswerable"] >= 15
    assert sum(counts.values()) >= 100


def test_documents_and_their_length(data):
    assert len(data.docs) >= 60
    wrong = {
        doc.id: characters(doc.text)
        for doc in data.docs.values()
        if not 80 <= characters(doc.text) <= 2000
    }
    assert wrong == {}
    assert all(doc.title.strip() for doc in data.docs.values())
    assert all({"type", "date"} <= set(doc.metadata) for doc in data.docs.values())
    # several long documents with sections
    assert sum(characters(doc.text) >= 800 for doc in data.docs.values()) >= 4


def test_smoke_subset_spans_all_categories(data):
    smoke = [q for q in data.queries.values() if "smoke" in q.tags]
    assert len(smoke) == 12
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


def test_every_query_has_several_judged_documents(data, grades):
    assert all(len(grades.get(q, {})) >= 2 for q in data.queries)


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
    assert len(data.answers) >= 30
    for recorded in data.answers.values():
        ranking = set(recorded.ranking)
        assert recorded.ranking and len(ranking) == len(recorded.ranking), recorded.query_id
        assert ranking <= set(data.docs)
        if is_refusal(recorded.answer):
            assert recorded.claims == (), recorded.query_id
            assert not MARKER.search(recorded.answer), recorded.query_id
            continue
        # the answer is its claims' sentences, each followed by its markers and a full stop
        sentences = [s + "。" for s in recorded.answer.split("。") if s]
        assert recorded.answer.endswith("。"), recorded.query_id
        assert len(sentences) == len(recorded.claims), recorded.query_id
        for sentence, claim in zip(sentences, recorded.claims):
            text, markers = SENTENCE.fullmatch(sentence).groups()
            assert claim.text == text + "。", (recorded.query_id, claim.text)
            assert list(claim.citations) == MARKER.findall(markers), recorded.query_id
            assert claim.supported_by is not None, recorded.query_id
            assert set(claim.citations) <= ranking, recorded.query_id
            assert set(claim.supported_by) <= ranking, recorded.query_id
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
    assert all(seen[c] >= 2 for c in FAILURE_CLASSES if c not in ("ok", "correct_refusal"))


def test_recorded_answers_cover_every_category(data):
    categories = {data.queries[qid].category for qid in data.answers}
    assert categories == set(CATEGORIES)


def test_one_recorded_answer_cites_nothing(data):
    uncited = [
        r for r in data.answers.values() if not is_refusal(r.answer) and not MARKER.search(r.answer)
    ]
    assert uncited
    assert all(c.supported_by and not c.citations for r in uncited for c in r.claims)


def test_seed_example_is_labelled_as_in_the_notes(data, grades, seed):
    recorded = data.answers[seed.id]
    a, b = (c.supported_by[0] for c in recorded.claims[:2])
    c = recorded.ranking[0]
    assert list(recorded.ranking) == [c, a, b]
    judged = grades[seed.id]
    assert judged[a] >= 1 and judged[b] >= 1 and judged[c] == 0
    assert {d for d, g in judged.items() if g >= 1} == {a, b}
    assert [list(claim.supported_by) for claim in recorded.claims] == [[a], [b], []]
    assert recorded.answer == (
        f"签收后7天内可以退货【{a}】。生鲜商品除外【{b}】。任何订单都能退货【{a}】。"
    )
    assert recorded.expected_failure_class == "fabricated"


@pytest.fixture(scope="module")
def replay(data, tmp_path_factory):
    """The ``recorded`` variant over the whole dataset."""
    return run_variant("recorded", data, ks=[2, 3], runs_dir=tmp_path_factory.mktemp("runs"))


def metric(run, query_id: str, name: str) -> float:
    rows = run.metrics[(run.metrics["query_id"] == query_id) & (run.metrics["metric"] == name)]
    assert len(rows) == 1, (query_id, name)
    return float(rows["value"].iloc[0])


def test_replay_reproduces_the_seed_numbers(replay, seed):
    assert metric(replay, seed.id, "recall@2") == 0.5
    assert round(metric(replay, seed.id, "ndcg@2"), 3) == 0.387
    assert metric(replay, seed.id, "faithfulness") == pytest.approx(2 / 3)
    assert metric(replay, seed.id, "citation_precision") == pytest.approx(2 / 3)


def test_replay_leaves_citation_precision_undefined_without_citations(data, replay):
    uncited = [
        r.query_id
        for r in data.answers.values()
        if not is_refusal(r.answer) and not MARKER.search(r.answer)
    ]
    for query_id in uncited:
        assert math.isnan(metric(replay, query_id, "citation_precision")), query_id
        assert metric(replay, query_id, "faithfulness") == 1.0, query_id


def test_replay_diagnoses_every_recorded_answer_as_labelled(data, replay):
    diagnosed = dict(zip(replay.queries["query_id"], replay.queries["failure_class"]))
    assert set(diagnosed) == set(data.answers)
    wrong = {
        query_id: (recorded.expected_failure_class, diagnosed[query_id])
        for query_id, recorded in data.answers.items()
        if diagnosed[query_id] != recorded.expected_failure_class
    }
    assert wrong == {}
