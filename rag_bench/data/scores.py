"""Scores a team already has, from the result files other evaluation tools write: a ragas
result table (``EvaluationResult.to_pandas()``, saved as CSV, or the DataFrame itself), a
DeepEval test run (the JSON ``evaluate`` saves in ``DEEPEVAL_RESULTS_FOLDER``) and a promptfoo
output file (``promptfoo eval -o results.json``).

Each record becomes one query's scores, ``<tool>:<metric>`` each (``ragas:faithfulness``,
``deepeval:answer_relevancy``, ``promptfoo:score``). A record names its query by an id when it
carries one (a ``query_id`` or ``id`` column in ragas, the test case's ``name`` or
``additional_metadata.query_id`` in DeepEval, ``vars.query_id`` in promptfoo) and otherwise by
its question's text, which must be a query of the dataset (compared with case and runs of
white space ignored). Without a dataset, the questions themselves are the queries.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rag_bench.errors import DataError, UnknownNameError, UsageError

PEERS = ("ragas", "deepeval", "promptfoo")  # the tools whose result files are read


def imported_name(tool: str, metric: str) -> str:
    """The name an imported score is stored under: ``<tool>:<metric>``, the metric lower-cased
    with runs of other characters as ``_`` (DeepEval's "Answer Relevancy" is
    ``deepeval:answer_relevancy``)."""
    plain = re.sub(r"[^a-z0-9.-]+", "_", metric.strip().lower()).strip("_")
    return f"{tool}:{plain or 'score'}"


# ragas' columns that hold the sample, not a score
RAGAS_SAMPLE_COLUMNS = (
    "user_input",
    "retrieved_contexts",
    "reference_contexts",
    "response",
    "multi_responses",
    "reference",
    "rubrics",
    "question",
    "answer",
    "contexts",
    "ground_truth",
    "ground_truths",
    "query_id",
    "id",
)
ID_FIELDS = ("query_id", "id")


@dataclass(frozen=True)
class ScoredRecord:
    """One record of a tool's result file: how it names its query, what was answered, and the
    tool's scores (None where the tool gave none, e.g. ragas' NaN after a failed LLM call)."""

    line: int  # the record's row (CSV line, position in the JSON list)
    query_id: str | None
    question: str | None
    answer: str | None
    scores: dict[str, float | None]


@dataclass(frozen=True)
class PeerScores:
    """The records of one result file, matched to a dataset's queries."""

    tool: str
    path: Path
    sha256: str
    scores: dict[str, ScoredRecord]  # by query id
    questions: dict[str, str]  # query id -> question, when the file defines the queries
    unmatched: tuple[int, ...] = ()  # records naming no query of the dataset (with drop_unknown)
    missing: tuple[str, ...] = ()  # the dataset's queries without a record
    metrics: tuple[str, ...] = field(default=())


def key(text: str) -> str:
    """A question as it is matched: case-folded, white space collapsed."""
    return " ".join(text.split()).casefold()


def question_id(question: str) -> str:
    """The id of a question when no dataset names it: a hash of its matched form."""
    return "q-" + hashlib.sha256(key(question).encode()).hexdigest()[:12]


# --- reading each tool's file ------------------------------------------------------------


def ragas_records(table) -> list[ScoredRecord]:
    """The rows of a ragas result table (a DataFrame, as ``EvaluationResult.to_pandas()``
    gives it, or read from its CSV): every numeric column but the sample's is a score."""
    import pandas as pd

    frame = table.loc[:, [c for c in table.columns if not str(c).startswith("Unnamed:")]]
    question = _first_column(frame, ("user_input", "question"))
    answer = _first_column(frame, ("response", "answer"))
    metrics = [
        c
        for c in frame.columns
        if c not in RAGAS_SAMPLE_COLUMNS and pd.api.types.is_numeric_dtype(frame[c])
    ]
    records = []
    for line, row in enumerate(frame.to_dict("records"), start=2):
        records.append(
            ScoredRecord(
                line,
                _text(next((row.get(f) for f in ID_FIELDS if _text(row.get(f))), None)),
                _text(row.get(question)) if question else None,
                _text(row.get(answer)) if answer else None,
                {imported_name("ragas", str(m)): _number(row[m]) for m in metrics},
            )
        )
    return records


