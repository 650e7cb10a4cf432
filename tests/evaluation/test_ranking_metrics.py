"""Hand-computed cases for the ranking metrics, starting with the seed notes' worked example."""

from __future__ import annotations

import math

import pytest

from rag_bench import Qrels, Run, evaluate_run


def means(judgements, rankings, metrics, **options):
    qrels = Qrels.from_dict(judgements)
    run = rankings if isinstance(rankings, Run) else Run.from_rankings(rankings)
    return evaluate_run(qrels, run, metrics, **options).means()


def test_seed_worked_example():
    # Ranking d3, d1, d2 with d1 and d2 relevant (seed 000_296410059b09d35a).
    got = means(
        {"q": {"d1": 1, "d2": 1}},
        {"q": ["d3", "d1", "d2"]},
        "recall@2,mrr@2,ndcg@2,recall@3,mrr@3,ndcg@3",
    )
    assert got["recall@2"] == 0.5
    assert got["mrr@2"] == 0.5
    assert got["ndcg@2"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert round(got["ndcg@2"], 3) == 0.387
    assert got["recall@3"] == 1.0
    assert got["mrr@3"] == 0.5
    assert round(got["ndcg@3"], 3) == 0.693


def test_seed_improved_ranking_scores_one():
    got = means(
        {"q": {"d1": 1, "d2": 1}}, {"q": ["d1", "d2", "d3"]}, "recall@2,mrr@2,ndcg@2,ndcg@3"
    )
    assert got == {"recall@2": 1.0, "mrr@2": 1.0, "ndcg@2": 1.0, "ndcg@3": 1.0}


def test_duplicates_count_once_and_no_hit_scores_zero():
    got = means({"q": {"d1": 1}}, {"q": ["d3", "d3"]}, "recall@2,mrr@2,ndcg@2")
    assert got == {"recall@2": 0.0, "mrr@2": 0.0, "ndcg@2": 0.0}
    got = means({"q": {"d1": 1, "d2": 1}}, {"q": ["d1", "d1", "d2"]}, "precision@2,recall@2")
    assert got == {"precision@2": 1.0, "recall@2": 1.0}


def test_precision_divides_by_k_even_when_fewer_retrieved():
    got = means({"q": {"d1": 1}}, {"q": ["d1"]}, "precision@10,precision@1")
    assert got == {"precision@10": 0.1, "precision@1": 1.0}


def test_graded_gains_linear_and_exponential():
    judgements = {"q": {"a": 3, "b": 1}}
    got = means(judgements, {"q": ["b", "a"]}, "ndcg@2,ndcg_exp@2")
    linear = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    exponential = (1 + 7 / math.log2(3)) / (7 + 1 / math.log2(3))
    assert got["ndcg@2"] == pytest.approx(linear, abs=1e-12)
    assert got["ndcg_exp@2"] == pytest.approx(exponential, abs=1e-12)


def test_average_precision_and_rprec():
    # Relevant at ranks 1 and 3 of 3 relevant: AP = (1/1 + 2/3) / 3; R-prec = 2/3.
    got = means({"q": {"a": 1, "b": 1, "c": 1}}, {"q": ["a", "x", "b", "y"]}, "map,map@1,rprec")
    assert got["map"] == pytest.approx((1 + 2 / 3) / 3)
    assert got["map@1"] == pytest.approx(1 / 3)
    assert got["rprec"] == pytest.approx(2 / 3)


def test_rel_level_moves_the_threshold():
    judgements = {"q": {"a": 1, "b": 2}}
    assert means(judgements, {"q": ["a", "b"]}, "mrr", rel_level=2)["mrr"] == 0.5
    assert means(judgements, {"q": ["a", "b"]}, "mrr", rel_level=1)["mrr"] == 1.0


def test_judged_query_without_relevant_document_scores_zero():
    got = means({"q": {"a": 0}}, {"q": ["a"]}, "recall@10,ndcg@10,map,rprec")
    assert got == {"recall@10": 0.0, "ndcg@10": 0.0, "map": 0.0, "rprec": 0.0}


def test_external_run_ties_break_by_doc_id_descending():
    # Same score: trec_eval puts "b" before "a"; the rank given in a file plays no part.
    run = Run.from_scores({"q": {"a": 1.0, "b": 1.0}})
    assert means({"q": {"a": 1}}, run, "mrr")["mrr"] == 0.5
    assert means({"q": {"b": 1}}, run, "mrr")["mrr"] == 1.0


def test_pipeline_ranking_is_used_as_produced():
    run = Run.from_rankings({"q": ["a", "b"]})
    assert means({"q": {"a": 1}}, run, "mrr")["mrr"] == 1.0


def test_missing_queries_left_out_unless_complete():
    judgements = {"q1": {"a": 1}, "q2": {"b": 1}}
    rankings = {"q1": ["a"], "q3": ["b"]}
    default = evaluate_run(Qrels.from_dict(judgements), Run.from_rankings(rankings), "hit@1")
    complete = evaluate_run(
        Qrels.from_dict(judgements), Run.from_rankings(rankings), "hit@1", complete=True
    )
    assert (default.n_queries, default.means()["hit@1"]) == (1, 1.0)
    assert (complete.n_queries, complete.means()["hit@1"]) == (2, 0.5)


def test_every_query_metric_pair_is_present():
    result = evaluate_run(
        Qrels.from_dict({"q1": {"a": 1}, "q2": {"b": 1}}),
        Run.from_rankings({"q1": ["x"], "q2": ["b"]}),
        "ndcg@10,mrr",
    )
    assert len(result.per_query) == 4
    assert list(result.wide().columns) == ["ndcg@10", "mrr"]
