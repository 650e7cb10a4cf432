"""The metric catalogue: canonical names, other tools' spellings, and what it says about each
metric (direction, scope, headline) checked against the code that computes the metrics."""

from __future__ import annotations

import json
import math

import pytest

from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.errors import UnknownNameError, UsageError
from rag_bench.evaluation.answer import (
    AnswerEvidence,
    answer_metrics,
    claim_metrics,
    context_metrics,
    response_metrics,
)
from rag_bench.evaluation.measures import (
    FAMILIES,
    RANKING,
    Better,
    Measure,
    Scope,
    answer_metric_names,
    canonical,
    catalogue_rows,
    headline_metrics,
    known_forms,
    lower_is_better,
    parse_measure,
    parse_measures,
)
from rag_bench.evaluation.retrieval import KERNELS
from rag_bench.model import Chunk, Claim, Query, Verdict


@pytest.mark.parametrize(
    "name", ["ndcg@10", "mrr", "mrr@10", "precision@1", "map", "map@100", "rprec", "ndcg_exp@5"]
)
def test_names_round_trip(name):
    assert str(parse_measure(name)) == name


def test_parse_gives_family_and_cutoff():
    assert parse_measure("recall@100") == Measure("recall", 100)
    assert parse_measure(" mrr ") == Measure("mrr")
    assert parse_measure("context_recall@5") == Measure("context_recall", 5)


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        # trec_eval, as its output prints them and as pytrec_eval requests them
        ("P_10", "precision@10"),
        ("P.10", "precision@10"),
        ("recall_100", "recall@100"),
        ("ndcg_cut_10", "ndcg@10"),
        ("ndcg_cut.10", "ndcg@10"),
        ("ndcg", "ndcg"),
        ("recip_rank", "mrr"),
        ("success_5", "hit@5"),
        ("map_cut_10", "map@10"),
        ("map", "map"),
        ("Rprec", "rprec"),
        # ir_measures
        ("P@10", "precision@10"),
        ("R@100", "recall@100"),
        ("nDCG@10", "ndcg@10"),
        ("nDCG", "ndcg"),
        ("RR", "mrr"),
        ("RR@10", "mrr@10"),
        ("AP", "map"),
        ("AP@100", "map@100"),
        ("Success@5", "hit@5"),
        # case and separators are forgiven
        ("NDCG@10", "ndcg@10"),
        ("ndcg_exp_5", "ndcg_exp@5"),
    ],
)
def test_other_tools_spellings_become_canonical(spelling, name):
    assert canonical(spelling) == name


@pytest.mark.parametrize("name", ["ndcg_cut", "map_cut", "P", "success", "R", "context_recall"])
def test_spellings_that_need_a_cutoff_are_refused_without_one(name):
    with pytest.raises(UsageError, match="needs a cutoff"):
        parse_measure(name)


def test_a_misspelt_name_gets_a_suggestion_not_the_whole_list():
    with pytest.raises(UnknownNameError) as info:
        parse_measure("ndgc@10")
    message = str(info.value)
    assert "did you mean 'ndcg@10'" in message
    assert "precision@k" not in message
    with pytest.raises(UnknownNameError, match="did you mean 'recall@100'"):
        parse_measure("recal_100")
    with pytest.raises(UnknownNameError, match="did you mean 'faithfulness'"):
        parse_measure("faithfulnes")


def test_a_name_like_nothing_lists_the_known_forms():
    with pytest.raises(UnknownNameError) as info:
        parse_measure("zzzz")
    for form in known_forms():
        assert form in str(info.value)


def test_groups_restrict_what_is_accepted():
    assert parse_measure("P_10", groups=(RANKING,)) == Measure("precision", 10)
    with pytest.raises(UsageError, match="claims metric 'faithfulness' cannot be computed"):
        parse_measure("faithfulness", groups=(RANKING,))


@pytest.mark.parametrize(
    "name", ["precision", "rprec@5", "ndcg@0", "ndcg@-1", "ndcg@x", "ndcg@", "faithfulness@3"]
)
def test_bad_cutoffs(name):
    with pytest.raises(UsageError):
        parse_measure(name)


