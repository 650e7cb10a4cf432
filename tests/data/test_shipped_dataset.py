"""The shipped benchmark dataset ``data/kestrel-kb``: what is particular to it (sizes, the
English answers' citation markers). The rules both shipped datasets follow are in
test_shipped_datasets.py."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from rag_bench.data.dataset import load_dataset
from shipped import CATEGORIES, KESTREL, norm

MARKER = re.compile(r"\[([^\[\]]+)\]")


@pytest.fixture(scope="module")
def data():
    return load_dataset(KESTREL.folder)


def words(text: str) -> int:
    return len(text.split())


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


def test_recorded_answers_are_well_formed(data):
    assert len(data.answers) >= 80
    for recorded in data.answers.values():
        ranking = set(recorded.ranking)
        assert recorded.ranking and len(ranking) == len(recorded.ranking), recorded.query_id
        assert ranking <= set(data.docs)
        if KESTREL.is_refusal(recorded.answer):
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
