"""Parity with the reference implementations: pytrec_eval (trec_eval itself) and ir_measures.

Runs are generated with tied scores, unpadded ids (so string order differs from numeric order),
judged queries missing from the run, run queries without judgements, graded qrels and judged
queries without any relevant document. Every metric must agree per query to 1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require
from rag_bench import Qrels, Run, evaluate_run, load_qrels, load_run
from rag_bench.evaluation.measures import canonical

pytrec_eval = require("pytrec_eval")
ir_measures = require("ir_measures")

CUTOFFS = (1, 3, 5, 10, 20)
TREC_NAMES = {
    "precision": "P",
    "recall": "recall",
    "hit": "success",
    "ndcg": "ndcg_cut",
    "map": "map_cut",
}
UNCUT = {"mrr": "recip_rank", "ndcg": "ndcg", "map": "map", "rprec": "Rprec"}


def generate(seed: int, n_queries: int = 60, n_docs: int = 300):
    """Random qrels ``{q: {d: grade}}`` and run ``{q: {d: score}}`` with the awkward cases."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        docs = [f"d{d}" for d in rng.choice(n_docs, size=60, replace=False)]
        if q % 9 != 4:  # some run queries have no judgements
            n_judged = int(rng.integers(1, 25))
            grades = rng.choice([0, 0, 1, 2, 3], size=n_judged)
            if q % 11 == 5:  # judged, but nothing relevant
                grades[:] = 0
            judged = rng.choice(docs, size=n_judged, replace=False)
            qrels[qid] = {d: int(g) for d, g in zip(judged, grades)}
        if q % 7 != 3:  # some judged queries are missing from the run
            n_ret = int(rng.integers(1, 50))
            decimals = int(rng.integers(0, 3))  # coarse scores make many ties
            run[qid] = {d: float(np.round(rng.random() * 10, decimals)) for d in docs[:n_ret]}
    return qrels, run


def trec_measures() -> set[str]:
    cut = ",".join(map(str, CUTOFFS))
    return {f"{name}.{cut}" for name in TREC_NAMES.values()} | set(UNCUT.values())


def our_metrics() -> list[str]:
    names = [f"{family}@{k}" for family in TREC_NAMES for k in CUTOFFS]
    return names + list(UNCUT)


def reference_name(metric: str) -> str:
    family, _, k = metric.partition("@")
    return f"{TREC_NAMES[family]}_{k}" if k else UNCUT[family]


def trec_top(run: dict[str, dict[str, float]], k: int) -> dict[str, dict[str, float]]:
    """The first k documents of each query in trec_eval's order (score desc, doc id desc)."""
    out = {}
    for qid, docs in run.items():
        ranked = sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)
        out[qid] = dict(ranked[:k])
    return out


def assert_close(ours: dict[str, float], ref: dict[str, float], label: str) -> None:
    assert set(ours) == set(ref), label
    worst = max(abs(ours[q] - ref[q]) for q in ref)
    assert worst <= 1e-9, f"{label}: largest per-query difference {worst}"


def per_query(result, metric: str) -> dict[str, float]:
    rows = result.per_query[result.per_query["metric"] == metric]
    return dict(zip(rows["query_id"].astype(str), rows["value"]))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rel_level", [1, 2])
def test_matches_pytrec_eval(seed, rel_level):
    qrels, run = generate(seed)
    ref = pytrec_eval.RelevanceEvaluator(
        qrels, trec_measures(), relevance_level=rel_level
    ).evaluate(run)
    result = evaluate_run(
        Qrels.from_dict(qrels), Run.from_scores(run), our_metrics(), rel_level=rel_level
    )
    for metric in our_metrics():
        name = reference_name(metric)
        assert_close(per_query(result, metric), {q: v[name] for q, v in ref.items()}, metric)


@pytest.mark.parametrize("seed", range(4))
def test_cutoff_mrr_and_exponential_ndcg(seed):
    """mrr@k is recip_rank over the top k; ndcg_exp@k is ndcg_cut with grades 2^g - 1."""
    qrels, run = generate(seed)
    ours = evaluate_run(
        Qrels.from_dict(qrels), Run.from_scores(run), "mrr@5,mrr@10,ndcg_exp@5,ndcg_exp@10"
    )
    for k in (5, 10):
        ref = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(trec_top(run, k))
        assert_close(
            per_query(ours, f"mrr@{k}"), {q: v["recip_rank"] for q, v in ref.items()}, f"mrr@{k}"
        )
        exp_qrels = {q: {d: 2**g - 1 for d, g in docs.items()} for q, docs in qrels.items()}
        ref = pytrec_eval.RelevanceEvaluator(exp_qrels, {f"ndcg_cut.{k}"}).evaluate(run)
        assert_close(
            per_query(ours, f"ndcg_exp@{k}"),
            {q: v[f"ndcg_cut_{k}"] for q, v in ref.items()},
            f"ndcg_exp@{k}",
        )


