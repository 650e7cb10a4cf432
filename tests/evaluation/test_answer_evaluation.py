"""Answer-side metrics and the failure diagnosis, by hand and through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from runs_helpers import committed_ids, locate, read_table

from conftest import ROOT, SHIPPED
from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.data.dataset import load_dataset
from rag_bench.evaluation.answer import AnswerEvidence, answer_metrics
from rag_bench.evaluation.correctness import contains, token_f1
from rag_bench.evaluation.diagnosis import FAILURE_CLASSES, Case, diagnose
from rag_bench.model import Chunk, Claim, Query, Verdict

SEED = ROOT / "rag_bench" / "data" / "shipped" / "seed-example"


def stored(run_dir, table):
    (run_id,) = committed_ids(run_dir)
    return read_table(locate(run_dir, run_id), table)


def test_seed_worked_example_through_the_cli(rag_bench, tmp_path):
    out = rag_bench(
        "run", "--variant", "recorded", "--dataset", SEED, "--k", "2,3", "--runs-dir", tmp_path
    )
    assert out.exit_code == 0, out.stderr
    metrics = stored(tmp_path, "metrics").pivot(index="query_id", columns="metric", values="value")
    q1 = metrics.loc["q1"]
    assert q1["recall@2"] == 0.5 and q1["mrr@2"] == 0.5 and round(q1["ndcg@2"], 3) == 0.387
    assert q1["recall@3"] == 1.0 and round(q1["ndcg@3"], 3) == 0.693
    assert q1["faithfulness"] == pytest.approx(2 / 3) and q1["citation_precision"] == pytest.approx(
        2 / 3
    )
    # an answer without citations: citation precision is undefined, never 100%
    q2 = metrics.loc["q2"]
    assert (
        pd.isna(q2["citation_precision"])
        and q2["citation_coverage"] == 0.0
        and q2["faithfulness"] == 1.0
    )
    queries = stored(tmp_path, "queries").set_index("query_id")
    assert (
        queries.loc["q1", "failure_class"] == "fabricated"
        and queries.loc["q2", "failure_class"] == "ok"
    )
    claims = stored(tmp_path, "claims")
    assert list(claims[claims["query_id"] == "q1"]["supported"]) == [True, True, False]
    assert set(claims["judge"]) == {"annotated"}


# Where the classes beyond the dataset card's seed rules refine its label, checked by hand:
# q-nas-035's answering document (grade 3) is not in the recorded ranking, only a grade-1 one;
# q-sup-054's ranking lacks one of its two hops; the others state only part of the gold facts
# (192 TB, Q1, DPA v1/v2 and their years, CFO are missing from the answer).
REFINED = {
    "q-nas-035": "retrieval_miss",
    "q-sup-054": "incomplete",
    "q-nas-041": "incomplete",
    "q-sup-043": "incomplete",
    "q-pol-048": "incomplete",
    "q-pol-052": "incomplete",
}


def test_every_recorded_answer_gets_its_expected_failure_class(tmp_path):
    from rag_bench.experiment.runner import run_variant

    result = run_variant("recorded", SHIPPED, runs_dir=tmp_path)
    answers = load_dataset(SHIPPED).answers
    got = dict(zip(result.queries["query_id"], result.queries["failure_class"]))
    expected = {q: REFINED.get(q, a.expected_failure_class) for q, a in answers.items()}
    assert got == expected
    stages = dict(zip(result.queries["query_id"], result.queries["failure_stage"]))
    assert stages["q-sup-054"] == "retrieval" and stages["q-nas-041"] == "generation"


CONTEXT = ["d1", "d2"]
GRADES = {"d1": 2, "d3": 1}


def claim(*cites):
    return Claim("A claim.", tuple(cites))


def ok(*by):
    return Verdict(2, True, tuple(by), "")


BAD = Verdict(0, False, (), "")


@pytest.mark.parametrize(
    ("should_refuse", "refused", "claims", "verdicts", "context", "expected"),
    [
        (True, True, [], [], CONTEXT, "correct_refusal"),
        (True, False, [claim("d1")], [ok("d1")], CONTEXT, "answered_unanswerable"),
        (False, False, [claim("d2")], [ok("d2")], ["d2"], "retrieval_miss"),
        (False, True, [], [], CONTEXT, "wrongly_refused"),
        (False, False, [claim("d1"), claim("d1")], [ok("d1"), BAD], CONTEXT, "fabricated"),
        (False, False, [claim("d1", "d2")], [ok("d1")], CONTEXT, "wrong_citation"),
        (False, False, [claim("d2")], [ok("d2")], CONTEXT, "retrieved_not_used"),
        (False, False, [claim("d1")], [ok("d1")], CONTEXT, "ok"),
        (False, False, [claim()], [ok("d1")], CONTEXT, "ok"),  # uncited but supported
        (False, False, [claim("d1")], [Verdict(None, None, (), "")], CONTEXT, "retrieved_not_used"),
    ],
)
def test_diagnosis_rules(should_refuse, refused, claims, verdicts, context, expected):
    case = Case(should_refuse, refused, claims, verdicts, context, GRADES)
    assert diagnose(case).failure_class == expected


# A small hand-made question with three judged documents: a1 answers it (grade 3), n1 is a
# neighbour (grade 1), s1 a superseded version (grade 0); a multi-hop one needs h1 and h2.
SINGLE = {"a1": 3, "n1": 1, "s1": 0}
CITING_A1 = (claim("a1"),)
HOPS = {"h1": 2, "h2": 2, "n1": 1}


def case(
    grades=SINGLE,
    context=("a1",),
    ranked=(),
    claims=CITING_A1,
    verdicts=None,
    refused=False,
    multi_hop=False,
    correctness="correct",
):
    verdicts = [ok(*c.citations) for c in claims] if verdicts is None else verdicts
    return Case(
        False,
        refused,
        list(claims),
        list(verdicts),
        list(context),
        grades,
        list(context) + list(ranked),
        multi_hop,
        correctness,
    )


@pytest.mark.parametrize(
    ("built", "expected", "stage"),
    [
        (case(), "ok", None),
        # the answering document was retrieved (rank 8) but not given to the generator
        (
            case(context=("n1",), ranked=("a1",), correctness="wrong", claims=(claim("n1"),)),
            "ranking",
            "rerank",
        ),
        (
            case(context=("n1",), correctness="wrong", claims=(claim("n1"),)),
            "retrieval_miss",
            "retrieval",
        ),
        # one hop in the context, the other nowhere: incomplete, not wrongly refused
        (
            case(
                HOPS, context=("h1",), refused=True, claims=(), multi_hop=True, correctness="wrong"
            ),
            "incomplete",
            "retrieval",
        ),
        (
            case(
                HOPS,
                context=("h1",),
                ranked=("h2",),
                refused=True,
                claims=(),
                multi_hop=True,
                correctness="wrong",
            ),
            "ranking",
            "rerank",
        ),
        # a lone grade-1 document in the context: the refusal was right to happen
        (
            case(context=("n1",), refused=True, claims=(), correctness="wrong"),
            "retrieval_miss",
            "retrieval",
        ),
        (
            case(
                HOPS,
                context=("h1", "h2"),
                refused=True,
                claims=(),
                multi_hop=True,
                correctness="wrong",
            ),
            "wrongly_refused",
            "generation",
        ),
        # every hop present, the answer gives some of the gold facts
        (
            case(
                HOPS,
                context=("h1", "h2"),
                claims=(claim("h1"),),
                multi_hop=True,
                correctness="partial",
            ),
            "incomplete",
            "generation",
        ),
        (case(correctness="wrong"), "grounded_but_wrong", "generation"),
        # a correct answer that is not grounded is not ok
        (case(verdicts=[BAD]), "fabricated", "generation"),
        (case(correctness=None), "ok", None),
    ],
)
def test_failure_classes_on_a_hand_made_dataset(built, expected, stage):
    found = diagnose(built)
    assert (found.failure_class, found.stage) == (expected, stage)
    assert (found.fix is None) == (stage is None)


def test_every_failure_class_names_a_stage_and_a_fix_but_the_good_ones():
    from rag_bench.evaluation.diagnosis import FAILURE_ACTIONS

    for name in FAILURE_CLASSES:
        good = name in ("ok", "correct_refusal")
        assert (FAILURE_ACTIONS[name].stage is None) == good, name


def evidence(query, answer="", refused=False, claims=(), verdicts=(), ranking=(), grades=None):
    return AnswerEvidence(
        query, answer, refused, list(claims), list(verdicts), list(ranking), grades or {}
    )


ANALYZER = EnglishAnalyzer()
Q = Query("q", "How long is the return window for opened items?", answer="30 days")
CHUNKS = [
    Chunk("d1#0", "d1", 0, 0, "Opened items can be returned within 30 days."),
    Chunk("d9#0", "d9", 0, 0, "Unrelated text about shipping."),
]


def test_answer_metrics_by_hand():
    e = evidence(
        Q,
        "Opened items can be returned within 30 days [d1]. Shipping is free [d1].",
        claims=[
            Claim("Opened items can be returned within 30 days.", ("d1",)),
            Claim("Shipping is free.", ("d1",)),
        ],
        verdicts=[ok("d1"), BAD],
        ranking=CHUNKS,
        grades={"d1": 3},
    )
    m = answer_metrics(e, [1, 2], ANALYZER)
    assert (
        m["faithfulness"] == 0.5
        and m["citation_precision"] == 0.5
        and m["citation_coverage"] == 1.0
    )
    # SQuAD exact match compares the whole answer; containment finds "30 days" inside it
    assert m["answer_exact"] == 0.0 and m["answer_contains"] == 1.0
    assert m["key_fact_recall"] == 1.0 and m["over_refusal"] == 0.0
    assert m["correct_refusal"] is None and m["answered_unanswerable"] is None
    assert m["context_precision@1"] == 1.0 and m["context_precision@2"] == 0.5
    assert m["context_recall@1"] == 1.0 and m["answer_span_recall@1"] == 1.0
    # query terms how, long, return, window, open, item: the answer has return, open, item
    assert m["answer_relevance"] == pytest.approx(3 / 6)


def test_refusals_and_undefined_values():
    refused = answer_metrics(
        evidence(Q, "I don't know.", refused=True, ranking=CHUNKS, grades={"d1": 3}), [1], ANALYZER
    )
    assert (
        refused["over_refusal"] == 1.0
        and refused["answer_exact"] == 0.0
        and refused["answer_f1"] == 0.0
        and refused["key_fact_recall"] == 0.0
    )
    assert (
        refused["faithfulness"] is None
        and refused["citation_precision"] is None
        and refused["answer_relevance"] is None
    )
    unanswerable = Query("u", "Do you ship to Mars?", category="unanswerable", should_refuse=True)
    m = answer_metrics(
        evidence(unanswerable, "I don't know.", refused=True, ranking=CHUNKS), [1], ANALYZER
    )
    assert (
        m["correct_refusal"] == 1.0
        and m["answered_unanswerable"] == 0.0
        and m["over_refusal"] is None
    )
    assert (
        m["context_precision@1"] is None
        and m["context_recall@1"] is None
        and m["answer_exact"] is None
    )


def test_text_matching_helpers():
    assert contains("Returns: within 30 Days, always.", "30 days")
    assert not contains("within 300 days", "30 days")
    assert token_f1("the 30 days window", "30 days") == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert token_f1("nothing", "30 days") == 0.0


@pytest.mark.slow
def test_judge_agreement_cli(rag_bench):
    out = rag_bench("judge-agreement", "--judge", "annotated", "--format", "json")
    report = json.loads(out.stdout)
    assert report["accuracy"] == 1.0 and report["kappa"] == 1.0 and report["n_claims"] >= 100
    lexical = json.loads(rag_bench("judge-agreement", "--format", "json").stdout)
    assert 0 < lexical["accuracy"] < 1 and sum(lexical["confusion"].values()) == lexical["n_claims"]
    table = rag_bench("judge-agreement").stdout
    assert "cohen_kappa" in table and "gold unsupported, judged unsupported" in table


def test_judge_agreement_json_with_undefined_statistics(rag_bench, tmp_path):
    # without the seed's fabricated claim ("Any order can be returned."), the lexical judge
    # calls every claim supported, so precision on "unsupported" has no denominator: it must
    # print as null, not crash
    import shutil

    data = shutil.copytree(
        ROOT / "rag_bench" / "data" / "shipped" / "seed-example", tmp_path / "seed"
    )
    answers = [json.loads(line) for line in (data / "answers.jsonl").read_text().splitlines()]
    answers[0]["claims"] = answers[0]["claims"][:2]
    answers[0]["answer"] = "Items can be returned within 7 days [d1]. Fresh food is excluded [d2]."
    (data / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    out = rag_bench("judge-agreement", "--dataset", data, "--format", "json")
    assert out.exit_code == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["n_claims"] == 3 and report["precision_unsupported"] is None


# The official SQuAD v1.1 normalisation: ASCII punctuation deleted (not replaced by a space), the
# en dash kept, articles dropped as whole words only.
@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("Rockefeller's", "rockefellers"),
        ("1914–1918", "1914–1918"),  # an en dash is not in string.punctuation
        ("1914-1918", "19141918"),
        ("Theatre and an anthem", "theatre and anthem"),
        ("  A   b\tc ", "b c"),
    ],
)
def test_squad_normalisation(text, normal):
    from rag_bench.evaluation.correctness import normalize_answer

    assert normalize_answer(text) == normal


def test_squad_exact_match_and_f1_on_the_published_cases():
    from rag_bench.evaluation.correctness import exact_match

    assert exact_match("the Nelson Rockefeller", "Nelson Rockefeller") == 1.0
    # possessive: one token "rockefellers", so neither exact nor a word in common
    assert exact_match("Rockefeller's", "Nelson Rockefeller") == 0.0
    assert token_f1("Rockefeller's", "Nelson Rockefeller") == 0.0
    assert not contains("Rockefeller's", "Nelson Rockefeller")
    assert token_f1("Nelson Rockefeller's", "Nelson Rockefeller") == pytest.approx(0.5)
    # the en dash joins the years into one token; a hyphen deletes into one token
    assert exact_match("1914 – 1918", "1914–1918") == 0.0
    assert token_f1("1914–1918 war", "1914–1918") == pytest.approx(2 / 3)


def test_key_fact_recall_reads_sentence_long_gold_answers():
    from rag_bench.evaluation.correctness import key_fact_recall, verdict

    gold = "INC-2025-0211 was a SEV1 incident, and SEV1 drafts are due 5 business days after it."
    question = "When is the postmortem draft of INC-2025-0211 due?"
    # INC-2025-0211 is named by the question: the facts asked for are SEV1 and 5
    assert key_fact_recall("It was SEV1; drafts are due in 5 business days.", gold, question) == 1
    assert key_fact_recall("It was SEV2; drafts are due in 5 days.", gold, question) == 0.5
    assert verdict("It was SEV2; drafts are due in 5 days.", gold, question) == "partial"
    assert verdict("Drafts are due in 10 days.", gold, question) == "wrong"
    assert key_fact_recall("USD 5,000 per year", "USD 5000", "What is the cap?") == 1
    # an amount is one fact, read by its number: "MSRP (US)" does not give US$2,999
    assert verdict("MSRP (US) of the unit", "US$2,999", "What is the MSRP?") == "wrong"
    assert verdict("It costs $2,999 in the US.", "US$2,999", "What is the MSRP?") == "correct"
    assert key_fact_recall("anything", "No drive detected", "What does the LED say?") is None
    assert verdict("The LED says no drive detected.", "No drive detected", "LED?") == "correct"


def test_key_facts_of_public_open_domain_answers():
    """Gold answers of NQ-open with answers people judged (Kamalloo et al. 2023, NQ301)."""
    from rag_bench.evaluation.correctness import best_fact_recall, key_fact_recall

    # the unit after a degree sign is no name: "100\xa0°C" asks for 100 only
    question = "the boiling point of water is 100 degrees celsius express this in si units"
    assert key_fact_recall("373.15 K", "100\xa0°C", question) is None
    # several gold answers: the best one counts
    golds = ["FedExField in Landover, Maryland", "the Washington metropolitan area"]
    assert (
        best_fact_recall("The Redskins play at FedExField in Landover, Maryland.", golds, "?") == 1
    )
    assert best_fact_recall("They are based in the Washington metropolitan area.", golds, "?") == 1
    # numbers in words and with a scale word
    assert key_fact_recall("around 2.4 billion years ago", "2,400,000,000 years", "when?") == 1
    assert key_fact_recall("Denver has made eight appearances.", "8", "how many?") == 1
    assert key_fact_recall("Denver has made 8 appearances.", "eight", "how many?") == 1
    assert key_fact_recall("Denver has made 7 appearances.", "eight", "how many?") == 0
    assert key_fact_recall("one of them", "first", "which?") is None  # sometimes no number


@pytest.mark.parametrize(
    ("question", "answer", "relevant"),
    [
        (
            "What is the phone number of the support centre in Dublin?",
            "The Dublin support centre is at 4 Harbour Road [d1].",
            False,
        ),
        (
            "What is the phone number of the support centre in Dublin?",
            "The Dublin support centre answers on +353 1 555 0188 [d1].",
            True,
        ),
        (
            "What is the postal address of the support centre in Dublin?",
            "Call the Dublin support centre on +353 1 555 0188 [d1].",
            False,
        ),
        (
            "What is the postal address of the support centre in Dublin?",
            "The Dublin support centre is at 4 Harbour Road [d1].",
            True,
        ),
        ("How long do refunds take?", "Refunds go to the original account [d1].", False),
        ("How long do refunds take?", "Refunds take 5 working days [d1].", True),
        ("客服电话是多少？", "客服中心位于上海市徐汇路8号【d1】。", False),
    ],
)
def test_answer_relevance_notices_a_missing_asked_for_value(question, answer, relevant):
    from rag_bench.components.analyzers import AutoAnalyzer

    m = answer_metrics(evidence(Query("q", question), answer), [1], AutoAnalyzer())
    assert (m["answer_relevance"] > 0) is relevant


def test_ppi_interval_keeps_a_width_when_judge_and_run_look_perfect():
    """40 labels all agreed with and a run judged supported throughout: the estimate is 1.0,
    but 40 labels cannot show the judge never errs, so the interval is not [1, 1]."""
    from rag_bench.analysis.agreement import ppi_interval

    perfect = ppi_interval(np.ones(200), np.ones(40), np.ones(40))
    assert perfect["estimate"] == 1.0 and perfect["high"] == 1.0
    assert 0.9 < perfect["low"] < 0.99
    more = ppi_interval(np.ones(2000), np.ones(400), np.ones(400))
    assert perfect["low"] < more["low"] < 1.0  # more evidence, a narrower interval
