"""Human-labelled items for measuring a judge: a labels JSONL file.

One JSON object per line, either an answer or a single claim, with the passages it was written
from and a human label::

    {"id": "a1", "context": ["passage", ...], "answer": "...", "label": "unsupported"}
    {"id": "c1", "context": "one passage", "claim": "...", "label": "supported"}

``label`` is ``supported`` (every statement is backed by the context) or ``unsupported`` (some
statement is not: a hallucination). ``context`` is a passage or a list of them. Optional:
``question`` (what the answer answers), ``claims`` on an answer (its statements, each
``{"claim": ..., "label": ...}``, scored at claim level too), ``group`` (items that must stay on
one side of a train/test split, e.g. one question), ``source`` (a sub-collection to report).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag_bench.errors import DataError
from rag_bench.io.jsonl import field, read_jsonl

LABELS = {"supported": True, "unsupported": False}


@dataclass(frozen=True)
class LabelledClaimText:
    text: str
    supported: bool


@dataclass(frozen=True)
class LabelledItem:
    """An answer (``is_answer``) or a lone claim, its context passages and human label(s)."""

    id: str
    context: tuple[str, ...]
    text: str
    supported: bool
    is_answer: bool
    question: str = ""
    claims: tuple[LabelledClaimText, ...] = ()
    group: str = ""
    source: str = ""


def _label(value: object, path: Path, line: int, where: str = "label") -> bool:
    if value not in LABELS:
        raise DataError(
            path,
            f"{where} is {value!r}, not 'supported' or 'unsupported'",
            f'write "{where.split(".")[-1]}": "supported" or "unsupported"',
            line,
        )
    return LABELS[value]


def _context(record: dict, path: Path, line: int) -> tuple[str, ...]:
    value = record.get("context", record.get("contexts"))
    passages = [value] if isinstance(value, str) else value
    if not isinstance(passages, list) or not all(isinstance(p, str) for p in passages):
        raise DataError(
            path,
            "context must be a passage or a list of passages (strings)",
            'add "context": ["passage", ...]',
            line,
        )
    kept = tuple(p for p in passages if p.strip())
    if not kept:
        raise DataError(
            path, "the context is empty", "give the passages the text was written from", line
        )
    return kept


def _claims(record: dict, path: Path, line: int) -> tuple[LabelledClaimText, ...]:
    claims = field(record, "claims", list, path, line, default=[])
    out = []
    for i, claim in enumerate(claims):
        text = claim.get("claim") if isinstance(claim, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise DataError(
                path,
                f"claims[{i}] has no claim text",
                'write each as {"claim": "...", "label": "supported"}',
                line,
            )
        out.append(
            LabelledClaimText(text, _label(claim.get("label"), path, line, f"claims[{i}].label"))
        )
    return tuple(out)


def _item(record: dict, path: Path, line: int) -> LabelledItem:
    item_id = field(record, "id", str, path, line, required=True)
    has_answer, has_claim = "answer" in record, "claim" in record
    if has_answer == has_claim:
        raise DataError(
            path,
            "an item has either an 'answer' or a 'claim'"
            + (" (it has both)" if has_answer else ""),
            'write "answer": "..." for a whole answer, or "claim": "..." for one statement',
            line,
        )
    text = field(record, "answer" if has_answer else "claim", str, path, line, required=True)
    if not text.strip():
        raise DataError(path, "the answer or claim is empty", "give the text that was judged", line)
    return LabelledItem(
        id=item_id,
        context=_context(record, path, line),
        text=text,
        supported=_label(record.get("label"), path, line),
        is_answer=has_answer,
        question=field(record, "question", str, path, line, default=""),
        claims=_claims(record, path, line) if has_answer else (),
        group=field(record, "group", str, path, line, default="") or item_id,
        source=field(record, "source", str, path, line, default=""),
    )


def load_labels(path: str | Path) -> list[LabelledItem]:
    """The items of a labels JSONL file; a malformed line is a :class:`DataError` naming it."""
    path = Path(path)
    items: list[LabelledItem] = []
    seen: dict[str, int] = {}
    for line, record in read_jsonl(path, "labels"):
        item = _item(record, path, line)
        if item.id in seen:
            raise DataError(
                path,
                f"id {item.id!r} repeats line {seen[item.id]}",
                "give every item its own id",
                line,
            )
        seen[item.id] = line
        items.append(item)
    if not items:
        raise DataError(path, "no labelled items", "write one JSON object per line")
    return items
