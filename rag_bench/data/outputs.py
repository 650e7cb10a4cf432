"""A system's outputs to import: one record per query, in JSON Lines, CSV or Parquet.

Each record names the query, what the system retrieved (in order) and what it answered::

    {"query_id": "q1", "retrieved": ["d3", "d1"], "answer": "Returns take 30 days [d1]."}
    {"query_id": "q2", "retrieved": [{"doc_id": "d2", "text": "Refunds are paid...", "score": 7.1}],
     "answer": "Refunds are paid within 5 days [d2].", "context_k": 5, "latency_ms": 840}

``retrieved`` lists document ids, or passages with their document id and optionally their text,
a chunk id and a score. Passages with text are what the claims are judged against (the
system's own context); with ids only, the whole documents are. ``context_k`` says how many of
the retrieved passages the generator saw (default: all); it must be the same in every record.
In CSV, ``retrieved`` holds a JSON list or ids separated by ``;``. Latency and cost are optional.

Every problem names the file and the line (row, in Parquet) and how to fix it.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_bench.data.answers import RecordedAnswer
from rag_bench.errors import DataError, first_line
from rag_bench.io.jsonl import field as get
from rag_bench.io.jsonl import read_jsonl
from rag_bench.io.textfile import text_lines
from rag_bench.model import Chunk

FORMATS = ("jsonl", "csv", "parquet")
OPTIONAL_NUMBERS = ("latency_ms", "cost_usd")


@dataclass(frozen=True)
class Outputs:
    """The records of an outputs file, keyed by query id, and what was left out."""

    path: Path
    sha256: str
    answers: dict[str, RecordedAnswer]
    missing: tuple[str, ...]  # evaluated queries the file has no record for
    context_k: int | None


def outputs_format(path: Path) -> str:
    suffix = path.suffix.lower().lstrip(".")
    kind = {"jsonl": "jsonl", "json": "jsonl", "ndjson": "jsonl", "csv": "csv"}.get(suffix)
    kind = kind or ("parquet" if suffix in ("parquet", "pq") else None)
    if kind is None:
        raise DataError(
            path,
            f"unknown outputs format {path.suffix!r}",
            "name the file .jsonl, .csv or .parquet",
        )
    return kind


def load_outputs(path: str | Path, docs: Mapping, queries: Mapping) -> Outputs:
    """Read and check an outputs file against a dataset's documents and evaluated queries."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "no such outputs file", "give the path of a .jsonl, .csv or .parquet")
    return read_outputs(_records(path), path, docs, queries, _digest(path))


def outputs_from(records, docs: Mapping, queries: Mapping) -> Outputs:
    """Outputs given in memory: a list of record dicts or a pandas DataFrame with one row per
    query (columns as in the file format); problems name the record's position (``row N``)."""
    rows = records.to_dict("records") if hasattr(records, "to_dict") else list(records)
    numbered = [(n, _without_missing(r)) for n, r in enumerate(rows, start=1)]
    digest = hashlib.sha256(json.dumps(rows, default=str, sort_keys=True).encode()).hexdigest()
    return read_outputs(numbered, Path("<records>"), docs, queries, digest)


def _without_missing(record: object) -> object:
    """A DataFrame row without its empty cells (NaN, None), lists made plain."""
    if not isinstance(record, dict):
        return record
    out = {}
    for key, value in record.items():
        if hasattr(value, "tolist"):
            value = value.tolist()
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        out[key] = value
    return out


def read_outputs(records, path: Path, docs: Mapping, queries: Mapping, sha256: str) -> Outputs:
    """Check numbered records (line or row, record) against the dataset; ``path`` names them
    in errors."""
    answers: dict[str, RecordedAnswer] = {}
    lines: dict[str, int] = {}
    context_ks: dict[int | None, int] = {}
    for line, record in records:
        if not isinstance(record, dict):
            raise DataError(path, "a record is not an object", "give one mapping per query", line)
        answer, context_k = _answer(record, docs, path, line)
        if answer.query_id not in queries:
            raise DataError(
                path,
                f"query {answer.query_id!r} is not an evaluated query of the dataset",
                "correct the id, or judge the query in the dataset's qrels",
                line,
            )
        if answer.query_id in answers:
            raise DataError(
                path,
                f"query {answer.query_id!r} has a second record "
                f"(first on line {lines[answer.query_id]})",
                "keep one record per query",
                line,
            )
        answers[answer.query_id] = answer
        lines[answer.query_id] = line
        context_ks.setdefault(context_k, line)
    if not answers:
        raise DataError(path, "the outputs hold no record", "write one record per query")
    if len(context_ks) > 1:
        (first, _), (second, line) = sorted(context_ks.items(), key=lambda kv: kv[1])[:2]
        raise DataError(
            path,
            f"context_k is {second} here but {first} on line {context_ks[first]}",
            "give every record the same context_k (or none)",
            line,
        )
    _check_passages(answers, path, lines)
    missing = tuple(q for q in queries if q not in answers)
    return Outputs(path, sha256, answers, missing, next(iter(context_ks)))


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    kind = outputs_format(path)
    if kind == "jsonl":
        yield from read_jsonl(path, "outputs")
    elif kind == "csv":
        yield from _csv_records(path)
    else:
        yield from _parquet_records(path)


