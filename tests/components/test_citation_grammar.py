"""The grammar ``generator.cite=grammar`` decodes within (no model: its text), and the
generator parameter that asks for it."""

from __future__ import annotations

import re

import pytest

from rag_bench.components.citation_grammar import MAX_SENTENCES, MAX_WORDS, gbnf, literal, markers
from rag_bench.components.local_llm import LlamaCppGenerator
from rag_bench.components.prompting import normalise_citations
from rag_bench.errors import ParameterError
from rag_bench.model import Chunk

CONTEXT = [
    Chunk("a#0", "policy-3", 0, 5, "Items can be returned.", ""),
    Chunk("a#1", "policy-3", 5, 9, "Within 7 days.", ""),
    Chunk("b#0", 'say "hi"\\', 0, 4, "Quoted id.", ""),
    Chunk("c#0", "odd]id", 0, 4, "A bracket in the id.", ""),
]


def rules(grammar: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in grammar.splitlines())


def test_markers_are_the_passage_numbers_and_the_writable_doc_ids_once_each():
    assert markers(CONTEXT) == ["[1]", "[2]", "[3]", "[policy-3]", '[say "hi"\\]']
    # each marker maps back to a doc id of the prompt's passages
    for marker in markers(CONTEXT):
        cited = re.findall(r"\[([^\[\]]+)\]", normalise_citations(f"X {marker}.", CONTEXT))
        assert len(cited) == 1 and cited[0] in {c.doc_id for c in CONTEXT}


def test_literals_escape_quotes_backslashes_and_control_characters():
    assert literal('say "hi"\\') == '"say \\"hi\\"\\\\"'
    assert literal("a\nb\x7f") == '"a\\x0Ab\\x7F"'


def test_the_grammar_is_a_cited_answer_or_the_refusal():
    grammar = rules(gbnf(CONTEXT[:2]))
    assert grammar["root"] == "refusal | answer"
    assert grammar["answer"] == f'sentence (" " sentence){{0,{MAX_SENTENCES - 1}}}'
    # every sentence ends with a marker and its full stop; no word can hold a full stop
    assert grammar["sentence"].endswith('" " marker "."')
    assert f"{{0,{MAX_WORDS - 1}}}" in grammar["sentence"]
    assert grammar["refusal"].startswith('"I don\'t know:"')
    assert "marker" not in grammar["refusal"]
    assert grammar["wchar"] == "[^ .\\[\\]\\n\\r\\t]"
    assert grammar["marker"] == '"[1]" | "[2]" | "[policy-3]"'
    for nothing_to_cite in ([], CONTEXT[3:]):  # no passage, or none a marker can name
        only = rules(gbnf(nothing_to_cite))
        assert only["root"] == "refusal" and "marker" not in only and "answer" not in only


def test_a_citation_mode_other_than_grammar_is_refused():
    with pytest.raises(ParameterError, match="generator.cite = 'json' is out of range"):
        LlamaCppGenerator(cite="json")
