"""benchmarks/beir_table.py's fetch-or-find and BEIR-convention scoring, on a tiny corpus in
each layout a public copy comes in."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import beir_table  # noqa: E402

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
    from_zip = beir_table.materialise(archive, tmp_path / "cache")
    from_git = beir_table.materialise(bare, tmp_path / "cache", name="arguana")
    assert from_zip == from_git  # same name, same content key
    check_converted(from_git)


def test_nothing_found_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.delenv("RAG_BENCH_BEIR", raising=False)
    monkeypatch.setenv("RAG_BENCH_MIRROR", str(tmp_path / "no-mirror"))
    with pytest.raises(SystemExit) as exit_:
        beir_table.find_dataset(str(tmp_path / "absent"), tmp_path / "cache")
    message = str(exit_.value)
    assert beir_table.KNOWN["repository"] in message and "arguana.zip" in message


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
