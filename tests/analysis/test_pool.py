"""rag-bench pool: which pairs it pools (the unjudged top k, each once), their priority against
pytrec_eval's nDCG@k, the order, production queries; the stratified claim sample (allocation,
counts per stratum, determinism); and judge-agreement on a person's labels of a run's
verdicts against scikit-learn and a hand count."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from runs_helpers import copy_run, locate, read_table, write_table

from conftest import SHIPPED, assert_one_line_error, require
from rag_bench.analysis.agreement import assess_run_labels
from rag_bench.analysis.pool import (
    allocate,
    pair_priorities,
    pool_pairs,
    sample_claims,
    sample_verdicts,
)
from rag_bench.analysis.reads import claim_verdicts
from rag_bench.data.dataset import load_dataset
from rag_bench.data.review import read_items, write_items
from rag_bench.errors import UsageError
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.runs import open_runs

SMOKE = Selection(tag="smoke")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A baseline and a hybrid_rerank run of the smoke queries."""
    folder = tmp_path_factory.mktemp("pool-runs")
    cache = tmp_path_factory.getbasetemp() / "cache"
    ids = [
        run_variant(name, SHIPPED, selection=SMOKE, runs_dir=folder, cache_dir=cache).run_id
        for name in ("baseline", "hybrid_rerank")
    ]
    return folder, ids


def tops(folder, ids, k):
    """run -> query -> {doc: rank} of the stored document rankings, read without pool.py."""
    frame = open_runs(folder).retrieved(ids)
    frame = frame[(frame["stage"] == "documents") & (frame["rank"] <= k)]
    out: dict[str, dict[str, dict[str, int]]] = {}
    for run_id, query_id, doc_id, rank in frame[["run_id", "query_id", "doc_id", "rank"]].values:
        out.setdefault(run_id, {}).setdefault(query_id, {})[doc_id] = int(rank)
    return out


def test_the_pool_is_every_unjudged_pair_of_the_top_k_once(runs):
    folder, ids = runs
    items = pool_pairs(open_runs(folder), ids, depth=10)
    data = load_dataset(SHIPPED)
    judged = data.qrels.to_dict()
    refused = {q for q, v in data.queries.items() if v.should_refuse}
    expected = {
        (query_id, doc_id)
        for ranked in tops(folder, ids, 10).values()
        for query_id, docs in ranked.items()
        for doc_id in docs
        if doc_id not in judged.get(query_id, {}) and query_id not in refused
    }
    pooled = [(i["query_id"], i["doc_id"]) for i in items]
    assert len(pooled) == len(set(pooled))
    assert set(pooled) == expected and expected
    for item in items[:20]:
        doc = data.docs[item["doc_id"]]
        assert (item["doc_text"], item["doc_title"]) == (doc.text, doc.title)
        assert item["query"] == data.queries[item["query_id"]].text


def test_priority_is_the_change_of_the_ndcg_difference_by_pytrec_eval(runs):
    pytrec_eval = require("pytrec_eval")
    folder, ids = runs
    items = pool_pairs(open_runs(folder), ids, depth=10)
    ranked = tops(folder, ids, 10)
    judged = load_dataset(SHIPPED).qrels.to_dict()

    def ndcg(run_id, query_id, qrels):
        if not any(g > 0 for g in qrels.values()):
            return 0.0
        run = {query_id: {d: 100.0 - r for d, r in ranked[run_id].get(query_id, {}).items()}}
        found = pytrec_eval.RelevanceEvaluator({query_id: qrels}, {"ndcg_cut"}).evaluate(run)
        return found.get(query_id, {}).get("ndcg_cut_10", 0.0)

    rng = np.random.default_rng(0)
    chosen = items[:15] + [items[i] for i in rng.choice(len(items), 15, replace=False)]
    for item in chosen:
        query_id, doc_id = item["query_id"], item["doc_id"]
        before = judged.get(query_id, {})
        after = {**before, doc_id: 1}
        difference = [ndcg(r, query_id, before) - ndcg(r, query_id, after) for r in ids]
        assert item["priority"] == pytest.approx(abs(difference[0] - difference[1]), abs=1e-9)
    priorities = [i["priority"] for i in items]
    assert priorities == sorted(priorities, reverse=True)
    assert priorities[0] > 0.1 and priorities[-1] == 0.0  # both runs rank the last alike


def test_a_hand_computed_priority_and_the_tie_order():
    # no judgement (a production query): A ranks d at 1, B at 3; after, IDCG = 1
    found = pair_priorities({"A": {"d": 1, "e": 2}, "B": {"x": 1, "e": 2, "d": 3}}, {}, 10)
    assert found["d"] == pytest.approx(1 - 0.5)  # 1/log2(2) - 1/log2(4)
    assert found["e"] == 0.0 and found["x"] == pytest.approx(1.0)
    # one judged relevant document (grade 2) at rank 1 of both: IDCG 2 → 2 + 1/log2(3)
    one = pair_priorities({"A": {"r": 1, "d": 2}, "B": {"r": 1}}, {"r": 2}, 10)
    assert one == {"d": pytest.approx((1 / np.log2(3)) / (2 + 1 / np.log2(3)))}
    # beyond k counts nothing; one run alone: its own change
    assert pair_priorities({"A": {"d": 11}}, {}, 10) == {}
    assert pair_priorities({"A": {"d": 2}}, {}, 10)["d"] == pytest.approx(1 / np.log2(3))


