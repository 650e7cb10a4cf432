"""Perturbed queries: deterministic from the seed, labels kept, unchanged queries counted."""

from __future__ import annotations

import pytest

from rag_bench.data.dataset import load_dataset
from rag_bench.data.perturb import (
    PERTURBATIONS,
    parse_perturbations,
    perturb_queries,
    perturb_text,
)
from rag_bench.errors import RagBenchError
from rag_bench.model import Query

QUESTION = "What is the default idle timeout for Relay sessions in KestrelOS 6.2?"


def test_each_kind_changes_the_question_its_own_way():
    typo = perturb_text(QUESTION, "typo", 0, "q1")
    assert typo != QUESTION and len(typo.split()) == len(QUESTION.split())
    changed = [(a, b) for a, b in zip(QUESTION.split(), typo.split()) if a != b]
    assert 1 <= len(changed) <= 2 and all(a[0] == b[0] for a, b in changed)
    assert "KestrelOS" in typo and "6.2" in typo  # names and codes stay
    casual = perturb_text(QUESTION, "colloquial", 0, "q1")
    assert "what's" in casual and not casual.endswith("?")
    assert perturb_text(QUESTION, "synonym", 0, "q1") == (
        "What is the standard idle time limit for Relay sessions in KestrelOS 6.2?"
    )
    assert perturb_text(QUESTION, "reorder", 0, "q1") == (
        "For Relay sessions in KestrelOS 6.2, what is the default idle timeout?"
    )


@pytest.mark.parametrize("kind", list(PERTURBATIONS))
def test_the_same_seed_gives_the_same_text(kind):
    texts = {perturb_text(QUESTION, kind, 3, "q1") for _ in range(3)}
    assert len(texts) == 1


def test_seeds_and_queries_draw_their_own_typos():
    drawn = {perturb_text(QUESTION, "typo", seed, "q1") for seed in range(12)}
    assert len(drawn) > 6
    assert perturb_text(QUESTION, "typo", 0, "q1") != perturb_text(QUESTION, "typo", 0, "q2")


def test_copies_keep_the_labels_and_say_what_they_are():
    data = load_dataset("kestrel-kb")
    originals = list(data.queries.values())[:40]
    copies, counts = perturb_queries(originals, ["typo", "reorder"], 0)
    by_id = {q.id: q for q in originals}
    for copy in copies:
        original_id, kind = copy.id.split("~")
        original = by_id[original_id]
        assert copy.category == original.category and copy.answer == original.answer
        assert copy.should_refuse == original.should_refuse
        assert copy.tags == (*original.tags, "perturbed", f"perturbed:{kind}")
        assert copy.text != original.text
    assert counts["typo"] == {"made": 40, "unchanged": 0}
    assert counts["reorder"]["made"] + counts["reorder"]["unchanged"] == 40
    assert sum(c["made"] for c in counts.values()) == len(copies)


def test_a_query_the_rules_cannot_read_gets_no_copy():
    copies, counts = perturb_queries([Query("zh", "店铺几点开门？")], list(PERTURBATIONS), 0)
    assert copies == []  # the rules read English only
    assert all(c == {"made": 0, "unchanged": 1} for c in counts.values())
    kinds = ["typo", "synonym", "reorder"]  # nothing to misspell, replace or move
    copies, counts = perturb_queries([Query("short", "KS-220?")], kinds, 0)
    assert copies == [] and counts["typo"] == {"made": 0, "unchanged": 1}


def test_unknown_perturbations_are_named():
    assert parse_perturbations("typo, synonym,typo") == ["typo", "synonym"]
    with pytest.raises(RagBenchError, match="typo"):
        parse_perturbations("tpyo")
    with pytest.raises(RagBenchError):
        parse_perturbations(" , ")