@pytest.mark.parametrize("seed", range(3))
def test_complete_mode_scores_missing_queries_zero(seed):
    qrels, run = generate(seed)
    ref = pytrec_eval.RelevanceEvaluator(qrels, trec_measures()).evaluate(run)
    result = evaluate_run(
        Qrels.from_dict(qrels), Run.from_scores(run), our_metrics(), complete=True
    )
    assert result.n_queries == len(qrels)
    means = result.means()
    for metric in our_metrics():
        name = reference_name(metric)
        expected = {q: ref[q][name] if q in ref else 0.0 for q in qrels}
        assert_close(per_query(result, metric), expected, metric)
        assert means[metric] == pytest.approx(sum(expected.values()) / len(qrels), abs=1e-12)


def write_trec(tmp_path, qrels, run):
    qrels_path, run_path = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels_path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    lines = []
    for q, docs in run.items():
        for rank, (d, s) in enumerate(docs.items(), start=1):
            lines.append(f"{q}\tQ0\t{d}\t{rank}\t{s}\ttag\n")
    run_path.write_text("".join(lines))
    return qrels_path, run_path


@pytest.mark.parametrize("seed", range(3))
def test_files_give_the_same_numbers(tmp_path, seed):
    """The file readers (fast path included) feed the same judgements as the dict builders."""
    qrels, run = generate(seed)
    qrels_path, run_path = write_trec(tmp_path, qrels, run)
    ref = pytrec_eval.RelevanceEvaluator(qrels, trec_measures()).evaluate(run)
    result = evaluate_run(load_qrels(qrels_path), load_run(run_path), our_metrics())
    for metric in our_metrics():
        assert_close(
            per_query(result, metric),
            {q: v[reference_name(metric)] for q, v in ref.items()},
            metric,
        )


IR_MEASURES = {
    "precision@10": "P@10",
    "recall@10": "R@10",
    "hit@10": "Success@10",
    "mrr": "RR",
    "ndcg@10": "nDCG@10",
    "map": "AP",
    "rprec": "Rprec",
}


@pytest.mark.parametrize("seed", range(3))
def test_matches_ir_measures(seed):
    """ir_measures scores judged queries missing from the run as 0, i.e. our complete mode."""
    qrels, run = generate(seed)
    measures = [ir_measures.parse_measure(name) for name in IR_MEASURES.values()]
    ref: dict[str, dict[str, float]] = {}
    for row in ir_measures.iter_calc(measures, qrels, run):
        ref.setdefault(str(row.measure), {})[row.query_id] = row.value
    ours = evaluate_run(
        Qrels.from_dict(qrels), Run.from_scores(run), list(IR_MEASURES), complete=True
    )
    for metric, name in IR_MEASURES.items():
        assert_close(per_query(ours, metric), ref[name], metric)


TREC_SPELLINGS = ("P_10", "recall_20", "ndcg_cut_10", "success_5", "map_cut_10")
TREC_UNCUT = ("recip_rank", "Rprec", "map", "ndcg")


@pytest.mark.parametrize("seed", range(2))
def test_trec_eval_spellings_give_trec_eval_numbers(seed):
    """Each metric named as trec_eval names it is the measure trec_eval computes under that name;
    results carry the canonical name."""
    qrels, run = generate(seed)
    spellings = [*TREC_SPELLINGS, *TREC_UNCUT]
    requested = {".".join(s.rsplit("_", 1)) for s in TREC_SPELLINGS} | set(TREC_UNCUT)
    ref = pytrec_eval.RelevanceEvaluator(qrels, requested).evaluate(run)
    ours = evaluate_run(Qrels.from_dict(qrels), Run.from_scores(run), spellings)
    assert [str(m) for m in ours.measures] == [canonical(s) for s in spellings]
    for spelling in spellings:
        expected = {q: v[spelling] for q, v in ref.items()}
        assert_close(per_query(ours, canonical(spelling)), expected, spelling)


@pytest.mark.parametrize("seed", range(2))
def test_ir_measures_spellings_give_ir_measures_numbers(seed):
    """As above for ir_measures' names, on a run without ties (ir_measures cuts tied scores at
    RR@k in an order of its own)."""
    qrels, tied = generate(seed)
    run = {q: {d: float(-i) for i, d in enumerate(trec_top(tied, 10**6)[q])} for q in tied}
    spellings = ["P@10", "R@100", "nDCG@10", "RR", "RR@10", "AP", "AP@10", "Success@5", "Rprec"]
    measures = [ir_measures.parse_measure(name) for name in spellings]
    ref: dict[str, dict[str, float]] = {}
    for row in ir_measures.iter_calc(measures, qrels, run):
        ref.setdefault(str(row.measure), {})[row.query_id] = row.value
    ours = evaluate_run(Qrels.from_dict(qrels), Run.from_scores(run), spellings, complete=True)
    for spelling, measure in zip(spellings, measures):
        assert_close(per_query(ours, canonical(spelling)), ref[str(measure)], spelling)
