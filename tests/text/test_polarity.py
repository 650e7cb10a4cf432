"""Negation and contradiction, tested against idioms and word-preserving contradictions (issue
26). Passages marked kestrel are from the shipped kestrel-kb; the dark-matter passage and the
"any"/"all" sentences are from ExpertQA and LFQA answers with human labels (AttributionBench,
LFQA-Verification), where the judge flagged claims people found supported."""

from __future__ import annotations

import pytest

from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.components.judges import LexicalJudge
from rag_bench.data.dataset import load_dataset
from rag_bench.model import Chunk, Claim, Query
from rag_bench.text.polarity import contrary_clash, generalises, negation_clash

WORDS = EnglishAnalyzer()


@pytest.fixture(scope="module")
def judge():
    lexical = LexicalJudge()
    lexical.prepare(None, [], WORDS)
    return lexical


def supported(judge, claim: str, passage: str):
    verdict = judge.judge(Query("q", "?"), [Claim(claim, ())], [Chunk("p", "p", 0, 0, passage)])
    return verdict[0].supported, verdict[0].reason


@pytest.mark.parametrize(
    ("claim", "passage"),
    [
        # idioms whose cue denies nothing
        ("The KS-440 supports SMB.", "The KS-440 supports not only SMB but also NFS."),
        ("The bridge was closed in 2019.", "There is no doubt that the bridge was closed in 2019."),
        ("The tank holds rainwater.", "The tank holds nothing but rainwater."),
        ("He pleaded no contest to the charge.", "He pleaded no contest to the charge in May."),
        # a list under one negation, across commas
        (
            "Dark matter is an unknown form of matter, which is not in the form of stars, "
            "planets, dark clouds, anti-matter or black holes.",
            "Scientists know that dark matter is not in the form of stars and planets. It’s also "
            "not in the form of dark clouds or matter.",
        ),
    ],
)
def test_idioms_and_lists_are_no_negation_clash(judge, claim, passage):
    assert not negation_clash(claim, passage, WORDS)
    ok, reason = supported(judge, claim, passage)
    assert ok, reason


KESTREL = load_dataset("kestrel-kb")


@pytest.mark.parametrize(
    ("claim", "doc"),
    [
        # "not A or B" denies both; the passage says "not to remove ... and not to shut down"
        (
            'Do not remove the remaining SSD or shut down until "Remove cache" has completed '
            "successfully.",
            "sup-019",
        ),
        # "rather than" denies what follows it, as "They do not fail." does
        ("Jobs above that limit wait in the queue rather than failing.", "vlt-017"),
        # a table: "No fee" in one cell says nothing against the 10% fee of the next row
        (
            "Because the KS-220 has been opened and is not defective, a 10% restocking fee is "
            "deducted from the refund.",
            "pol-001",
        ),
        ("Unopened units with the factory seal intact are refunded with no fee.", "pol-001"),
    ],
)
def test_shipped_claims_people_found_supported(judge, claim, doc):
    ok, reason = supported(judge, claim, KESTREL.docs[doc].text)
    assert ok, reason


@pytest.mark.parametrize(
    ("claim", "passage", "word"),
    [
        (
            "He pleaded guilty to a misdemeanor charge of reckless driving.",
            "He pleaded no contest to a misdemeanor charge of reckless driving.",
            "guilty",
        ),
        ("Exports of coffee rose 5% in 2019.", "Exports of coffee fell 5% in 2019.", "rose"),
        (
            "The museum is open on Mondays in winter.",
            "The museum is closed on Mondays in winter.",
            "open",
        ),
    ],
)
def test_word_preserving_contradictions_are_caught(judge, claim, passage, word):
    assert contrary_clash(claim, passage, WORDS) == word
    ok, reason = supported(judge, claim, passage)
    assert not ok and f"“{word}”" in reason


@pytest.mark.parametrize(
    ("claim", "passage"),
    [
        ("Fresh food can be returned.", "Fresh food cannot be returned."),
        ("The warranty covers water damage.", "The warranty does not cover water damage."),
        ("He pleaded not guilty.", "He pleaded guilty to the charge."),
        ("The bridge was not closed in 2019.", "The bridge was closed in 2019."),
        ("The KS-220 is no longer sold in Europe.", "The KS-220 is sold in Europe."),
    ],
)
def test_negation_flips_are_still_caught(judge, claim, passage):
    assert negation_clash(claim, passage, WORDS)
    ok, reason = supported(judge, claim, passage)
    assert not ok and "negation" in reason


def test_an_empty_window_contradicts_nothing():
    assert contrary_clash("Exports rose.", "  ", WORDS) is None
    assert not negation_clash("Exports did not rise.", "", WORDS)


def test_contraries_listed_together_fill_no_slot():
    # "North, Middle and South forks": a list, not a claim about one direction
    assert not contrary_clash(
        "The American River has three sources: the North Fork, the Middle Fork and the South Fork.",
        "The American River is fed by its North, Middle, and South forks.",
        WORDS,
    )
    # the window states the claim's word too: no contradiction
    assert not contrary_clash(
        "Vietnam is bordered by China to the north.",
        "It is bordered by China to the north, Laos to the northwest and the sea to the south.",
        WORDS,
    )


@pytest.mark.parametrize(
    ("text", "general"),
    [
        ("Any order can be returned within 30 days.", True),
        ("All items ship free.", True),
        ("He always pays late.", True),
        ("For those who do not have any issues, alternate between the two.", False),
        ("It means extremely stern or strict, or without any luxuries.", False),
        ("With all of these methods, people wanted to see relatives in their shots.", False),
        ("Pain relievers differ, as they all have different properties.", False),
        ("Catholicism has not always been the national religion of Spain.", False),
    ],
)
def test_a_generalisation_is_not_an_any_under_negation_or_an_idiom(text, general):
    assert generalises(text) is general
