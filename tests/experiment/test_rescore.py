"""Re-scoring stored runs on a new qrels version: the numbers equal those of a fresh run on it.

The loop of issue 29 without the browser: a labels file in the shared format grading the
unjudged documents of baseline's and hybrid_rerank's top 10, merged as a new version, both runs
re-scored on it, equal to fresh runs, judged@10 rising, equal to ir_measures' Judged@10."""

from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pytest
from processes import assert_same_traces

from conftest import SHIPPED, assert_one_line_error, require
from rag_bench.analysis.compare import compare
from rag_bench.data.dataset import load_dataset
from rag_bench.data.qrels_versions import merge_labels, use_qrels
from rag_bench.data.selection import Selection
from rag_bench.experiment.rescore import rescore_run
from rag_bench.experiment.runner import run_variant
from rag_bench.runs import open_runs

SMOKE = Selection(tag="smoke")
VARIANTS = ("baseline", "hybrid_rerank")


@pytest.fixture(scope="module")
def loop(tmp_path_factory, index_cache):
    """Runs on a copy of kestrel-kb, a labels file for their unjudged top-10 documents, and the
    version it was merged as."""
    root = tmp_path_factory.mktemp("loop")
    kb = root / "kb"
    shutil.copytree(SHIPPED, kb)
    runs = root / "runs"
    before = {
        v: run_variant(v, kb, selection=SMOKE, runs_dir=runs, cache_dir=index_cache)
        for v in VARIANTS
    }
    store = open_runs(runs)
    top = store.retrieved([r.run_id for r in before.values()])
    top = top[(top["stage"] == "documents") & (top["rank"] <= 10) & top["relevance"].isna()]
    pairs = sorted(set(zip(top["query_id"], top["doc_id"])))
    lines = []
    for i, (query_id, doc_id) in enumerate(pairs):
        # a grade that depends on the pair alone, so the test needs no person
        grade = hashlib.sha256(f"{query_id}/{doc_id}".encode()).digest()[0] % 4
        lines.append(
            {
                "kind": "pair",
                "query_id": query_id,
                "doc_id": doc_id,
                "grade": grade,
                "labeller": "ann" if i % 2 else "bob",
                "labelled_at": f"2026-12-05T19:{i // 60 % 60:02d}:{i % 60:02d}Z",
            }
        )
    labels = root / "labels.jsonl"
    labels.write_text("".join(json.dumps(line) + "\n" for line in lines))
    merged = merge_labels(kb, labels)
    return {
        "kb": kb,
        "runs": runs,
        "before": before,
        "pairs": pairs,
        "merged": merged,
        "cache": index_cache,
    }


def judged10(store, run_id) -> float:
    metrics = store.metrics(run_id)
    return float(metrics.loc[metrics["metric"] == "judged@10", "value"].mean())


@pytest.mark.parametrize("variant", VARIANTS)
def test_rescored_run_equals_a_fresh_run_on_the_new_version(loop, variant):
    version = loop["merged"].version
    assert version is not None and len(loop["merged"].added) == len(loop["pairs"]) > 0
    source = loop["before"][variant]
    rescored = rescore_run(source.run_id, qrels="latest", runs_dir=loop["runs"])
    # a reranker that learns from the evaluated qrels keeps the model the source run learnt:
    # the fresh run equal to the rescored one learns from the source's qrels too
    kept = rescored.manifest["params"].get("reranker", {}).get("train_qrels")
    if variant == "hybrid_rerank":
        assert kept == source.manifest["qrels"]["sha256"]
    overrides = [f"reranker.train_qrels={kept[:12]}"] if kept else []
    fresh = run_variant(
        variant,
        use_qrels(load_dataset(loop["kb"]), "latest"),
        selection=SMOKE,
        runs_dir=loop["runs"],
        cache_dir=loop["cache"],
        overrides=overrides,
    )
    # every table, every row, every value equal (latencies and run ids aside)
    assert_same_traces(rescored.location, fresh.location)
    assert rescored.manifest["qrels"]["sha256"] == version.sha256
    assert fresh.manifest["qrels"]["sha256"] == version.sha256
    assert rescored.manifest["rescored_from"]["run_id"] == source.run_id
    assert rescored.manifest["rescored_from"]["qrels"]["version"] == "base"
    store = open_runs(loop["runs"])
    assert judged10(store, rescored.run_id) > judged10(store, source.run_id)
    # with every unjudged document of the top 10 now graded, the whole top 10 is judged
    assert judged10(store, rescored.run_id) == 1.0


