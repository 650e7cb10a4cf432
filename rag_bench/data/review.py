"""The review formats: review items (a pool file) and the labels a person gives them.

A pool file is JSONL, one item per line, each with a ``kind``:

- ``pair``: a (query, document) pair to grade 0-3 (written by ``rag-bench pool``);
- ``claim``: a claim of a run's answer whose judge verdict a person checks
  (``rag-bench pool --claims``);
- ``generated``: a proposed query to accept or reject (``rag-bench generate``).

A labels file is JSONL, one decision per line, each with ``kind``, ``labeller`` (non-empty) and
``labelled_at`` (ISO-8601 UTC), plus the item's key and the decision: ``grade`` (0-3) for a
pair, ``label`` (``supported`` | ``unsupported``) for a claim, ``accept`` (and optionally an
edited ``query``) for a generated query. A later line for the same item overrides an earlier
one: :func:`latest_labels` keeps the last decision per item.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from rag_bench.errors import DataError
from rag_bench.io.durable import write_output
from rag_bench.io.jsonl import field, finite, read_jsonl

KINDS = ("pair", "claim", "generated")
GRADES = (0, 1, 2, 3)
CLAIM_LABELS = ("supported", "unsupported")
# the fields each kind of item needs (str unless said), and the key that names one item
ITEM_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "pair": {"query_id": str, "query": str, "doc_id": str, "doc_text": str},
    "claim": {"run_id": str, "query_id": str, "query": str, "claim_index": int, "claim": str},
    "generated": {"query_id": str, "query": str},
}
KEY_FIELDS = {
    "pair": ("query_id", "doc_id"),
    "claim": ("run_id", "query_id", "claim_index"),
    "generated": ("query_id",),
}
_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def item_key(record: dict) -> tuple:
    """The identity of an item or a label: its kind and key fields (a label and the item it
    labels have the same key)."""
    kind = record["kind"]
    return (kind, *(record[name] for name in KEY_FIELDS[kind]))


def _kind(record: dict, path: Path, line: int) -> str:
    kind = record.get("kind")
    if kind is None:
        raise DataError(
            path, "the line has no kind", 'add "kind": "pair" (or "claim", "generated")', line
        )
    if kind not in KINDS:
        raise DataError(
            path,
            f"kind is {kind!r}, not one of {', '.join(KINDS)}",
            'write "kind": "pair", "claim" or "generated" on every line',
            line,
        )
    return kind


def _key_fields(record: dict, kind: str, path: Path, line: int) -> None:
    for name in KEY_FIELDS[kind]:
        kind_of = ITEM_FIELDS[kind][name]
        value = field(record, name, kind_of, path, line, required=True)
        record[name] = value  # an id written as a number reads as its string


def read_items(path: str | Path) -> list[dict]:
    """The review items of a pool file, in order; a malformed line, or an item repeated, is a
    :class:`DataError` naming the line."""
    path = Path(path)
    items: list[dict] = []
    seen: dict[tuple, int] = {}
    for line, record in read_jsonl(path, "review items"):
        kind = _kind(record, path, line)
        for name, kind_of in ITEM_FIELDS[kind].items():
            record[name] = field(record, name, kind_of, path, line, required=True)
        key = item_key(record)
        if key in seen:
            raise DataError(
                path, f"this item repeats line {seen[key]}", "list each item once", line
            )
        seen[key] = line
        items.append(record)
    return items


def _decision(record: dict, kind: str, path: Path, line: int) -> None:
    if kind == "pair":
        grade = record.get("grade")
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise DataError(
                path,
                f"grade is {json.dumps(grade)}, not a whole number",
                'write "grade": 0, 1, 2 or 3 (0 = not relevant)',
                line,
            )
        if grade not in GRADES:
            raise DataError(path, f"grade {grade} is outside 0..3", "grade from 0 to 3", line)
    elif kind == "claim":
        if record.get("label") not in CLAIM_LABELS:
            raise DataError(
                path,
                f"label is {record.get('label')!r}",
                'write "label": "supported" or "unsupported"',
                line,
            )
    else:
        field(record, "accept", bool, path, line, required=True)
        field(record, "query", str, path, line)


def check_label(record: dict, path: Path, line: int) -> dict:
    """``record`` as a valid label (ids as strings), else a :class:`DataError` at ``line``."""
    kind = _kind(record, path, line)
    _key_fields(record, kind, path, line)
    labeller = record.get("labeller")
    if not isinstance(labeller, str) or not labeller.strip():
        raise DataError(
            path,
            "the label names no labeller",
            'add "labeller": "<the person\'s name or handle>"',
            line,
        )
    when = field(record, "labelled_at", str, path, line, required=True)
    if not _UTC.match(when):
        raise DataError(
            path,
            f"labelled_at {when!r} is not an ISO-8601 UTC time",
            'write e.g. "2026-12-05T19:04:11Z"',
            line,
        )
    _decision(record, kind, path, line)
    return record


def read_labels(path: str | Path, missing_ok: bool = False) -> list[dict]:
    """Every label of a labels file, in order (``missing_ok``: none when there is no file)."""
    path = Path(path)
    if missing_ok and not path.exists():
        return []
    return [check_label(record, path, line) for line, record in read_jsonl(path, "labels")]


def latest_labels(labels: Iterable[dict]) -> dict[tuple, dict]:
    """The last label of each item (a later line overrides an earlier one), by :func:`item_key`."""
    latest: dict[tuple, dict] = {}
    for label in labels:
        latest[item_key(label)] = label
    return latest


def is_review_labels(path: str | Path) -> bool:
    """Whether a labels file is of the review format (its first object has a ``kind``), rather
    than the judge meta-evaluation format of :mod:`rag_bench.data.labels`."""
    for _, record in read_jsonl(Path(path), "labels"):
        return "kind" in record
    return False


def json_line(record: dict) -> str:
    """One item or label as a JSONL line (UTF-8 text kept as it is, keys in their order)."""
    return json.dumps(finite(record), ensure_ascii=False) + "\n"


def write_items(items: Iterable[dict], path: str | Path) -> None:
    """Write review items to a pool file, replacing it whole (atomically)."""
    write_output(path, "".join(json_line(i) for i in items).encode("utf-8"), "review items")
