"""Real user queries without labels: the answer-side metrics that need no labels are computed
(equal to those of the same question asked as a labelled query), the ranking and correctness
metrics are NULL and said so, and the traces keep each query's text and ranking for review."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import SHIPPED, assert_one_line_error
from rag_bench.data.dataset import load_dataset
from rag_bench.data.selection import Selection
from rag_bench.data.user_queries import read_user_queries, with_user_queries
from rag_bench.errors import DataError
from rag_bench.evaluation.measures import answer_metric_names
from rag_bench.experiment.runner import run_variant
from rag_bench.experiment.traces import ranking_measures
from rag_bench.runs import open_runs

KS = (1, 5, 10)
# need no label: what the claims, the answer and the query alone say
LABEL_FREE = (
    "faithfulness",
    "citation_precision",
    "citation_coverage",
    "answer_relevance",
    "answer_length",
    "over_refusal",
)


@pytest.fixture(scope="module")
def labelled(tmp_path_factory, index_cache):
    """The smoke queries run as the dataset's (labelled), and their texts as a user's file."""
    root = tmp_path_factory.mktemp("user")
    run = run_variant(
        "baseline",
        SHIPPED,
        selection=Selection(tag="smoke"),
        ks=KS,
        runs_dir=root / "runs",
        cache_dir=index_cache,
    )
    rows = run.queries[~run.queries["should_refuse"]]
    texts = root / "questions.txt"
    texts.write_text("".join(f"{t}\n" for t in rows["query"]))
    return {
        "root": root,
        "run": run,
        "texts": texts,
        "ids": list(rows["query_id"]),
        "cache": index_cache,
    }


def test_user_queries_get_label_free_metrics_and_null_ranking_metrics(labelled, rag_bench):
    root = labelled["root"]
    outcome = rag_bench(
        "run",
        "--variant",
        "baseline",
        "--queries",
        labelled["texts"],
        "--k",
        "1,5,10",
        "--runs-dir",
        root / "runs",
        "--format",
        "json",
    )
    assert outcome.exit_code == 0, outcome.stderr
    n = len(labelled["ids"])
    assert f"{n} queries have no labels: ranking and correctness metrics are NULL" in outcome.stderr
    store = open_runs(root / "runs")
    # not list()[-1]: two runs made within one second are listed in their ids' random order
    [user] = [run for run in store.list() if run.run_id != labelled["run"].run_id]
    assert user.manifest["dataset"]["unlabelled"] == n
    metrics = store.metrics(user.run_id)
    for measure in ranking_measures(KS):
        values = metrics.loc[metrics["metric"] == str(measure), "value"]
        assert len(values) == n and values.isna().all(), measure
    for name in answer_metric_names(KS):
        if name.startswith(("context_precision", "answer_exact", "answer_f1", "key_fact")):
            assert metrics.loc[metrics["metric"] == name, "value"].isna().all(), name
    # the same question gets the same label-free values as when asked as a labelled query
    before = labelled["run"].metrics
    text_of = dict(zip(labelled["run"].queries["query_id"], labelled["run"].queries["query"]))
    queries = store.queries(user.run_id)
    id_of = dict(zip(queries["query"], queries["query_id"]))
    for name in LABEL_FREE:
        theirs = before[before["metric"] == name].set_index("query_id")["value"]
        ours = metrics[metrics["metric"] == name].set_index("query_id")["value"]
        a = np.array([theirs[q] for q in labelled["ids"]])
        b = np.array([ours[id_of[text_of[q]]] for q in labelled["ids"]])
        np.testing.assert_array_equal(a, b, err_msg=name)
    # for the pool: the query text and the document ranking are kept
    assert set(queries["query"]) == {text_of[q] for q in labelled["ids"]}
    ranked = store.retrieved(user.run_id)
    assert set(ranked.loc[ranked["stage"] == "documents", "query_id"]) == set(queries["query_id"])
    assert ranked["relevance"].isna().all()
    # without labels no failure class is given (the extractive generator cannot fabricate)
    assert queries["failure_class"].isna().all()


def test_jsonl_queries_keep_their_ids_and_judged_ones_are_scored(labelled, tmp_path):
    # a query the qrels judge, given by its id, is scored as usual; a new one is not
    data = load_dataset(SHIPPED)
    known = labelled["ids"][0]
    path = tmp_path / "q.jsonl"
    path.write_text(
        json.dumps({"_id": known, "text": data.queries[known].text})
        + "\n"
        + json.dumps({"_id": "new-1", "text": "how do I reset the KS-220"})
        + "\n"
    )
    run = run_variant(
        "baseline",
        with_user_queries(data, path),
        ks=KS,
        runs_dir=tmp_path / "runs",
        cache_dir=labelled["cache"],
    )
    ndcg = run.metrics[run.metrics["metric"] == "ndcg@10"].set_index("query_id")["value"]
    assert not np.isnan(ndcg[known]) and np.isnan(ndcg["new-1"])
    assert run.manifest["dataset"]["sha256"] != data.sha256


def test_bad_queries_files(tmp_path, rag_bench):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match="empty"):
        read_user_queries(empty)
    twice = tmp_path / "twice.txt"
    twice.write_text("where is my order\nwhere is my order\n")
    outcome = rag_bench(
        "run", "--variant", "baseline", "--queries", twice, "--runs-dir", tmp_path / "runs"
    )
    assert_one_line_error(outcome, f"{twice}:2:", "repeats line 1")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"_id": "a", "text": "ok"}\n{"_id": "b"}\n')
    outcome = rag_bench(
        "run", "--variant", "baseline", "--queries", broken, "--runs-dir", tmp_path / "runs"
    )
    assert_one_line_error(outcome, f"{broken}:2:", "text")


def test_a_dataset_without_qrels_runs_every_query_unlabelled(labelled, tmp_path, rag_bench):
    folder = tmp_path / "no-labels"
    folder.mkdir()
    for name in ("corpus.jsonl", "queries.jsonl"):
        (folder / name).write_bytes((SHIPPED / name).read_bytes())
    runs = tmp_path / "runs"
    outcome = rag_bench(
        "run", "--variant", "baseline", "--dataset", folder, "--tag", "smoke", "--runs-dir", runs
    )
    assert outcome.exit_code == 0, outcome.stderr
    n = len(labelled["ids"])  # the smoke tier's answerable queries: unanswerable need no label
    assert f"note: {n} queries have no labels" in outcome.stderr
    run = open_runs(runs).list()[-1]
    assert run.manifest["qrels"]["version"] == "base" and run.manifest["dataset"]["unlabelled"] == n
    shown = rag_bench("show", run.run_id, "--runs-dir", runs)
    assert f"qrels     base {run.manifest['qrels']['sha256'][:12]}" in shown.stdout
    # a dataset with qrels of another split only is a mistake, not an unlabelled dataset
    (folder / "qrels").mkdir()
    (folder / "qrels" / "dev.tsv").write_bytes((SHIPPED / "qrels" / "test.tsv").read_bytes())
    outcome = rag_bench("run", "--variant", "baseline", "--dataset", folder, "--runs-dir", runs)
    assert_one_line_error(outcome, "no qrels for split 'test'", "--split dev")


def test_a_user_queries_run_rescores_on_qrels_that_judge_them(labelled, tmp_path):
    """Once a person grades a user's question, the stored run of the questions file is
    re-scored on qrels that judge it: that query gets its ranking metrics."""
    from rag_bench.experiment.rescore import rescore_run

    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"_id": "user-1", "text": "how do I reset the KS-220"}) + "\n")
    runs = tmp_path / "runs"
    source = run_variant(
        "baseline",
        with_user_queries(load_dataset(SHIPPED), path),
        ks=KS,
        runs_dir=runs,
        cache_dir=labelled["cache"],
    )
    top = source.tables["retrieved"]
    doc = top[top["stage"] == "documents"]["doc_id"].iloc[0]
    qrels = tmp_path / "user.qrels"
    qrels.write_text(f"user-1 0 {doc} 2\n")
    rescored = rescore_run(source.run_id, qrels=qrels, queries=path, runs_dir=runs)
    m = rescored.metrics
    assert m.loc[m["metric"] == "recall@1", "value"].tolist() == [1.0]
    assert source.manifest["dataset"]["unlabelled"] == 1
    assert "unlabelled" not in rescored.manifest["dataset"]
    assert rescored.manifest["qrels"]["version"] == "file"
