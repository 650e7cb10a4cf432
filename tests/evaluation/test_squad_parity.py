"""answer_exact and answer_f1 against the official SQuAD v1.1 definition, on 400 public pairs.

The fixture (benchmarks/squad_sample.py says how it was drawn) holds, for 400 SQuAD v1.1 dev
questions (CC BY-SA 4.0), a fine-tuned BERT model's prediction and the annotators' gold answers.
The reference below is the official evaluation script's definition, written out here: lower-case,
drop every character of string.punctuation, replace the words a/an/the by a space, split on
whitespace; exact match and token F1 against each gold answer, the maximum over them; EM and F1
of a set are 100 times the means.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from pathlib import Path

import pytest

from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.data.dataset import load_dataset
from rag_bench.evaluation.answer import AnswerEvidence, response_metrics
from rag_bench.evaluation.correctness import best_over, exact_match, token_f1
from rag_bench.model import Query

FIXTURE = Path(__file__).parent / "fixtures" / "squad11_dev_bert.jsonl"
WORDS = EnglishAnalyzer()
PAIRS = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def official_normal(text: str) -> str:
    lowered = text.lower()
    kept = "".join(c for c in lowered if c not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", kept).split())


def official_exact(prediction: str, truth: str) -> float:
    return float(official_normal(prediction) == official_normal(truth))


def official_f1(prediction: str, truth: str) -> float:
    predicted, true = official_normal(prediction).split(), official_normal(truth).split()
    same = sum((Counter(predicted) & Counter(true)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(true)
    return 2 * precision * recall / (precision + recall)


def official_max(metric, prediction: str, truths: list[str]) -> float:
    return max(metric(prediction, truth) for truth in truths)


def rag_bench_scores(pair: dict) -> tuple[float, float]:
    """answer_exact and answer_f1 as a run computes them, for a query carrying the gold answers
    as ``answer`` and ``answers``."""
    answer, *more = pair["answers"]
    query = Query(pair["id"], "?", answer=answer, answers=tuple(more))
    evidence = AnswerEvidence(query, pair["prediction"], False, [], [], [], {})
    scores = response_metrics(evidence, WORDS)
    return scores["answer_exact"], scores["answer_f1"]


def test_the_fixture_is_a_few_hundred_public_pairs_with_several_gold_answers():
    assert len(PAIRS) == 400 and FIXTURE.stat().st_size < 200_000
    assert sum(len(set(p["answers"])) > 1 for p in PAIRS) > 100


@pytest.mark.parametrize("pair", PAIRS, ids=[p["id"] for p in PAIRS])
def test_each_pair_equals_the_official_definition(pair):
    prediction, truths = pair["prediction"], pair["answers"]
    exact, f1 = rag_bench_scores(pair)
    assert exact == official_max(official_exact, prediction, truths)
    assert f1 == pytest.approx(official_max(official_f1, prediction, truths), abs=1e-12)
    assert best_over(token_f1, prediction, truths) == pytest.approx(f1, abs=1e-12)


def test_the_aggregate_em_and_f1_equal_the_official_ones():
    ours = [rag_bench_scores(p) for p in PAIRS]
    em = 100 * sum(e for e, _ in ours) / len(ours)
    f1 = 100 * sum(f for _, f in ours) / len(ours)
    official_em = 100 * sum(
        official_max(official_exact, p["prediction"], p["answers"]) for p in PAIRS
    )
    official_f1_ = 100 * sum(
        official_max(official_f1, p["prediction"], p["answers"]) for p in PAIRS
    )
    assert em == pytest.approx(official_em / len(PAIRS), abs=1e-12)
    assert f1 == pytest.approx(official_f1_ / len(PAIRS), abs=1e-12)
    # scoring against the first gold answer only (what rag-bench did) reads lower
    first = [
        (exact_match(p["prediction"], p["answers"][0]), token_f1(p["prediction"], p["answers"][0]))
        for p in PAIRS
    ]
    assert 100 * sum(e for e, _ in first) / len(first) < em - 5


def test_answers_load_from_queries_jsonl(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "Super Bowl 50 was played."}\n')
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "Where?", "answer": "Santa Clara, California", '
        '"answers": ["Levi\'s Stadium", "Santa Clara"]}\n'
        '{"_id": "q2", "text": "Who?", "answers": ["Denver Broncos", "Broncos"]}\n'
    )
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\n"
    )
    queries = load_dataset(tmp_path).queries
    assert queries["q1"].gold_answers == (
        "Santa Clara, California",
        "Levi's Stadium",
        "Santa Clara",
    )
    assert queries["q2"].answer == "Denver Broncos"  # the first of answers when answer is absent
    evidence = AnswerEvidence(queries["q1"], "Levi's Stadium", False, [], [], [], {})
    assert response_metrics(evidence, WORDS)["answer_exact"] == 1.0


def test_bad_answers_say_where_and_how(tmp_path):
    from rag_bench.errors import DataError

    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "Where?", "answers": "Santa Clara"}\n'
    )
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(DataError, match="queries.jsonl.*1"):
        load_dataset(tmp_path)
