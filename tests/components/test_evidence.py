"""A claim's evidence for an LLM judge (rag_bench.components.evidence): hand-built contexts
where the excerpts to expect can be read off, the whole context when it fits, and the ``llm``
judge's request holding only those excerpts (against the fake server)."""

from __future__ import annotations

import json

import pytest

from conftest import require
from rag_bench.components.evidence import select_evidence, units
from rag_bench.components.registry import build
from rag_bench.errors import RagBenchError
from rag_bench.model import Chunk, Claim, Query

SPEC = (
    "The KS-220 is a 2-bay NAS for homes. It is quiet.\n\n"
    "Hardware\n\n"
    "Processor | 4-core ARMv8\n"
    "Memory | 2 GB DDR4\n"
    "Maximum raw capacity | 48 TB (2 × 24 TB drives)\n"
    "Fan | 1 × 92 mm\n"
    "Weight | 1.3 kg"
)
NOTES = "Relay sessions end after 15 minutes. The timeout can be set between 5 and 120 minutes."
OTHER = "Shipping takes two days. Returns are free within 30 days. Gift cards never expire."
CONTEXT = [
    Chunk("nas-1#0", "nas-1", 0, len(SPEC), SPEC, "KS-220 Specification Sheet"),
    Chunk("ops-4#0", "ops-4", 100, 100 + len(NOTES), NOTES, "Relay notes"),
    Chunk("shop-2#0", "shop-2", 0, len(OTHER), OTHER, "Shop"),
]


@pytest.fixture(scope="module")
def analyzer():
    return build("analyzer", {"name": "en"})


def test_units_are_the_sentences_of_each_line():
    spans = units("One. Two here.\nRow | 3\n\nLast")
    assert [("One. Two here.\nRow | 3\n\nLast")[s:e] for s, e in spans] == [
        "One.", "Two here.", "Row | 3", "Last",
    ]  # fmt: skip


def test_each_claim_gets_its_closest_units_with_their_neighbours(analyzer):
    claims = [
        Claim("The maximum raw capacity is 48 TB.", ()),
        Claim("Sessions end after 15 minutes.", ()),
    ]
    got = select_evidence(claims, CONTEXT, analyzer, per_claim=1, max_chars=200)
    assert [(c.doc_id, c.text) for c in got] == [
        (
            "nas-1",
            "Memory | 2 GB DDR4\nMaximum raw capacity | 48 TB (2 × 24 TB drives)\nFan | 1 × 92 mm",
        ),
        ("ops-4", NOTES),
    ]
    # offsets are the document's: the excerpt is where it says it is
    for excerpt, source in zip(got, CONTEXT):
        start, end = excerpt.start - source.start, excerpt.end - source.start
        assert source.text[start:end] == excerpt.text
        assert excerpt.title == source.title and excerpt.chunk_id.startswith(source.chunk_id)


def test_a_cited_document_comes_first_and_touching_excerpts_merge(analyzer):
    # the claim's words are closest in the spec, but it cites the shop page: its best unit
    # is shown first, then the spec's closest row
    claim = Claim("Returns of the 48 TB model are free.", ("shop-2",))
    got = select_evidence([claim], CONTEXT, analyzer, per_claim=2, max_chars=200)
    assert [c.doc_id for c in got] == ["nas-1", "shop-2"]  # context order
    assert got[1].text == OTHER  # the middle sentence and both neighbours: the whole page
    assert "48 TB" in got[0].text
    # with one unit per claim, the cited page's best unit wins over a closer unit elsewhere
    closer = Claim("Returns of the 48 TB drives are free.", ("shop-2",))
    (only,) = select_evidence([closer], CONTEXT, analyzer, per_claim=1, max_chars=200)
    assert only.doc_id == "shop-2" and only.text == OTHER
    uncited = Claim("Returns of the 48 TB drives are free.", ())
    (only,) = select_evidence([uncited], CONTEXT, analyzer, per_claim=1, max_chars=200)
    assert only.doc_id == "nas-1" and "48 TB" in only.text