def deepeval_records(run: Mapping) -> list[ScoredRecord]:
    """The test cases of a DeepEval test run (``testCases``, each with its ``metricsData``)."""
    cases = run.get("testCases")
    if not isinstance(cases, list):
        raise ValueError("no testCases list")
    records = []
    for line, case in enumerate(cases, start=1):
        metadata = case.get("additionalMetadata") or {}
        name = case.get("name")
        given = metadata.get("query_id") if isinstance(metadata, dict) else None
        scores = {
            imported_name("deepeval", str(m.get("name"))): _number(m.get("score"))
            for m in case.get("metricsData") or []
        }
        records.append(
            ScoredRecord(
                line,
                _text(given) or (_text(name) if not _automatic_name(name) else None),
                _text(case.get("input")),
                _text(case.get("actualOutput")),
                scores,
            )
        )
    return records


def promptfoo_records(output: Mapping, system: str | None = None) -> list[ScoredRecord]:
    """The results of a promptfoo output file of one system (provider and prompt): each
    result's score and pass (1 or 0) and its named scores (the assertions' ``metric``)."""
    results = output.get("results")
    results = results.get("results") if isinstance(results, dict) else None
    if not isinstance(results, list):
        raise ValueError("no results.results list")
    systems = list(dict.fromkeys(_system(r) for r in results))
    if system is None and len(systems) > 1:
        raise UsageError(
            f"the file holds {len(systems)} systems: {', '.join(systems)}",
            "import one at a time with --system (library: system=)",
        )
    if system is not None and system not in systems:
        raise UnknownNameError("system (provider · prompt) of the file", system, systems)
    chosen = system or systems[0]
    records = []
    for line, result in enumerate(results, start=1):
        if _system(result) != chosen:
            continue
        variables = result.get("vars") or {}
        named = result.get("namedScores") or {}
        scores = {
            "promptfoo:score": _number(result.get("score")),
            "promptfoo:pass": 1.0 if result.get("success") else 0.0,
            **{imported_name("promptfoo", str(k)): _number(v) for k, v in named.items()},
        }
        records.append(
            ScoredRecord(
                line,
                _text(next((variables.get(f) for f in ID_FIELDS if variables.get(f)), None)),
                _question_var(variables),
                _text((result.get("response") or {}).get("output")),
                scores,
            )
        )
    return records


def _system(result: Mapping) -> str:
    provider = result.get("provider") or {}
    provider = provider.get("label") or provider.get("id") if isinstance(provider, dict) else None
    prompt = result.get("prompt") or {}
    label = prompt.get("label") or prompt.get("raw") if isinstance(prompt, dict) else None
    return f"{provider or '?'} · {label or '?'}"


def _question_var(variables: Mapping) -> str | None:
    for name in ("query", "question", "input", "user_input"):
        if isinstance(variables.get(name), str):
            return variables[name]
    return None


def _automatic_name(name: object) -> bool:
    """DeepEval's own names of unnamed test cases: ``test_case_0``, ``test_case_1``, …"""
    return not isinstance(name, str) or name.removeprefix("test_case_").isdigit()


def _first_column(frame, names: Iterable[str]) -> str | None:
    return next((n for n in names if n in frame.columns), None)


def _text(value: object) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


# --- the file as a whole -------------------------------------------------------------------


def detect_tool(path: Path) -> str:
    """Which tool wrote ``path``: a CSV is ragas'; a JSON object with ``testCases`` DeepEval's,
    with ``results.results`` promptfoo's."""
    if path.suffix.lower() in (".csv", ".tsv"):
        return "ragas"
    data = _json(path)
    if isinstance(data, dict) and "testCases" in data:
        return "deepeval"
    if isinstance(data, dict) and isinstance(data.get("results"), dict):
        return "promptfoo"
    raise DataError(
        path,
        "not a result file of ragas (CSV), DeepEval (testCases) or promptfoo (results.results)",
        f"give --tool {' or '.join(PEERS)}",
    )


