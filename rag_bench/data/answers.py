"""Recorded answers (``answers.jsonl``): what a production system retrieved and said, with
claim-level labels of which documents each claim cites and which truly support it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_bench.errors import DataError
from rag_bench.io.jsonl import field as get
from rag_bench.io.jsonl import read_jsonl
from rag_bench.model import Chunk


@dataclass(frozen=True)
class LabelledClaim:
    text: str
    citations: tuple[str, ...] = ()
    supported_by: tuple[str, ...] | None = None  # None: not labelled


@dataclass(frozen=True)
class RecordedAnswer:
    query_id: str
    ranking: tuple[str, ...]
    answer: str
    claims: tuple[LabelledClaim, ...]
    expected_failure_class: str | None = None
    # from an imported outputs file: the retrieved passages (aligned with ``ranking``, empty
    # when only ids were given), their scores, and what answering cost
    passages: tuple[Chunk, ...] = ()
    scores: tuple[float, ...] | None = None
    latency_ms: float | None = None
    cost_usd: float | None = None


def _doc_list(
    record: dict, name: str, docs: Mapping, path: Path, line: int
) -> tuple[str, ...] | None:
    values = get(record, name, list, path, line)
    if values is None:
        return None
    for value in values:
        if not isinstance(value, str):
            raise DataError(
                path, f"{name!r} must list document ids as strings", f'e.g. "{name}": ["d1"]', line
            )
        if value not in docs:
            raise DataError(
                path,
                f"{name!r} names document {value!r}, which is not in corpus.jsonl",
                "correct the id",
                line,
            )
    return tuple(values)


def _claims(record: dict, docs: Mapping, path: Path, line: int) -> tuple[LabelledClaim, ...]:
    claims = []
    for item in get(record, "claims", list, path, line, default=[]):
        if not isinstance(item, dict):
            raise DataError(
                path,
                "each claim must be a JSON object",
                'write {"text": ..., "citations": [...]}',
                line,
            )
        claims.append(
            LabelledClaim(
                text=get(item, "text", str, path, line, required=True),
                citations=_doc_list(item, "citations", docs, path, line) or (),
                supported_by=_doc_list(item, "supported_by", docs, path, line),
            )
        )
    return tuple(claims)


def load_answers(path: Path, docs: Mapping, queries: Mapping) -> dict[str, RecordedAnswer]:
    answers: dict[str, RecordedAnswer] = {}
    lines: dict[str, int] = {}
    for line, record in read_jsonl(path, "answers"):
        query_id = get(record, "query_id", str, path, line, required=True)
        if query_id not in queries:
            raise DataError(
                path,
                f"query {query_id!r} is not an evaluated query of this dataset",
                "correct the id or judge the query in the qrels",
                line,
            )
        if query_id in answers:
            raise DataError(
                path,
                f"query {query_id!r} has a second answer (first on line {lines[query_id]})",
                "keep one recorded answer per query",
                line,
            )
        answers[query_id] = RecordedAnswer(
            query_id=query_id,
            ranking=_doc_list(record, "ranking", docs, path, line) or (),
            answer=get(record, "answer", str, path, line, required=True),
            claims=_claims(record, docs, path, line),
            expected_failure_class=get(record, "expected_failure_class", str, path, line),
        )
        lines[query_id] = line
    return answers
