"""judged@k, the share of a ranking's top k that the qrels judge: equal to ir_measures' Judged@k
per query, on runs with judged queries missing, unjudged run queries and rankings shorter
than k."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require
from rag_bench import Qrels, Run, evaluate_run
from rag_bench.experiment.traces import ranking_measures

ir_measures = require("ir_measures")


def generate(seed: int):
    """qrels with 0 grades among the judged, and a run with distinct scores per query (ir_measures
    breaks score ties by doc id ascending, trec_eval descending: ties are tested apart)."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(80):
        docs = [f"d{d}" for d in rng.choice(400, size=40, replace=False)]
        if q % 6 != 1:
            judged = rng.choice(docs + [f"x{q}"], size=int(rng.integers(1, 30)), replace=False)
            qrels[f"q{q}"] = {d: int(rng.choice([0, 0, 1, 2])) for d in judged}
        if q % 5 != 2:
            n = int(rng.integers(1, 40))  # some rankings are shorter than k
            scores = rng.permutation(n) + rng.random()
            run[f"q{q}"] = {d: float(s) for d, s in zip(docs[:n], scores)}
    return qrels, run


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 5, 10, 30])
def test_judged_matches_ir_measures(seed, k):
    qrels, run = generate(seed)
    # ir_measures scores a judged query missing from the run as 0, as trec_eval -c does
    ours = evaluate_run(
        Qrels.from_dict(qrels), Run.from_scores(run), [f"judged@{k}"], complete=True
    ).per_query
    measure = ir_measures.parse_measure(f"Judged@{k}")
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
    ours = dict(zip(ours["query_id"], ours["value"]))
    assert set(ours) == set(theirs)
    assert max(abs(ours[q] - theirs[q]) for q in theirs) <= 1e-12


def test_judged_counts_zero_grades_and_ignores_relevance():
    qrels = Qrels.from_dict({"q": {"a": 0, "b": 2}})
    run = Run.from_scores({"q": {"a": 3.0, "c": 2.0, "b": 1.0, "d": 0.5}})
    values = evaluate_run(qrels, run, ["judged@2", "judged@4", "judged@10"]).means()
    assert values == {"judged@2": 0.5, "judged@4": 0.5, "judged@10": 0.5}  # 2 of 4 retrieved


def test_every_run_stores_judged_at_each_cutoff():
    assert {str(m) for m in ranking_measures((5, 10))} >= {"judged@5", "judged@10"}
