"""Checkpoint records: one answered query as the JSON object a checkpoint keeps
(:mod:`rag_bench.runs.checkpoint`), and back.

A record holds what answering computed (the generation, its claims, the judge's verdicts and
relevance grade, the answering stages' latencies) under the query id and the key of what the
answer was computed from. It is written only when it reads back equal, so a resumed run stores
the same traces as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rag_bench.model import Claim, Generation, QueryResult, Relevance, Verdict
from rag_bench.pipeline import ANSWER_STAGES


def answer_record(query_id: str, key: str, result: QueryResult) -> dict | None:
    """A result's generation, claims and verdicts as a JSON-able checkpoint record, or None
    when they would not come back equal from JSON (then the query is recomputed on resume)."""
    record = {
        "query_id": query_id,
        "key": key,
        "generation": dataclasses.asdict(result.generation),
        "claims": [dataclasses.asdict(c) for c in result.claims],
        "verdicts": [dataclasses.asdict(v) for v in result.verdicts],
        "relevance": None if result.relevance is None else dataclasses.asdict(result.relevance),
        "latency_ms": {s: result.latency_ms.get(s) for s in ANSWER_STAGES},
    }
    try:
        back = json.loads(json.dumps(record, ensure_ascii=False, allow_nan=False))
        same = (
            _rebuild(Generation, back["generation"]) == result.generation
            and [_rebuild(Claim, c) for c in back["claims"]] == list(result.claims)
            and [_rebuild(Verdict, v) for v in back["verdicts"]] == list(result.verdicts)
            and _relevance(back.get("relevance")) == result.relevance
        )
    except (TypeError, ValueError):
        return None
    return back if same else None


def restored_answer(record: dict | None) -> QueryResult | None:
    """A record's answer as a result without rankings (no stages, no context; ``latency_ms``
    of the answering stages only), or None when the record is missing or not usable."""
    if record is None:
        return None
    try:
        generation = _rebuild(Generation, record["generation"])
        claims = [_rebuild(Claim, c) for c in record["claims"]]
        verdicts = [_rebuild(Verdict, v) for v in record["verdicts"]]
        relevance = _relevance(record.get("relevance"))
        latency = {**record["latency_ms"]}
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if len(verdicts) != len(claims):
        return None
    return QueryResult({}, generation, claims, verdicts, [], latency, relevance)


def _rebuild(cls, data: dict) -> Any:
    """A frozen dataclass from its JSON form (lists back to tuples where the field is one)."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            value = data[f.name]
            if isinstance(value, list) and str(f.type).startswith("tuple"):
                value = tuple(value)
            kwargs[f.name] = value
    return cls(**kwargs)


def _relevance(data: dict | None) -> Relevance | None:
    return None if data is None else _rebuild(Relevance, data)
