"""The extractive generator's refusal rule: weak coverage, or a specific of the question that no
context chunk names."""

from __future__ import annotations

import pytest

from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.components.generate import ExtractiveGenerator
from rag_bench.model import Chunk, Query

KB = [
    Chunk(
        "d1#0", "d1", 0, 0, "The KS-660 holds up to 6 drives and 144 TB of raw capacity.", "KS-660"
    ),
    Chunk("d2#0", "d2", 0, 0, "Support in Dublin opens on weekdays from 08:00 to 18:00.", "Dublin"),
]


@pytest.fixture
def generator():
    gen = ExtractiveGenerator(min_coverage=0.3)
    gen.prepare(None, KB, EnglishAnalyzer())
    return gen


@pytest.mark.parametrize(
    ("question", "refused"),
    [
        ("What is the maximum raw capacity of the KS-660?", False),
        ("what is the max raw capacity of the KS 660", False),  # the same code, written loosely
        ("What is the maximum raw capacity of the KS-660R?", True),  # another product
        ("When does support in Dublin open on weekdays?", False),
        ("When does support in Tokyo open on weekdays?", True),  # a place no passage names
        ("Did the KS-660 hold 6 drives in 2023?", True),  # a year no passage names
        ("Can I put 6 drives into the KS-660?", False),  # a bare count is no specific
    ],
)
def test_a_specific_of_the_question_must_be_in_the_context(generator, question, refused):
    assert generator.generate(Query("q", question), KB).refused is refused