def test_queries_without_qrels_pool_every_retrieved_pair(runs, tmp_path):
    """Production queries (unknown to the qrels): every pair of their top k is unjudged."""
    folder, ids = runs
    copy = tmp_path / "kestrel-kb"
    shutil.copytree(SHIPPED, copy)
    (copy / "answers.jsonl").unlink()  # its recorded answers are of judged queries
    qrels = copy / "qrels" / "test.tsv"
    lines = qrels.read_text(encoding="utf-8").splitlines()
    ranked = tops(folder, ids, 10)
    production = sorted(ranked[ids[0]])[0]
    kept = [line for line in lines if not line.startswith(production + "\t")]
    assert len(kept) < len(lines)
    qrels.write_text("\n".join(kept) + "\n", encoding="utf-8")
    items = pool_pairs(open_runs(folder), ids, depth=10, dataset=copy)
    pooled = {i["doc_id"] for i in items if i["query_id"] == production}
    assert pooled == set(ranked[ids[0]][production]) | set(ranked[ids[1]][production])


def test_pool_cli_writes_items_and_refuses_mistakes(runs, rag_bench, tmp_path):
    folder, ids = runs
    out = tmp_path / "pool.jsonl"
    done = rag_bench("pool", *ids, "--runs-dir", folder, "--depth", 5, "-o", out)
    assert done.exit_code == 0, done.stderr
    items = read_items(out)
    assert items == json.loads(json.dumps(pool_pairs(open_runs(folder), ids, depth=5)))
    assert f"wrote {len(items)} unjudged pairs" in done.stdout
    assert all(max(i["ranks"].values()) <= 5 for i in items)
    assert_one_line_error(
        rag_bench("pool", *ids, "--runs-dir", folder, "--depth", 0, "-o", out), "--depth"
    )
    assert_one_line_error(rag_bench("pool", "--runs-dir", folder, "-o", out), "name the runs")
    assert_one_line_error(
        rag_bench("pool", *ids, "--runs-dir", folder, "--dataset", "lumen-mall-zh", "-o", out),
        "not 'lumen-mall-zh'",
    )


# --- the claim sample --------------------------------------------------------------------


def test_allocation_is_one_each_then_largest_remainder():
    # rest 3 over room 9, 4, 0 (of 13): shares 2.08, 0.92, 0 → floors 2, 0, 0; the one left
    # goes to the largest remainder (b, 0.92)
    assert allocate({"a": 10, "b": 5, "c": 1}, 6) == {"a": 3, "b": 2, "c": 1}
    assert allocate({"a": 10, "b": 5, "c": 1}, 3) == {"a": 1, "b": 1, "c": 1}
    assert allocate({"a": 10, "b": 5, "c": 1}, 99) == {"a": 10, "b": 5, "c": 1}
    # equal remainders go to the first name
    assert allocate({"b": 3, "a": 3}, 3) == {"a": 2, "b": 1}
    with pytest.raises(UsageError, match="one claim of each of the 3 strata"):
        allocate({"a": 10, "b": 5, "c": 1}, 2)


def verdicts_frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 200
    classes = rng.choice(["ok", "ranking", "grounded_but_wrong", None], n, p=[0.6, 0.2, 0.15, 0.05])
    supported = rng.choice([True, False, None], n, p=[0.7, 0.25, 0.05])
    return pd.DataFrame(
        {
            "query_id": [f"q{i // 3:03d}" for i in range(n)],
            "claim_id": [i % 3 for i in range(n)],
            "supported": pd.array(supported, dtype="boolean"),
            "failure_class": classes,
        }
    )


def test_the_sample_has_the_allocated_count_per_stratum_and_is_seeded():
    frame = verdicts_frame()
    judged = frame[frame["supported"].notna()]
    strata = [
        ("supported" if s else "unsupported") + "/" + (f if isinstance(f, str) else "none")
        for s, f in zip(judged["supported"], judged["failure_class"])
    ]
    sizes = pd.Series(strata).value_counts().to_dict()
    assert len(sizes) == 8
    sample = sample_verdicts(frame, 30, seed=4)
    assert len(sample) == 30
    assert sample["stratum"].value_counts().to_dict() == {
        k: v for k, v in allocate(sizes, 30).items() if v
    }
    assert sample["supported"].notna().all()
    keys = list(zip(sample["query_id"], sample["claim_id"]))
    assert len(set(keys)) == 30 and set(keys) <= set(zip(frame["query_id"], frame["claim_id"]))
    assert sample.equals(sample_verdicts(frame, 30, seed=4))
    assert not sample.equals(sample_verdicts(frame, 30, seed=5))
    # every drawn claim keeps its own verdict and class
    merged = sample.merge(frame, on=["query_id", "claim_id"], suffixes=("", "_in"))
    assert (merged["supported"] == merged["supported_in"]).all()


