from __future__ import annotations

import pytest

from conftest import ROOT
from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.components.judges import AnnotatedJudge, LexicalJudge, polarity_clash
from rag_bench.data.dataset import load_dataset
from rag_bench.errors import RagBenchError
from rag_bench.model import Chunk, Claim, Query
from rag_bench.text.numbers import numbers

PASSAGE = Chunk(
    "d1",
    "d1",
    0,
    0,
    "Opened items can be returned within 30 days of delivery. Fresh food cannot be returned.",
)
OTHER = Chunk("d2", "d2", 0, 0, "Refunds reach the original payment account within 5 working days.")
QUERY = Query("q", "returns?")


@pytest.fixture
def lexical():
    judge = LexicalJudge()
    judge.prepare(None, [], EnglishAnalyzer())
    return judge


def verdict(judge, text, context=(PASSAGE, OTHER)):
    return judge.judge(QUERY, [Claim(text, ())], list(context))[0]


def test_verbatim_claim_is_fully_supported_by_its_document(lexical):
    v = verdict(lexical, "Opened items can be returned within 30 days of delivery.")
    assert (v.grade, v.supported, v.supported_by) == (2, True, ("d1",))


def test_changed_number_is_not_support(lexical):
    v = verdict(lexical, "Opened items can be returned within 60 days of delivery.")
    assert (v.grade, v.supported, v.supported_by) == (0, False, ())
    assert "number" in v.reason


def test_flipped_negation_is_not_support(lexical):
    v = verdict(lexical, "Fresh food can be returned.")
    assert (v.supported, v.supported_by) == (False, ())
    assert "negation" in v.reason
    assert verdict(lexical, "Fresh food cannot be returned.").supported


def test_unrelated_negation_elsewhere_does_not_block_support(lexical):
    passage = Chunk("d3", "d3", 0, 0, "The label is valid for 30 days and must not be reused.")
    assert verdict(lexical, "The label is valid for 30 days.", [passage]).supported


def test_partial_overlap_is_grade_one(lexical):
    v = verdict(lexical, "Opened items can be returned quickly by courier pickup.")
    assert v.grade == 1 and v.supported  # supported from grade 1 by default
    strict = LexicalJudge(supported_at=2)
    strict.prepare(None, [], EnglishAnalyzer())
    assert not verdict(strict, "Opened items can be returned quickly by courier pickup.").supported


def test_claim_without_content_words_is_not_judged(lexical):
    v = verdict(lexical, "It was.")
    assert v.supported is None and v.grade is None


def test_fabricated_claim(lexical):
    """A claim no passage backs gets a verdict, and the verdict is "unsupported": grade 0, no
    supporting document (``not v.supported`` alone would pass on no verdict at all, None)."""
    v = verdict(lexical, "Every order ships free of charge worldwide.")
    assert (v.grade, v.supported, v.supported_by) == (0, False, ())


def test_helpers():
    assert numbers("1,200 units at 9.99 on 2025-03-18") == {"1200", "9.99", "2025", "03", "18"}
    analyzer = EnglishAnalyzer()
    assert polarity_clash("Fresh food can be returned.", "Fresh food cannot be returned.", analyzer)
    assert not polarity_clash("Valid for 30 days.", "Valid for 30 days and not reusable.", analyzer)


def test_annotated_judge_uses_the_labels():
    data = load_dataset(ROOT / "data" / "seed-example")
    judge = AnnotatedJudge()
    judge.prepare(data, [], None)
    recorded = data.answers["q1"]
    claims = [Claim(c.text, c.citations) for c in recorded.claims]
    context = [Chunk(d, d, 0, 0, "") for d in recorded.ranking]
    verdicts = judge.judge(data.queries["q1"], claims, context)
    assert [v.supported for v in verdicts] == [True, True, False]
    assert [v.supported_by for v in verdicts] == [("d1",), ("d2",), ()]


def test_annotated_judge_without_labels_says_what_to_do():
    data = load_dataset(ROOT / "data" / "seed-example")
    judge = AnnotatedJudge()
    judge.prepare(data, [], None)
    with pytest.raises(RagBenchError, match="--judge lexical"):
        judge.judge(Query("q9", "x"), [Claim("A claim.", ())], [])


def test_a_verbatim_quote_is_supported_even_when_guards_would_misfire(lexical):
    # a sentence cut mid-table by a chunk boundary: its leading "not" has no clause to scope over
    passage = Chunk(
        "d7",
        "d7",
        0,
        0,
        "Memory error; the system does not start 1 short beep every 5 seconds | "
        "Fan failure (E-5101).",
    )
    v = verdict(
        lexical, "not start 1 short beep every 5 seconds | Fan failure (E-5101).", [passage]
    )
    assert (v.grade, v.supported, v.supported_by) == (2, True, ("d7",))
    assert "word for word" in v.reason


WARRANTY = Chunk("w#0", "w", 0, 0, "The warranty does not cover water damage. Repairs take 5 days.")


@pytest.mark.parametrize(
    ("claim", "supported"),
    [
        ("Water damage is not covered by the warranty.", True),  # passive of the passage
        ("The warranty does not cover water damage.", True),
        ("Water damage is covered by the warranty.", False),
        ("The warranty covers water damage.", False),
    ],
)
def test_negation_holds_across_passive_and_active(lexical, claim, supported):
    v = verdict(lexical, claim, [WARRANTY])
    assert v.supported is supported, v.reason
    if not supported:
        assert "negation" in v.reason


def test_the_reason_names_the_deciding_chunk_and_its_evidence(lexical):
    v = verdict(lexical, "Refunds reach the original payment account quickly.")
    # d2 decides (d1 comes first in the context but shares nothing)
    assert v.supported and v.reason.startswith("d2: ")
    assert "“Refunds reach the original payment account within 5 working days.”" in v.reason
    unsupported = verdict(lexical, "Opened items can be returned within 60 days of delivery.")
    assert unsupported.reason.startswith("d1: the passage lacks the number 60")
    assert "“Opened items can be returned within 30 days of delivery.”" in unsupported.reason


def test_a_passage_read_once_is_read_again_by_another_analyzer():
    """The judge keeps what it read of each passage across claims and answers; given another
    analyzer it reads again: with stemming "returning" meets "returned" (and "deliveries"
    "delivery"), without it not."""
    judge = LexicalJudge()
    judge.prepare(None, [], EnglishAnalyzer(stem=True))
    claim = "Opening item returning within 30 day deliveries."
    stemmed = [verdict(judge, claim, [PASSAGE]) for _ in range(2)]  # the second from memory
    assert stemmed[0] == stemmed[1] and stemmed[0].grade == 2
    judge.prepare(None, [], EnglishAnalyzer(stem=False))
    fresh = LexicalJudge()
    fresh.prepare(None, [], EnglishAnalyzer(stem=False))
    assert verdict(judge, claim, [PASSAGE]) == verdict(fresh, claim, [PASSAGE])
    assert verdict(judge, claim, [PASSAGE]).grade == 0