def test_judged_at_10_of_the_rescored_runs_equals_ir_measures(loop):
    ir_measures = require("ir_measures")
    store = open_runs(loop["runs"])
    version = loop["merged"].version
    qrels: dict[str, dict[str, int]] = {}
    for line in version.path.read_text().splitlines()[1:]:
        q, d, g = line.split("\t")
        qrels.setdefault(q, {})[d] = int(g)
    for variant in VARIANTS:
        rescored = rescore_run(
            loop["before"][variant].run_id, qrels=version.sha256[:8], runs_dir=loop["runs"]
        )
        ranked = store.retrieved(loop["before"][variant].run_id)
        ranked = ranked[ranked["stage"] == "documents"]
        run = {
            q: {d: -float(r) for d, r in zip(f["doc_id"], f["rank"])}
            for q, f in ranked.groupby("query_id")
        }
        # unanswerable queries have no ranking metrics (NULL), whatever their judgements
        rows = store.queries(loop["before"][variant].run_id)
        refuse = set(rows.loc[rows["should_refuse"], "query_id"])
        answerable = {q: qrels[q] for q in run if q in qrels and q not in refuse}
        run = {q: docs for q, docs in run.items() if q not in refuse}
        theirs = {
            m.query_id: m.value
            for m in ir_measures.iter_calc(
                [ir_measures.parse_measure("Judged@10")], answerable, run
            )
        }
        metrics = open_runs(loop["runs"]).metrics(rescored.run_id)
        ours = metrics[(metrics["metric"] == "judged@10") & metrics["value"].notna()]
        ours = dict(zip(ours["query_id"], ours["value"]))
        assert set(ours) == set(theirs)
        assert max(abs(ours[q] - theirs[q]) for q in theirs) <= 1e-12


def test_compare_says_the_runs_were_scored_on_different_qrels(loop):
    source = loop["before"]["baseline"]
    rescored = rescore_run(source.run_id, qrels="latest", runs_dir=loop["runs"])
    result = compare(loop["runs"], [source.run_id, rescored.run_id], resamples=200)
    said = [w for w in result.warnings if "scored on qrels" in w]
    assert len(said) == 1 and loop["merged"].version.sha256[:12] in said[0]
    same = rescore_run(source.run_id, runs_dir=loop["runs"])  # back on the base qrels
    result = compare(loop["runs"], [source.run_id, same.run_id], resamples=200)
    assert not [w for w in result.warnings if "scored on qrels" in w]
    # and on the base qrels, the rescored run is the source run again
    assert_same_traces(same.location, source.location)