def test_list_keeps_order_and_drops_repeats():
    assert [str(m) for m in parse_measures("mrr, ndcg@10,recip_rank")] == ["mrr", "ndcg@10"]
    with pytest.raises(UsageError):
        parse_measures(" , ")


def test_every_ranking_family_has_a_kernel():
    assert {n for n, f in FAMILIES.items() if f.group == RANKING} == set(KERNELS)


def test_directions():
    lower = {n for n, f in FAMILIES.items() if f.better is Better.LOWER}
    assert lower == {"over_refusal", "answered_unanswerable", "answer_length"}
    assert lower_is_better("over_refusal") and not lower_is_better("recall@10")
    assert not lower_is_better("recip_rank")


def test_headline_metrics_at_the_cutoffs_of_a_run():
    assert headline_metrics() == [
        "recall@10",
        "mrr@10",
        "ndcg@10",
        "faithfulness",
        "citation_precision",
        "key_fact_recall",
        "correct_refusal",
        "over_refusal",
    ]
    assert headline_metrics((1, 3, 5), brief=True) == ["recall@5", "ndcg@5", "faithfulness"]


def test_the_metrics_command_lists_the_catalogue(rag_bench):
    out = rag_bench("metrics", "--format", "json")
    assert out.exit_code == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows == catalogue_rows() and len(rows) == len(FAMILIES)
    assert all(row["definition"] and row["better"] in ("higher", "lower") for row in rows)
    over = next(row for row in rows if row["metric"] == "over_refusal")
    assert (over["better"], over["unanswerable"]) == ("lower", "no")


def test_answer_metrics_are_stored_in_the_order_they_always_were():
    # the order of the metric rows in a run's trace: changing it changes stored traces
    assert answer_metric_names((5, 10)) == [
        "faithfulness",
        "citation_precision",
        "citation_coverage",
        "answer_relevance",
        "answer_exact",
        "answer_f1",
        "answer_contains",
        "key_fact_recall",
        "correct_refusal",
        "over_refusal",
        "answered_unanswerable",
        "answer_length",  # added after the others: their order is unchanged
        "context_precision@5",
        "context_recall@5",
        "answer_span_recall@5",
        "context_precision@10",
        "context_recall@10",
        "answer_span_recall@10",
    ]


CHUNKS = [Chunk("d1#0", "d1", 0, 0, "Opened items can be returned within 30 days.")]


def evidence_of(query: Query) -> AnswerEvidence:
    """A cited, judged answer that was not a refusal."""
    return AnswerEvidence(
        query,
        "Opened items can be returned within 30 days [d1].",
        False,
        [Claim("Opened items can be returned within 30 days.", ("d1",))],
        [Verdict(2, True, ("d1",), "")],
        CHUNKS,
        {"d1": 2},
    )


def test_every_computed_answer_metric_is_in_the_catalogue_and_back():
    evidence, analyzer = evidence_of(Query("q", "How long?", answer="30 days")), EnglishAnalyzer()
    computed = {
        **claim_metrics(evidence),
        **response_metrics(evidence, analyzer),
        **context_metrics(evidence, [1, 5], analyzer),
    }
    assert sorted(computed) == sorted(answer_metric_names([1, 5]))


@pytest.mark.parametrize("should_refuse", [False, True])
def test_each_answer_metric_is_defined_exactly_on_the_queries_its_scope_says(should_refuse):
    query = Query(
        "q",
        "How long is the return window for opened items?",
        answer=None if should_refuse else "30 days",
        should_refuse=should_refuse,
    )
    values = answer_metrics(evidence_of(query), [1], EnglishAnalyzer())
    for name, value in values.items():
        scope = FAMILIES[parse_measure(name).family].scope
        defined = scope is Scope.ALL or (scope is Scope.UNANSWERABLE) == should_refuse
        assert (value is not None and not math.isnan(value)) == defined, name