def _csv_records(path: Path) -> Iterator[tuple[int, dict]]:
    rows = text_lines(path)
    header_line, header = next(rows, (1, ""))
    names = next(csv.reader([header]))
    if "query_id" not in names:
        raise DataError(
            path,
            "the header row has no query_id column",
            "start with a header row: query_id,retrieved,answer",
            header_line,
        )
    for number, line in rows:
        values = next(csv.reader([line]), [])
        if len(values) != len(names):
            raise DataError(
                path,
                f"{len(values)} fields where the header has {len(names)}",
                "quote fields that contain commas",
                number,
            )
        record = {k: v for k, v in zip(names, values) if v != ""}
        for name in ("context_k", *OPTIONAL_NUMBERS):
            if name in record:
                record[name] = _number(record[name], name, path, number)
        if "retrieved" in record:
            record["retrieved"] = _id_list(record["retrieved"], path, number)
        yield number, record


def _number(text: str, name: str, path: Path, line: int) -> float | int:
    try:
        value = float(text)
    except ValueError:
        raise DataError(
            path, f"{name} {text!r} is not a number", f"give {name} a number", line
        ) from None
    return int(value) if value.is_integer() and name == "context_k" else value


def _id_list(text: str, path: Path, line: int) -> list:
    if text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(
                path, f"retrieved is not a valid JSON list ({exc.msg})", 'write ["d1", "d2"]', line
            ) from None
    return [part.strip() for part in text.split(";") if part.strip()]


def _parquet_records(path: Path) -> Iterator[tuple[int, dict]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        message = first_line(exc)
        raise DataError(path, f"not a readable Parquet file ({message})", "rewrite it") from None
    for number, row in enumerate(table.to_pylist(), start=1):
        yield number, {k: v for k, v in row.items() if v is not None}


def _answer(
    record: dict, docs: Mapping, path: Path, line: int
) -> tuple[RecordedAnswer, int | None]:
    query_id = get(record, "query_id", str, path, line, required=True)
    retrieved = get(record, "retrieved", list, path, line, required=True)
    passages = [_passage(item, docs, path, line) for item in retrieved]
    context_k = get(record, "context_k", int, path, line)
    if context_k is not None and context_k < 1:
        raise DataError(path, f"context_k {context_k} is below 1", "give a positive count", line)
    for name in OPTIONAL_NUMBERS:
        value = get(record, name, (int, float), path, line)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise DataError(path, f"{name} {value} is not a number >= 0", f"fix {name}", line)
    texts = [p for p in passages if p[1] is not None]
    if texts and len(texts) != len(passages):
        raise DataError(
            path,
            "some retrieved passages have a text and some do not",
            "give every passage its text, or none",
            line,
        )
    scores = [p[3] for p in passages]
    answer = RecordedAnswer(
        query_id=query_id,
        ranking=tuple(p[0] for p in passages),
        answer=get(record, "answer", str, path, line, required=True),
        claims=(),
        passages=tuple(_chunk(p, docs) for p in passages) if texts else (),
        scores=tuple(scores) if all(s is not None for s in scores) and scores else None,
        latency_ms=get(record, "latency_ms", (int, float), path, line),
        cost_usd=get(record, "cost_usd", (int, float), path, line),
    )
    return answer, context_k


def _passage(item: object, docs: Mapping, path: Path, line: int):
    """(doc id, text or None, chunk id or None, score or None) of one retrieved item."""
    if isinstance(item, str):
        doc_id, text, chunk_id, score = item, None, None, None
    elif isinstance(item, dict):
        doc_id = get(item, "doc_id", str, path, line, required=True)
        text = get(item, "text", str, path, line)
        chunk_id = get(item, "chunk_id", str, path, line)
        score = get(item, "score", (int, float), path, line)
        if score is not None and not math.isfinite(score):
            raise DataError(path, f"score {score} is not finite", "give a finite score", line)
    else:
        raise DataError(
            path,
            f"a retrieved item is a {type(item).__name__}",
            'list document ids, or objects {"doc_id": ..., "text": ...}',
            line,
        )
    if doc_id not in docs:
        raise DataError(
            path,
            f"retrieved document {doc_id!r} is not in the dataset's corpus",
            "correct the id, or evaluate on the dataset the system searched",
            line,
        )
    return doc_id, text, chunk_id, None if score is None else float(score)


def _chunk(passage, docs: Mapping) -> Chunk:
    doc_id, text, chunk_id, _ = passage
    doc = docs[doc_id]
    start = max(doc.text.find(text), 0)
    if chunk_id is None:
        chunk_id = f"{doc_id}#{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return Chunk(chunk_id, doc_id, start, start + len(text), text, doc.title)


def _check_passages(answers: dict[str, RecordedAnswer], path: Path, lines: dict) -> None:
    """A chunk id names one passage: the same id with two texts is an error."""
    seen: dict[str, tuple[Chunk, str]] = {}
    for query_id, answer in answers.items():
        for chunk in answer.passages:
            first = seen.setdefault(chunk.chunk_id, (chunk, query_id))
            if (first[0].text, first[0].doc_id) != (chunk.text, chunk.doc_id):
                raise DataError(
                    path,
                    f"chunk {chunk.chunk_id!r} has another text or document than in the record of "
                    f"{first[1]!r} (line {lines[first[1]]})",
                    "give each distinct passage its own chunk_id",
                    lines[query_id],
                )


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