def test_rescore_with_new_gold_answers_equals_a_fresh_run(loop, tmp_path):
    kb = tmp_path / "kb"
    shutil.copytree(SHIPPED, kb)
    queries = [json.loads(line) for line in (kb / "queries.jsonl").open()]
    chosen = [q for q in queries if "smoke" in q.get("tags", []) and not q.get("should_refuse")]
    gold = {q["_id"]: q["text"].split()[-1] for q in chosen[:5]}  # new (odd) gold answers
    answers = tmp_path / "gold.jsonl"
    answers.write_text("".join(json.dumps({"_id": k, "answer": v}) + "\n" for k, v in gold.items()))
    for q in queries:
        if q["_id"] in gold:
            q["answer"] = gold[q["_id"]]
            q.pop("answers", None)
    runs = tmp_path / "runs"
    source = run_variant(
        "baseline", SHIPPED, selection=SMOKE, runs_dir=runs, cache_dir=loop["cache"]
    )
    rescored = rescore_run(source.run_id, answers=answers, runs_dir=runs)
    (kb / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    edited = run_variant(
        "baseline", kb, selection=SMOKE, runs_dir=tmp_path / "other", cache_dir=loop["cache"]
    )
    a = open_runs(runs).metrics(rescored.run_id).drop(columns=["run_id"])
    b = open_runs(tmp_path / "other").metrics(edited.run_id).drop(columns=["run_id"])
    pd.testing.assert_frame_equal(a, b)
    before = open_runs(runs).metrics(source.run_id)
    assert not before["value"].equals(a["value"])  # the new answers changed the answer metrics


def test_rescore_refuses_another_dataset(loop, tmp_path, rag_bench):
    kb = tmp_path / "kb"
    shutil.copytree(SHIPPED, kb)
    with (kb / "corpus.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "extra", "title": "", "text": "another document"}) + "\n")
    run_id = loop["before"]["baseline"].run_id
    outcome = rag_bench("rescore", run_id, "--dataset", kb, "--runs-dir", loop["runs"])
    assert_one_line_error(outcome, "is not the data run", "--dataset")
    outcome = rag_bench("rescore", run_id, "--qrels", "nope", "--runs-dir", loop["runs"])
    base = loop["before"]["baseline"].manifest["qrels"]["sha256"][:12]
    assert_one_line_error(outcome, "neither a qrels version", f"base {base}")


def test_rescore_command_stores_a_run_naming_its_source(loop, rag_bench):
    run_id = loop["before"]["hybrid_rerank"].run_id
    outcome = rag_bench(
        "rescore", run_id, "--qrels", "latest", "--runs-dir", loop["runs"], "--format", "json"
    )
    assert outcome.exit_code == 0, outcome.stderr
    assert f"run {run_id} rescored on qrels 1" in outcome.stderr
    rows = json.loads(outcome.stdout)
    assert rows[0]["category"] == "all"


def test_gate_says_the_runs_were_scored_on_different_qrels(loop, rag_bench):
    source = loop["before"]["baseline"]
    rescored = rescore_run(source.run_id, qrels="latest", runs_dir=loop["runs"])
    outcome = rag_bench(
        "gate",
        rescored.run_id,
        "--baseline",
        source.run_id,
        "--max-drop",
        "ndcg@10=0.5",
        "--runs-dir",
        loop["runs"],
    )
    warned = [line for line in outcome.stderr.splitlines() if "scored on qrels" in line]
    assert len(warned) == 1 and f"rag-bench rescore {rescored.run_id}" in warned[0]


def rescored_and_fresh(loop, options: dict):
    """A baseline run made with ``options`` on the base qrels, rescored on the latest version,
    and a fresh run with the same options on that version."""
    source = run_variant(
        "baseline", loop["kb"], runs_dir=loop["runs"], cache_dir=loop["cache"], **options
    )
    rescored = rescore_run(source.run_id, qrels="latest", runs_dir=loop["runs"])
    fresh = run_variant(
        "baseline",
        use_qrels(load_dataset(loop["kb"]), "latest"),
        runs_dir=loop["runs"],
        cache_dir=loop["cache"],
        **options,
    )
    return rescored, fresh


def test_a_perturbed_run_rescores_like_a_fresh_one(loop):
    options = {"selection": Selection(tag="smoke", perturb=("typo", "synonym"))}
    rescored, fresh = rescored_and_fresh(loop, options)
    assert_same_traces(rescored.location, fresh.location)
    assert rescored.manifest["selection"] == fresh.manifest["selection"]


@pytest.mark.llm
def test_a_run_with_repeats_rescores_like_a_fresh_one(loop, real_smollm2):
    """Every repeat's answers are evaluated again, retrieval (stored once) for each."""
    options = {
        "overrides": (
            "generator.name=llama_cpp",
            "generator.temperature=1.0",
            "generator.max_tokens=24",
            "generator.context_k=1",
        ),
        "selection": Selection(tag="smoke", sample=3, seed=2),
        "repeats": 2,
    }
    rescored, fresh = rescored_and_fresh(loop, options)
    assert sorted(rescored.queries["repeat"].unique()) == [0, 1]
    assert_same_traces(rescored.location, fresh.location)


def test_a_run_stored_before_manifests_named_their_qrels_rescores_from_the_base(loop, tmp_path):
    """Its qrels were the dataset's own (the dataset hash covers them): a learning reranker's
    model is kept as learnt from them."""
    from runs_helpers import copy_run

    source = loop["before"]["hybrid_rerank"]
    manifest = dict(source.manifest)
    base = manifest.pop("qrels")
    params = {**manifest["params"]}
    params["reranker"] = {k: v for k, v in params["reranker"].items() if k != "train_qrels"}
    old = copy_run(source.location, tmp_path, "20261201-000000-hybrid_rerank-0ld0")
    content = json.loads((tmp_path / "_manifests" / f"{old.run_id}.json").read_text())
    del content["qrels"]
    content["params"] = params
    (tmp_path / "_manifests" / f"{old.run_id}.json").write_text(json.dumps(content))
    rescored = rescore_run(old.run_id, qrels="latest", runs_dir=tmp_path)
    assert rescored.manifest["rescored_from"]["qrels"] == base
    assert rescored.manifest["params"]["reranker"]["train_qrels"] == base["sha256"]
    again = rescore_run(source.run_id, qrels="latest", runs_dir=loop["runs"])
    assert_same_traces(rescored.location, again.location)
