"""Questions worded by a chat model: which replies are used (pure), and the packaged SmolLM2
writing a handful through the llama_cpp generator (marked llm)."""

from __future__ import annotations

import json

import pytest

from conftest import SHIPPED
from rag_bench.errors import UsageError
from rag_bench.testsets.generate import generate
from rag_bench.testsets.llm import question_writer, usable
from rag_bench.testsets.propose import Proposal

LITERAL = Proposal("X?", "literal", ("d",), "48 TB", "The KS-220 holds 48 TB.", "offline:cloze")
SWAPPED = Proposal(
    "The KS-9 holds how much?", "unanswerable", (), None, "s", "offline:swapped-entity",
    {"swapped": ["KS-220", "KS-9"]},
)  # fmt: skip


def test_only_a_question_that_keeps_the_rules_is_used():
    assert usable("Question: How much does the KS-220 hold?\nMore.", LITERAL) == (
        "How much does the KS-220 hold?"
    )
    assert usable("Rewrite this as one natural question: What does it hold?", LITERAL) == (
        "What does it hold?"
    )
    assert usable("The KS-220 holds a lot.", LITERAL) is None  # no question
    assert usable("Does the KS-220 hold 48 TB?", LITERAL) is None  # gives the answer away
    assert usable("", LITERAL) is None
    assert usable("How much does the KS-220 hold?", SWAPPED) is None  # the swapped thing lost
    assert usable("How much does the KS-9 hold?", SWAPPED) == "How much does the KS-9 hold?"


def test_a_generator_without_a_chat_cannot_write_questions():
    with pytest.raises(UsageError, match="cannot write questions"):
        question_writer("extractive")


@pytest.mark.llm
def test_the_packaged_model_words_a_few_questions_the_same_way_twice(real_smollm2, tmp_path):
    made = [
        generate(
            SHIPPED,
            tmp_path / f"set{i}",
            n=3,
            seed=0,
            categories=["literal", "paraphrase", "unanswerable"],
            llm="llama_cpp",
            llm_overrides=["generator.max_tokens=40"],
            cache_dir=tmp_path / "cache",
        )
        for i in range(2)
    ]
    first, second = made
    assert (first.folder / "queries.jsonl").read_bytes() == (
        second.folder / "queries.jsonl"
    ).read_bytes()
    methods = [json.loads(line)["generated"]["method"] for line in
               (first.folder / "queries.jsonl").read_text().splitlines()]  # fmt: skip
    worded = methods.count("llm:llama_cpp")
    assert worded >= 1 and worded + first.llm_unusable == 3
    assert first.methods.get("llm:llama_cpp", 0) == worded
    for _, proposal in first.queries:
        if proposal.method == "llm:llama_cpp":
            assert proposal.text.endswith("?")
            assert not proposal.gold_answer or proposal.gold_answer not in proposal.text