def test_the_budget_caps_the_excerpts_but_never_empties_them(analyzer):
    claims = [
        Claim("The maximum raw capacity is 48 TB.", ()),
        Claim("Sessions end after 15 minutes.", ()),
    ]
    got = select_evidence(claims, CONTEXT, analyzer, per_claim=3, max_chars=100)
    assert sum(len(c.text) for c in got) <= 100 or len(got) == 1
    tiny = select_evidence(claims, CONTEXT, analyzer, per_claim=3, max_chars=1)
    assert len(tiny) == 1 and "48 TB" in tiny[0].text  # the first claim's best, over budget


def test_units_sharing_nothing_with_the_claim_are_never_chosen(analyzer):
    claims = [Claim("Sessions end after 15 minutes.", ())]
    got = select_evidence(claims, CONTEXT, analyzer, per_claim=3, max_chars=300)
    assert [c.text for c in got] == [NOTES]
    assert select_evidence([Claim("Zebras sing.", ())], CONTEXT, analyzer, 3, 300) == []


def test_a_context_that_fits_or_evidence_k_0_is_given_whole(analyzer):
    claims = [Claim("Sessions end after 15 minutes.", ())]
    assert select_evidence(claims, CONTEXT, analyzer, 3, 10_000) == CONTEXT
    assert select_evidence(claims, CONTEXT, analyzer, 0, 10) == CONTEXT
    assert select_evidence(claims, CONTEXT, None, 3, 10_000) == CONTEXT  # no analyzer needed
    with pytest.raises(RagBenchError, match="prepare"):
        select_evidence(claims, CONTEXT, None, 3, 10)


def test_the_llm_judge_sends_only_the_evidence(analyzer, fake):
    require("httpx", "pip install 'rag-bench[openai]'")
    from rag_bench.components.openai.judge import LLMJudge, verdicts_schema

    fake.chat = lambda body: json.dumps(
        {"verdicts": [{"claim_id": 1, "grade": 2, "supporting_passages": [1], "reason": "r"}]}
    )
    claims = [Claim("Sessions end after 15 minutes.", ("ops-4",))]
    judge = LLMJudge(evidence_chars=200, json_schema=True, retry_backoff=0.0, timeout=5.0)
    judge.prepare(None, [], analyzer)
    (verdict,) = judge.judge(Query("q", "When do sessions end?"), claims, CONTEXT)
    body = fake.chat_bodies()[0]
    user = body["messages"][1]["content"]
    assert verdict.supported and verdict.supported_by == ("ops-4",)
    assert user.count("<passage number=") == 1 and 'doc_id="ops-4"' in user
    assert "Maximum raw capacity" not in user and "Gift cards" not in user
    assert body["response_format"] == {"type": "json_object", "schema": verdicts_schema(1, 1)}
    whole = LLMJudge(evidence_k=0, retry_backoff=0.0, timeout=5.0)  # no prepare needed
    whole.judge(Query("q", "When do sessions end?"), claims, CONTEXT)
    body = fake.chat_bodies()[1]
    assert body["messages"][1]["content"].count("<passage number=") == 3
    assert body["response_format"] == {"type": "json_object"}


def test_the_verdicts_schema_pins_one_verdict_per_claim_in_order():
    require("httpx", "pip install 'rag-bench[openai]'")
    from rag_bench.components.openai.judge import verdicts_schema

    schema = verdicts_schema(2, 3)["properties"]["verdicts"]
    assert schema["minItems"] == schema["maxItems"] == 2 and schema["items"] is False
    first, second = schema["prefixItems"]
    assert first["properties"]["claim_id"] == {"const": 1}
    assert second["properties"]["claim_id"] == {"const": 2}
    assert first["properties"]["grade"] == {"enum": [0, 1, 2]}
    assert first["properties"]["supporting_passages"]["items"] == {"enum": [1, 2, 3]}
