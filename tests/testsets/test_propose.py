"""The offline rules that propose queries: hand-worked sentences, the corpus checks of
multi-hop bridges and unanswerable questions, and the seed."""

from __future__ import annotations

import pytest

from conftest import SHIPPED
from rag_bench.data.dataset import load_dataset
from rag_bench.errors import UnknownNameError
from rag_bench.testsets.propose import (
    Proposer,
    check_categories,
    cloze,
    row_candidate,
    sentence_candidates,
)


def test_a_fact_becomes_its_question_word_in_place():
    sentence = "The Falcon Router was released on 2021-03-04 in every region."
    (found,) = [c for c in sentence_candidates("d1", sentence) if c.fact == "2021-03-04"]
    assert found.question == "The Falcon Router was released on what date in every region?"
    assert found.things == ("Falcon Router",)
    counted = sentence_candidates("d1", "The Falcon Router has 12 ports on its back panel.")
    assert [c.question for c in counted] == [
        "The Falcon Router has how many ports on its back panel?"
    ]
    assert cloze("A costs $5.", 8, 10, "how much") == "A costs how much?"
    noted = "The court ruled under the Sixth Amendment of the constitution.[2]"
    (named,) = [c for c in sentence_candidates("d1", noted) if c.fact == "Sixth Amendment"]
    assert named.question == "The court ruled under the what of the constitution?"


def test_sentences_that_cannot_stand_alone_make_no_question():
    assert sentence_candidates("d1", "It has 12 ports on its back panel today.") == []  # "it"
    assert sentence_candidates("d1", "Ports: 12.") == []  # too short
    # a reference or a note is no sentence to ask about
    assert sentence_candidates("d1", "[1] Smith, Jo, 'Routers', Router Weekly, 11 May 2012.") == []
    listed = "1) World Bank, 'Routers of 2004', vol. 3, pp. 5-9, 2004."
    assert sentence_candidates("d1", listed) == []
    # a fact at the start leaves no question around it
    assert sentence_candidates("d1", "12 ports sit on the back panel of the router.") == []


def test_a_table_row_asks_for_its_value_in_the_titled_document():
    row = row_candidate("nas-001", "KS-220 Specification Sheet", "Hardware platform code | KP-A2")
    assert row is not None and row.fact == "KP-A2"
    assert row.question == "What is the hardware platform code in the KS-220 Specification Sheet?"
    assert row_candidate("d", "", "Memory | 2 GB") is None  # no title: no subject to ask about
    assert row_candidate("d", "T", "a | b | c") is None


CORPUS = {
    "a": ("Routers", "The Falcon Router supports 12 ports for small offices in town."),
    "b": ("Switches", "The Heron Switch ships with a green case for every customer."),
}


def test_unanswerable_swaps_the_thing_for_one_the_corpus_says_nothing_about(write_dataset):
    data = write_dataset(CORPUS)
    (proposal,) = Proposer(data, seed=0).propose(1, ["unanswerable"])
    assert proposal.text == "The Heron Switch supports how many ports for small offices in town?"
    assert proposal.gold_answer is None and proposal.doc_ids == ()
    assert proposal.details["swapped"] == ["Falcon Router", "Heron Switch"]


def test_unanswerable_is_not_proposed_when_some_document_says_it(write_dataset):
    said = {**CORPUS, "c": ("More", "The Heron Switch supports 48 ports for small offices too.")}
    data = write_dataset(said)
    proposals = Proposer(data, seed=0).propose(3, ["unanswerable"])
    assert all("Heron Switch supports" not in p.text for p in proposals)


def test_multi_hop_blanks_the_bridge_and_needs_both_documents(write_dataset):
    docs = {
        "a": ("Routers", "The Falcon Router supports 12 ports for small offices in town."),
        "b": ("Awards", "In 2020 the Falcon Router won the design prize of the fair."),
    }
    data = write_dataset(docs)
    proposals = Proposer(data, seed=0).propose(2, ["multi-hop"])
    assert proposals, "a bridge named in two documents makes a multi-hop question"
    for p in proposals:
        assert "Falcon Router" not in p.text and "___" in p.text
        assert sorted(p.doc_ids) == ["a", "b"] and p.details["bridge"] == "Falcon Router"
        assert p.gold_answer in p.source_span


def test_the_same_seed_gives_the_same_queries_and_another_seed_others():
    data = load_dataset(SHIPPED)
    first = Proposer(data, seed=4).propose(12)
    assert first == Proposer(data, seed=4).propose(12)
    assert first != Proposer(data, seed=5).propose(12)
    assert [p.category for p in first].count("literal") == 3
    assert len({d for p in first for d in p.doc_ids}) >= 9  # one query per document


def test_paraphrases_keep_little_of_the_source_wording():
    data = load_dataset(SHIPPED)
    proposer = Proposer(data, seed=0)
    for p in proposer.propose(6, ["paraphrase"]):
        assert p.details["overlap"] <= 0.5
        assert p.details["overlap"] == pytest.approx(
            proposer.overlap(p.text, p.source_span), abs=1e-4
        )
        assert p.text != p.details["literal"]


def test_an_unknown_category_is_named():
    with pytest.raises(UnknownNameError, match="multihop"):
        check_categories(["literal", "multihop"])


def test_a_note_mark_before_a_capital_ends_a_sentence(write_dataset):
    text = (
        "Winters in the town were cold in the grip of the Little Ice Age[2] That way the "
        "image of 12 snowy winters in a row was created."
    )
    data = write_dataset({"a": ("Winters", text)})
    found = Proposer(data).candidates("a")
    assert found and all("[2]" not in c.sentence or "That" not in c.sentence for c in found)
    assert "Little Ice Age That" not in [c.fact for c in found]


def test_a_capitalised_common_word_is_no_name():
    from rag_bench.testsets.propose import proper

    text = "Many Muslim countries joined. Many people agreed, and many more did not."
    assert not proper("Many Muslim", text)
    assert proper("United Nations", "The United Nations met.")
    assert proper("KS-220", "the ks-220")  # a code is a code