def read_records(path: Path, tool: str, system: str | None = None) -> list[ScoredRecord]:
    """The records of a result file written by ``tool``; a malformed file is one line naming
    it and the fix."""
    if tool not in PEERS:
        raise UnknownNameError("tool", tool, list(PEERS))
    try:
        if tool == "ragas":
            import pandas as pd

            sep = "\t" if path.suffix.lower() == ".tsv" else ","
            return ragas_records(pd.read_csv(path, sep=sep))
        if tool == "deepeval":
            return deepeval_records(_json(path))
        return promptfoo_records(_json(path), system)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        why = f"not a {tool} result file ({exc})"
        raise DataError(path, why, f"give a file {tool} wrote") from None


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(
            path, f"not readable JSON ({exc})", "give the file the tool wrote"
        ) from None


def match_queries(
    records: list[ScoredRecord],
    path: Path,
    queries: Mapping | None,
    drop_unknown: bool = False,
) -> tuple[dict[str, ScoredRecord], dict[str, str], tuple[int, ...]]:
    """Each record's query id: its own id when the dataset has it (or there is no dataset),
    else the dataset query with its question's text, else (no dataset) the question's hash.
    Two records of one query, or a record of no query (unless ``drop_unknown``), are errors.
    Returns the records by query id, the questions the file defines and the unmatched rows."""
    by_text = {key(q.text): q.id for q in queries.values()} if queries is not None else {}
    matched: dict[str, ScoredRecord] = {}
    questions: dict[str, str] = {}
    unmatched: list[int] = []
    for record in records:
        query_id = _query_of(record, queries, by_text)
        if query_id is None and drop_unknown:
            unmatched.append(record.line)
            continue
        if query_id is None:
            shown = record.query_id or record.question or "(no question)"
            raise DataError(
                path,
                f"record {shown[:60]!r} names no query of the dataset",
                "give its query_id, use the dataset's question text, or --drop-unknown",
                record.line,
            )
        if query_id in matched:
            raise DataError(
                path,
                f"query {query_id!r} has a second record (first at {matched[query_id].line})",
                "keep one record per query (one system per file)",
                record.line,
            )
        matched[query_id] = record
        if queries is None:
            questions[query_id] = record.question or query_id
    return matched, questions, tuple(unmatched)


def _query_of(record: ScoredRecord, queries: Mapping | None, by_text: dict) -> str | None:
    if queries is None:
        return record.query_id or (question_id(record.question) if record.question else None)
    if record.query_id in queries:
        return record.query_id
    return by_text.get(key(record.question)) if record.question else None


def load_scores(
    path: str | Path,
    queries: Mapping | None = None,
    tool: str | None = None,
    system: str | None = None,
    drop_unknown: bool = False,
) -> PeerScores:
    """Read a ragas, DeepEval or promptfoo result file (``tool``: detected when None) and
    match its records to ``queries`` (a dataset's, by id; None: the file's questions)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(
            path, "no such result file", "give the file ragas, DeepEval or promptfoo wrote"
        )
    tool = tool or detect_tool(path)
    records = read_records(path, tool, system)
    return scores_from(records, path, tool, _digest(path), queries, drop_unknown)


def frame_scores(frame, queries: Mapping | None = None, drop_unknown: bool = False) -> PeerScores:
    """:class:`PeerScores` of a ragas result given as a DataFrame (rows named ``row N``)."""
    text = frame.to_csv(index=False).encode()
    digest = hashlib.sha256(text).hexdigest()
    return scores_from(
        ragas_records(frame), Path("<DataFrame>"), "ragas", digest, queries, drop_unknown
    )


def scores_from(
    records: list[ScoredRecord],
    path: Path,
    tool: str,
    sha256: str,
    queries: Mapping | None,
    drop_unknown: bool = False,
) -> PeerScores:
    """:class:`PeerScores` of records already read (a ragas DataFrame in memory, say)."""
    if not records:
        raise DataError(path, "the file holds no record", "give a result file with scores")
    matched, questions, unmatched = match_queries(records, path, queries, drop_unknown)
    if not matched:
        raise DataError(path, "no record names a query of the dataset", "check --dataset")
    metrics = tuple(dict.fromkeys(m for r in matched.values() for m in r.scores))
    if not metrics:
        raise DataError(path, f"the {tool} records hold no score", "give a file with scores")
    missing = tuple(q for q in queries if q not in matched) if queries is not None else ()
    return PeerScores(tool, path, sha256, matched, questions, unmatched, missing, metrics)


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
