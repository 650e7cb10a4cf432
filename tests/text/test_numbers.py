"""English numbers in every written form (issue 26: "third" never matched "3rd"). The sentences
are from SQuAD v1.1's dev passages (Wikipedia, CC BY-SA 4.0) and the answers a model gave."""

from __future__ import annotations

import pytest

from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.components.judges import LexicalJudge
from rag_bench.model import Chunk, Claim, Query
from rag_bench.text.numbers import numbers


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("to earn their third Super Bowl title", "their 3rd Super Bowl title"),
        ("four teams that have made eight appearances", "4 teams made 8 appearances"),
        ("a total of 1,000 units", "1000 units"),
        ("the region has 2.5 million inhabitants", "2,500,000 inhabitants"),
        ("the stadium cost $1.2 billion", "1,200,000,000 dollars"),
        ("twenty-one days", "21 days"),
        ("two hundred and five seats", "205 seats"),
        ("25% of the vote", "twenty-five percent of the vote"),
        ("25 per cent", "25%"),
    ],
)
def test_two_ways_of_writing_a_number_read_alike(one, other):
    assert numbers(one) == numbers(other) != set()


@pytest.mark.parametrize(
    "text",
    ["one of the reasons", "First, open the tray.", "Second, mix the flour.", "wait a second"],
)
def test_words_that_are_only_sometimes_numbers_count_only_leniently(text):
    assert numbers(text) == set()
    assert numbers(text, lenient=True) != set()


def test_a_code_written_apart_is_found_leniently():
    # AttributionBench (ExpertQA): the claim says TiO2, the cited passage "titanium dioxide (TiO 2"
    assert "tio2" in numbers("titanium dioxide (TiO 2 ; titania)", lenient=True)
    assert "tio2" not in numbers("titanium dioxide (TiO 2 ; titania)")
    assert numbers("Titanium dioxide (TiO2) is the best photocatalyst") == {"tio2"}


def test_a_scaled_number_is_not_also_its_mantissa():
    assert numbers("2.5 million") == {"2500000"}  # not 2.5 as well
    assert numbers("$5 million", lenient=True) == {"5", "5000000"}
    assert numbers("hundreds of fans") == set()


@pytest.fixture
def judge():
    lexical = LexicalJudge()
    lexical.prepare(None, [], EnglishAnalyzer())
    return lexical


PASSAGE = Chunk(
    "p",
    "p",
    0,
    0,
    "The Denver Broncos defeated the Carolina Panthers 24–10 to earn their third Super Bowl "
    "title. The game was played at Levi's Stadium, which cost $1.2 billion.",
)


@pytest.mark.parametrize(
    ("claim", "supported"),
    [
        ("The Broncos earned their 3rd Super Bowl title.", True),
        ("The Broncos earned their fourth Super Bowl title.", False),
        ("Levi's Stadium cost 1.2 billion dollars.", True),
        ("Levi's Stadium cost $1.2 million.", False),
        ("One of the teams, the Broncos, defeated the Panthers 24–10.", True),
    ],
)
def test_the_judge_reads_numbers_in_words(judge, claim, supported):
    verdict = judge.judge(Query("q", "?"), [Claim(claim, ())], [PASSAGE])[0]
    assert verdict.supported is supported, verdict.reason
