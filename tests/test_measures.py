from __future__ import annotations

import pytest

from rag_bench.errors import UnknownNameError, UsageError
from rag_bench.evaluation.measures import (
    FAMILIES,
    Measure,
    known_forms,
    parse_measure,
    parse_measures,
)
from rag_bench.evaluation.retrieval import KERNELS


@pytest.mark.parametrize(
    "name", ["ndcg@10", "mrr", "mrr@10", "precision@1", "map", "map@100", "rprec", "ndcg_exp@5"]
)
def test_names_round_trip(name):
    assert str(parse_measure(name)) == name


def test_parse_gives_family_and_cutoff():
    assert parse_measure("recall@100") == Measure("recall", 100)
    assert parse_measure(" mrr ") == Measure("mrr")


def test_unknown_name_lists_the_known_ones_from_the_registry():
    with pytest.raises(UnknownNameError) as info:
        parse_measure("ndgc@10")
    message = str(info.value)
    for form in known_forms():
        assert form in message


@pytest.mark.parametrize("name", ["precision", "rprec@5", "ndcg@0", "ndcg@-1", "ndcg@x", "ndcg@"])
def test_bad_cutoffs(name):
    with pytest.raises(UsageError):
        parse_measure(name)


def test_list_keeps_order_and_drops_repeats():
    assert [str(m) for m in parse_measures("mrr, ndcg@10,mrr")] == ["mrr", "ndcg@10"]
    with pytest.raises(UsageError):
        parse_measures(" , ")


def test_every_family_has_a_kernel():
    assert set(FAMILIES) == set(KERNELS)