def test_sample_claims_of_a_run_are_claim_items(runs, rag_bench, tmp_path):
    folder, ids = runs
    store = open_runs(folder)
    items = sample_claims(store, ids[0], 9, seed=1)
    verdicts = claim_verdicts(store.connect([ids[0]]), ids[0])
    sizes = sample_verdicts(verdicts, 9, seed=1)["stratum"].value_counts().to_dict()
    assert pd.Series([i["stratum"] for i in items]).value_counts().to_dict() == sizes
    for item in items:
        assert item["kind"] == "claim" and item["run_id"] == ids[0] and item["context"]
        row = verdicts[
            (verdicts["query_id"] == item["query_id"])
            & (verdicts["claim_id"] == item["claim_index"])
        ].iloc[0]
        assert item["claim"] == row["text"]
        assert item["judge_verdict"] == ("supported" if row["supported"] else "unsupported")
    out = tmp_path / "claims.jsonl"
    done = rag_bench(
        "pool", "--claims", ids[0], "--sample", 9, "--seed", 1, "--runs-dir", folder, "-o", out
    )
    assert done.exit_code == 0, done.stderr
    assert read_items(out) == json.loads(json.dumps(items))
    outcome = rag_bench("pool", "--claims", ids[0], "--runs-dir", folder, "-o", out)
    assert_one_line_error(outcome, "--sample")


def test_judge_agreement_on_labels_of_a_runs_verdicts(runs, rag_bench, tmp_path):
    metrics = require("sklearn.metrics")
    source, ids = runs
    # the extractive generator's claims are all judged supported: a copy of the run whose
    # judge said "unsupported" of every third claim, with the grade to match
    folder = tmp_path / "runs"
    for run_id in ids:
        copied = copy_run(locate(source, run_id), folder)
        claims = read_table(copied, "claims")
        flip = np.arange(len(claims)) % 3 == 1
        claims.loc[flip, "supported"] = False
        claims.loc[flip, "support_grade"] = 0
        write_table(copied, "claims", claims)
    store = open_runs(folder)
    items = sample_claims(store, ids[0], 20, seed=2)
    labels = tmp_path / "labels.jsonl"
    rows = []
    for n, item in enumerate(items):
        label = "unsupported" if n % 3 == 0 else "supported"
        rows.append(
            {
                "kind": "claim",
                "run_id": item["run_id"],
                "query_id": item["query_id"],
                "claim_index": item["claim_index"],
                "label": label,
                "labeller": "ana",
                "labelled_at": "2026-12-05T19:04:11Z",
            }
        )
    # a correction of the first label (a later line wins), and a pair label that is ignored
    rows.append({**rows[0], "label": "supported", "labelled_at": "2026-12-05T19:05:00Z"})
    rows.append(
        {
            "kind": "pair",
            "query_id": "q",
            "doc_id": "d",
            "grade": 1,
            "labeller": "ana",
            "labelled_at": "2026-12-05T19:05:00Z",
        }
    )
    write_items(rows, labels)
    report = assess_run_labels(store, ids[0], str(labels), resamples=200, seed=0)
    gold = np.array([n % 3 != 0 or n == 0 for n in range(len(items))])
    judged = np.array([i["judge_verdict"] == "supported" for i in items])
    assert report["n_claims"] == len(items) == 20
    assert report["accuracy"] == pytest.approx(np.mean(gold == judged))
    table = report["scorers"]["judge"]
    unsupported_gold, unsupported_said = (~gold).astype(int), (~judged).astype(int)
    assert table["balanced_accuracy"]["value"] == pytest.approx(
        metrics.balanced_accuracy_score(unsupported_gold, unsupported_said)
    )
    kappa = metrics.cohen_kappa_score(unsupported_gold, unsupported_said)
    assert table["kappa"]["value"] == pytest.approx(0.0 if np.isnan(kappa) else kappa)
    confusion = report["confusion"]
    assert confusion["gold unsupported, judged supported"] == int(np.sum(~gold & judged))
    done = rag_bench(
        "judge-agreement",
        "--run",
        ids[0],
        "--labels",
        labels,
        "--runs-dir",
        folder,
        "--resamples",
        200,
        "--format",
        "json",
    )
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["n_claims"] == 20
    other = rag_bench("judge-agreement", "--run", ids[1], "--labels", labels, "--runs-dir", folder)
    assert_one_line_error(other, "holds no claim labels of run")
    assert_one_line_error(
        rag_bench("judge-agreement", "--labels", labels, "--runs-dir", folder), "--run"
    )
