"""The quality report against references: Jaccard and entropy computed by hand, ranks read
from a real baseline run's stored traces, the power formula written out, and answerability
on a document that does or does not hold the answer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from conftest import SHIPPED
from rag_bench.experiment.runner import run_variant
from rag_bench.testsets.generate import generate
from rag_bench.testsets.quality import (
    ASSUMED,
    gold_found,
    near_duplicates,
    quality_report,
    spread,
)


def shingles(text):
    s = " ".join(text.lower().split())
    return {s[i : i + 5] for i in range(len(s) - 4)}


def test_near_duplicates_are_pairs_over_the_jaccard_threshold():
    texts = [
        "What is the memory of the KS-220?",
        "What is the memory of the KS-440?",
        "When was KestrelOS 6.2 released?",
        "what is the MEMORY of the  KS-220?",
    ]
    reference = {}
    for i in range(4):
        for j in range(i + 1, 4):
            a, b = shingles(texts[i]), shingles(texts[j])
            reference[(i, j)] = len(a & b) / len(a | b)
    threshold = 0.6
    found = near_duplicates(texts, threshold)
    expected = [p for p, v in reference.items() if v >= threshold]
    assert found["pairs"] == len(expected) == 3
    top = found["examples"][0]
    assert (top["a"], top["b"]) == (0, 3) and top["jaccard"] == 1.0
    assert found["examples"][1]["jaccard"] == pytest.approx(reference[(0, 1)], abs=1e-4)
    # by hand: 5-grams abcde bcdef cdefg defgh / ... defgx share 3 of 5
    (pair,) = near_duplicates(["abcdefgh", "abcdefgx"], 0.0)["examples"]
    assert pair["jaccard"] == 0.6


def test_spread_counts_documents_top_share_and_entropy():
    grades = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"b": 1, "c": 1}, "q4": {}}
    found = spread(grades, corpus_size=10, n_queries=4)
    assert found["documents_used"] == 3 and found["share_of_corpus"] == 0.3
    assert found["top_document"] == "a" and found["top_document_share"] == pytest.approx(
        2 / 3, abs=1e-4
    )
    assert found["entropy_bits"] == 1.5  # uses 2, 1, 1 of 4: -(.5 log .5 + 2 * .25 log .25)
    assert found["max_entropy_bits"] == 2.0


def test_gold_answers_are_found_by_their_facts_or_as_a_phrase():
    assert gold_found("48 TB", "It holds up to 48 TB [nas-001].")
    assert not gold_found("48 TB", "It holds up to 24 TB.")
    assert gold_found("the Relay service", "It cannot reach the relay service.")
    assert not gold_found("the Relay service", "It cannot reach the service.")
    assert gold_found("a green case", "It has a Green  case.")  # no key fact: the phrase
    assert not gold_found("a green case", "It has a green box.")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    made = generate(SHIPPED, tmp_path_factory.mktemp("g") / "set", n=12, seed=2, cache_dir=cache)
    return made, cache


def test_difficulty_is_the_rank_a_baseline_run_stores(generated, tmp_path):
    made, cache = generated
    run = run_variant("baseline", made.folder, runs_dir=tmp_path / "runs", cache_dir=cache)
    docs = run.tables["retrieved"]
    docs = docs[(docs["stage"] == "documents") & (docs["relevance"] > 0)]
    best = docs.groupby("query_id")["rank"].min()
    judged = [q for q, p in made.queries if p.doc_ids]
    ranks = [int(best[q]) for q in judged if q in best.index]
    d = made.quality["difficulty"]
    assert d["queries"] == len(judged)
    assert d["median_rank"] == float(np.median(ranks))
    assert d["share_rank_1"] == round(sum(r == 1 for r in ranks) / len(judged), 4)
    assert d["share_not_retrieved"] == round((len(judged) - len(ranks)) / len(judged), 4)
    # power without runs: the spread of these reciprocal ranks, the formula written out
    reciprocal = np.array([1 / best[q] if q in best.index else 0.0 for q in judged])
    z = norm.ppf(0.975) + norm.ppf(0.8)
    p = made.quality["power"]
    assert p["spread_from"] == ASSUMED and p["n"] == len(judged)
    expected = math.ceil((z * reciprocal.std(ddof=1) / 0.05) ** 2)
    assert p["queries_needed"]["0.05"] == max(2, expected)


def test_answerability_reads_the_source_document(write_dataset, tmp_path):
    docs = {
        "a": ("Routers", "The Falcon Router supports 12 ports for small offices."),
        "b": ("Switches", "The Heron Switch has a green case."),
    }
    queries = {
        "yes": {"text": "How many ports does the Falcon Router support?", "answer": "12"},
        "no": {"text": "How many ports does the Falcon Router support?", "answer": "16"},
        "gone": {"text": "What colour is the Falcon Router?", "should_refuse": True},
    }
    qrels = [("yes", "a", 1), ("no", "a", 1), ("gone", "b", 0)]
    report = quality_report(write_dataset(docs, queries, qrels), cache_dir=tmp_path / "cache")
    # judged non-relevant only: no document to rank, so no difficulty
    assert report["difficulty"]["queries"] == 2 and report["power"]["n"] == 2
    assert report["answerability"]["checked"] == 2 and report["answerability"]["share"] == 0.5
    assert report["answerability"]["unanswered"] == ["no"]


def test_two_runs_give_the_observed_spread(tmp_path):
    from rag_bench.runs import open_runs
    from rag_bench.testsets.quality import power, run_differences

    a = run_variant("baseline", SHIPPED, runs_dir=tmp_path / "r", cache_dir=tmp_path / "c")
    b = run_variant(
        "baseline",
        SHIPPED,
        overrides=["retriever.k1=0.3"],
        runs_dir=tmp_path / "r",
        cache_dir=tmp_path / "c",
    )
    d, source = run_differences(open_runs(tmp_path / "r"), a.run_id, b.run_id)
    values = {
        r.run_id: r.metrics[r.metrics["metric"] == "ndcg@10"].set_index("query_id")["value"]
        for r in (a, b)
    }
    expected = (values[b.run_id] - values[a.run_id]).dropna()
    assert sorted(d) == pytest.approx(sorted(expected.to_list()))
    assert source.startswith("observed: ndcg@10") and f"{len(expected)} queries" in source
    z = norm.ppf(0.975) + norm.ppf(0.8)
    row = power(np.asarray(d), [0.02], source)
    assert row["queries_needed"]["0.02"] == max(2, math.ceil((z * np.std(d, ddof=1) / 0.02) ** 2))
