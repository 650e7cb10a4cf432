"""benchmarks/beir_table.py's fetch-or-find, BEIR-convention scoring and the summary it computes
from stored runs, on tiny generated corpora in each layout a public copy comes in."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import beir_table  # noqa: E402

from rag_bench import open_runs  # noqa: E402
from rag_bench.evaluation.stats import bootstrap_ci, randomization_test  # noqa: E402
from rag_bench.experiment.runner import run_variant  # noqa: E402

DOCS = [
    {"_id": "q1", "title": "", "text": "cats purr when they are happy"},
    {"_id": "d1", "title": "", "text": "a purring cat is usually content"},
    {"_id": "d2", "title": "", "text": "dogs bark at strangers"},
]
QUERIES = [{"_id": "q1", "text": "cats purr when they are happy"}, {"_id": "q2", "text": "why?"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\tgone\t1\n"  # 'gone' is not in the corpus


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def beir_layout(folder: Path) -> Path:
    """The Hugging Face BeIR layout: gzipped corpus and queries, test.tsv beside them."""
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl.gz").write_bytes(gzip.compress(jsonl(DOCS)))
    (folder / "queries.jsonl.gz").write_bytes(gzip.compress(jsonl(QUERIES)))
    (folder / "test.tsv").write_text(QRELS)
    return folder


def check_converted(folder: Path) -> None:
    from rag_bench.data.dataset import load_dataset

    data = load_dataset(folder)
    assert sorted(data.docs) == ["d1", "d2", "q1"]
    assert list(data.queries) == ["q1"]  # q2's only judgement names a missing document
    assert (folder / "qrels-original" / "test.tsv").read_text() == QRELS


def test_a_gzipped_folder_is_converted_once(tmp_path):
    source = beir_layout(tmp_path / "arguana")
    folder = beir_table.materialise(source, tmp_path / "cache")
    assert folder.parent == tmp_path / "cache" and folder.name.startswith("arguana-")
    check_converted(folder)
    stamp = (folder / "qrels" / "test.tsv").stat().st_mtime_ns
    assert beir_table.materialise(source, tmp_path / "cache") == folder
    assert (folder / "qrels" / "test.tsv").stat().st_mtime_ns == stamp


def test_a_ready_beir_folder_is_used_as_it_is(tmp_path):
    folder = beir_table.materialise(beir_layout(tmp_path / "src"), tmp_path / "cache")
    assert beir_table.materialise(folder, tmp_path / "elsewhere") == folder


def test_a_zip_and_a_bare_git_snapshot_give_the_same_folder(tmp_path):
    source = beir_layout(tmp_path / "work" / "data")
    archive = tmp_path / "arguana.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in source.iterdir():
            z.write(path, f"arguana/{path.name}")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path / "work")]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "data"], check=True)
    bare = tmp_path / "snapshot" / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(tmp_path / "work"), str(bare)], check=True)
    from_zip = beir_table.find_dataset(str(archive), None, tmp_path / "cache")
    from_git = beir_table.find_dataset(None, str(bare), tmp_path / "cache")  # the known name
    assert from_zip == from_git  # same name, same content key
    check_converted(from_git)


@pytest.fixture(autouse=True)
def no_sources_in_the_environment(monkeypatch):
    monkeypatch.delenv("RAG_BENCH_BEIR", raising=False)
    monkeypatch.delenv("RAG_BENCH_MIRROR", raising=False)


def test_nothing_named_says_how_to_get_it(tmp_path):
    with pytest.raises(SystemExit) as exit_:
        beir_table.find_dataset(None, None, tmp_path / "cache")
    message = str(exit_.value)
    assert beir_table.KNOWN["repository"] in message and "arguana.zip" in message
    assert "Hugging Face" in message and "/work" not in message


def test_a_named_source_that_is_absent_is_refused_not_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_BENCH_BEIR", str(beir_layout(tmp_path / "there")))
    with pytest.raises(SystemExit) as exit_:
        beir_table.find_dataset(str(tmp_path / "absent"), None, tmp_path / "cache")
    assert str(tmp_path / "absent") in str(exit_.value)
    found = beir_table.find_dataset(None, None, tmp_path / "cache")  # the variable alone
    assert found.name.startswith("there-")


def test_beir_scores_drop_the_query_itself_and_count_every_judged_query(tmp_path):
    folder = beir_table.materialise(beir_layout(tmp_path / "src"), tmp_path / "cache")
    retrieved = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q1", "q1"],
            "stage": ["documents", "documents", "documents", "bm25"],
            "rank": [1, 2, 3, 1],
            "doc_id": ["q1", "d1", "d2", "d2"],
        }
    )
    result = SimpleNamespace(tables={"retrieved": retrieved})
    scores = beir_table.beir_scores(result, folder)
    # q1: its own document dropped, d1 first (nDCG 1); q2: never run, its document absent: 0
    assert scores == {"ndcg@10": 0.5, "recall@100": 0.5}


def test_the_results_file_keeps_the_rows_of_other_parts(tmp_path, monkeypatch):
    monkeypatch.setattr(beir_table, "RESULTS_DIR", tmp_path)
    out, folder = tmp_path / "beir-x.json", Path("x-0123")

    def row(chunking, variant, encoder, value):
        return {"chunking": chunking, "variant": variant, "encoder": encoder, "ndcg@10": value}

    beir_table.save(out, folder, [row("default chunks", "baseline", "-", 0.1)])
    whole = [row("whole documents", "hybrid", "minilm", 0.2)]
    whole += [row("whole documents", "baseline", "-", 0.3)]
    beir_table.save(out, folder, whole)
    beir_table.save(out, folder, [row("default chunks", "baseline", "-", 0.4)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["chunking"], r["variant"], r["ndcg@10"]) for r in rows] == [
        ("whole documents", "baseline", 0.3),
        ("whole documents", "hybrid", 0.2),
        ("default chunks", "baseline", 0.4),
    ]


def test_the_dense_stage_counts_each_document_at_its_best_chunk(tmp_path):
    folder = beir_table.materialise(beir_layout(tmp_path / "src"), tmp_path / "cache")
    retrieved = pd.DataFrame(
        {
            "query_id": ["q1"] * 5,
            "stage": ["dense"] * 4 + ["documents"],
            "rank": [1, 2, 3, 4, 1],
            "doc_id": ["q1", "d2", "d1", "d2", "d1"],
        }
    )
    dense = beir_table.beir_evaluation(retrieved, folder, "dense").wide()
    # q1's own argument dropped, d2 once (its best chunk), d1 second; q2 never run: 0
    assert dense["ndcg@10"].to_dict() == pytest.approx({"q1": 1 / np.log2(3), "q2": 0.0})
    assert dense["recall@100"].to_dict() == {"q1": 1.0, "q2": 0.0}


def test_paired_comparisons_use_rag_bench_statistics_on_per_query_differences():
    queries = pd.Index(["a", "b", "c", "d", "e"], name="query_id")

    def scores(ndcg, recall):
        return pd.DataFrame({"ndcg@10": ndcg, "recall@100": recall}, index=queries)

    scored = {
        ("whole documents", "baseline", "-"): scores([0.5, 0.2, 0.0, 1.0, 0.3], [1, 1, 0, 1, 1]),
        ("whole documents", "hybrid", "minilm"): scores([0.9, 0.2, 0.4, 0.6, 0.8], [1, 1, 1, 1, 1]),
        ("whole documents", "hybrid_rerank", "minilm"): scores([1.0] * 5, [1, 1, 1, 1, 1]),
        ("default chunks", "hybrid", "lsa"): scores([0.1] * 5, [0] * 5),  # no baseline: no pair
    }
    entries = beir_table.paired(scored)
    assert [(e["b"], e["a"], e["metric"]) for e in entries] == [
        (["hybrid", "minilm"], ["baseline", "-"], "ndcg@10"),
        (["hybrid", "minilm"], ["baseline", "-"], "recall@100"),
        (["hybrid_rerank", "minilm"], ["hybrid", "minilm"], "ndcg@10"),
        (["hybrid_rerank", "minilm"], ["hybrid", "minilm"], "recall@100"),
    ]
    first = entries[0]
    d = np.array([0.4, 0.0, 0.4, -0.4, 0.5])
    assert (first["queries"], first["better"], first["worse"]) == (5, 3, 1)
    assert first["delta"] == pytest.approx(d.mean())
    assert first["ci95"] == pytest.approx(list(bootstrap_ci(d)))
    assert first["p"] == pytest.approx(randomization_test(d))
    assert (entries[3]["delta"], entries[3]["better"], entries[3]["p"]) == (0.0, 0, 1.0)


TOPICS = ["cats purr", "dogs bark", "birds sing", "fish swim", "trees grow", "rivers flow"]


def argument_corpus(folder: Path) -> Path:
    """An ArguAna-like corpus: each query is a 'pro' argument that is itself in the corpus, its
    counter-argument relevant; one query is not in the corpus, one's counter-argument is
    missing from it."""
    docs, queries = [], []
    qrels = ["query-id\tcorpus-id\tscore"]
    for i, topic in enumerate(TOPICS):
        docs.append({"_id": f"pro{i}", "text": f"{topic} often since {topic} is good and fine"})
        docs.append({"_id": f"con{i}", "text": f"no: {topic} rarely, and it is not good at all"})
        queries.append({"_id": f"pro{i}", "text": docs[-2]["text"]})
        qrels.append(f"pro{i}\tcon{i}\t1")
    queries += [{"_id": "outside", "text": "do bees buzz?"}, {"_id": "pro0x", "text": "cats"}]
    qrels += ["outside\tcon1\t1", "pro0x\tgone\t1"]
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl.gz").write_bytes(gzip.compress(jsonl(docs)))
    (folder / "queries.jsonl.gz").write_bytes(gzip.compress(jsonl(queries)))
    (folder / "test.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def test_the_summary_is_computed_from_the_stored_runs(tmp_path):
    folder = beir_table.materialise(argument_corpus(tmp_path / "args"), tmp_path / "datasets")
    runs = tmp_path / "runs"
    rows = []
    for variant, overrides in (("baseline", []), ("hybrid", ["encoder.name=lsa"])):
        result = run_variant(
            variant,
            folder,
            overrides=["chunker.name=none", *overrides],
            ks=(10, 100),
            depth=beir_table.DEPTH,
            runs_dir=runs,
            cache_dir=tmp_path / "index",
        )
        encoder = "-" if variant == "baseline" else "lsa"
        scores = beir_table.beir_scores(result, folder)
        rows.append({"chunking": "whole documents", "variant": variant, "encoder": encoder})
        rows[-1].update(scores, run_id=result.run_id)
    summary = beir_table.summarise(rows, folder, runs)
    assert summary["corpus"] == {
        "documents": 12,
        "queries": 8,
        "queries_in_corpus": 6,
        "queries_relevant_absent": 1,
        "chunks": {"whole documents": 12},
        "chunks_per_document": {"whole documents": 1.0},
    }
    (dense,) = summary["dense_alone"]
    stored = open_runs(runs).retrieved(rows[1]["run_id"])
    expected = beir_table.beir_evaluation(stored, folder, "dense").means()
    assert dense["stored"] and dense["run_id"] == rows[1]["run_id"]
    assert {m: dense[m] for m in beir_table.METRICS} == expected
    unstored = beir_table.dense_alone(rows[1], stored[stored["stage"] != "dense"], folder)
    assert unstored["stored"] is False and "ndcg@10" not in unstored
    assert [(e["b"], e["metric"], e["queries"]) for e in summary["paired"]] == [
        (["hybrid", "lsa"], "ndcg@10", 8),
        (["hybrid", "lsa"], "recall@100", 8),
    ]
    assert beir_table.summarise(rows, folder, runs) == summary  # seeded: the same bit for bit
    rows[0]["ndcg@10"] += 0.01  # a row that does not describe its run is refused
    with pytest.raises(SystemExit, match=rows[0]["run_id"]):
        beir_table.summarise(rows, folder, runs)
