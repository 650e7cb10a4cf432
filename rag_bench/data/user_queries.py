"""Real user queries: a file of production queries, run against a dataset's corpus.

The file is JSONL in the dataset's ``queries.jsonl`` form (at least ``_id`` and ``text``), or
plain text with one query a line (its id is ``u-`` and the first 12 hex digits of the text's
sha256, so the same question keeps its id from one file to the next). Such queries carry no
labels: the answer-side metrics that need none are computed, the ranking and correctness
metrics are NULL (see :func:`unlabelled`), and the run keeps each query's text and rankings for
a pool of pairs to review.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from rag_bench.data.dataset import Dataset, load_queries
from rag_bench.errors import DataError
from rag_bench.io.textfile import text_lines
from rag_bench.model import Query


def _is_jsonl(path: Path) -> bool:
    for _, line in text_lines(path):
        return line.lstrip().startswith("{")
    raise DataError(path, "the queries file is empty", "write one query a line")


def read_user_queries(path: str | Path) -> dict[str, Query]:
    """The queries of a file of user queries, by id (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "no such queries file", "check the path")
    if _is_jsonl(path):
        return load_queries(path)[0]
    queries: dict[str, Query] = {}
    lines: dict[str, int] = {}
    for number, line in text_lines(path):
        text = line.strip()
        if not text:
            continue
        query_id = "u-" + hashlib.sha256(text.encode()).hexdigest()[:12]
        if query_id in queries:
            raise DataError(
                path,
                f"the query repeats line {lines[query_id]}",
                "keep each question once",
                number,
            )
        queries[query_id], lines[query_id] = Query(query_id, text), number
    if not queries:
        raise DataError(path, "the queries file holds no query", "write one query a line")
    return queries


def with_user_queries(data: Dataset, path: str | Path) -> Dataset:
    """``data`` with the queries of ``path`` in place of its own: the same corpus and qrels
    (a query whose id the qrels judge is scored as usual), another content hash (these are
    other queries), and the file named in the manifest's dataset record."""
    path = Path(path)
    queries = read_user_queries(path)
    content = path.read_bytes()
    file_sha = hashlib.sha256(content).hexdigest()
    sha256 = hashlib.sha256(f"{data.sha256}\n{file_sha}".encode()).hexdigest()
    record = {
        "queries_file": {
            "file": path.name,
            "sha256": file_sha,
            "n_queries": len(queries),
        }
    }
    answers = {q: a for q, a in data.answers.items() if q in queries}
    return dataclasses.replace(
        data, queries=queries, answers=answers, sha256=sha256, provenance=record
    )


def unlabelled(queries, data: Dataset) -> list[str]:
    """The ids of the queries (answerable ones: an unanswerable query needs no judgement)
    that the dataset's qrels do not judge at all."""
    judged = set(data.qrels.frame["query_id"].astype(str))
    return [q.id for q in queries if not q.should_refuse and q.id not in judged]


def unlabelled_record(queries, data: Dataset) -> dict:
    """What a run's manifest says of its queries without labels (nothing when there are none,
    so the manifests of labelled runs stay as they were)."""
    n = len(unlabelled(queries, data))
    return {"unlabelled": n} if n else {}


def unlabelled_note(n: int) -> str:
    """The line a run prints when some of its queries have no labels."""
    return (
        f"{n} quer{'y has' if n == 1 else 'ies have'} no labels: ranking and correctness "
        "metrics are NULL"
    )
