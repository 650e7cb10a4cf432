"""Datasets in the BEIR layout, with rag-bench's optional extras.

A dataset folder holds ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``, so public
BEIR sets load unchanged; ``answers.jsonl`` (recorded answers with claim labels) and a
``README.md`` dataset card are optional. A query may carry its gold ``answer`` and further gold
``answers`` (a list, as SQuAD's annotators gave several; see docs/claims.md). Loading validates
everything and reports the first problem as one line naming the file, the line and the fix.
"""

from __future__ import annotations

import difflib
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rag_bench.data.answers import RecordedAnswer, load_answers
from rag_bench.data.qrels import Qrels, load_qrels
from rag_bench.errors import DataError
from rag_bench.io.jsonl import field as get
from rag_bench.io.jsonl import read_jsonl
from rag_bench.model import UNCATEGORIZED, Doc, Query

KNOWN_CATEGORIES = ("literal", "paraphrase", "multi-hop", "unanswerable")
# The datasets live in the checkout's top-level data/, the shipped ones and a user's own. The
# wheel carries the shipped ones inside the package as rag_bench/data/shipped (pyproject.toml
# maps data/ there), so an installed rag-bench finds them there, a checkout or an editable
# install at the top.
INSTALLED_FOLDER = Path(__file__).resolve().parent / "shipped"
SHIPPED_FOLDER = (
    INSTALLED_FOLDER if INSTALLED_FOLDER.is_dir() else Path(__file__).resolve().parents[2] / "data"
)
# the datasets rag-bench ships (the wheel's package-data lists the same folders, and "example")
SHIPPED = ("kestrel-kb", "lumen-mall-zh", "seed-example")
DEFAULT_DATASET = "kestrel-kb"


@dataclass
class Dataset:
    name: str
    path: Path
    docs: dict[str, Doc]
    queries: dict[str, Query]
    qrels: Qrels
    answers: dict[str, RecordedAnswer]
    sha256: str
    warnings: list[str] = field(default_factory=list)
    # with ``drop_unknown``: the judgements left out, as {"query" | "document": [ids named]}
    dropped: dict[str, list[str]] = field(default_factory=dict)
    n_dropped: int = 0
    # which qrels the dataset is evaluated on when not its own qrels/<split>.tsv (a merged
    # version, or a file): see rag_bench.data.qrels_versions
    qrels_version: dict = field(default_factory=dict)
    # what else the manifest's dataset record says (a queries file run in place of queries.jsonl)
    provenance: dict = field(default_factory=dict)
    split: str | None = None

    def categories(self) -> list[str]:
        return sorted({q.category for q in self.queries.values()})


def load_corpus(path: Path) -> dict[str, Doc]:
    docs: dict[str, Doc] = {}
    lines: dict[str, int] = {}
    for line, record in read_jsonl(path, "corpus"):
        doc_id = get(record, "_id", str, path, line, required=True)
        if not doc_id.strip():
            raise DataError(
                path, "empty document id", 'give every document a non-empty "_id"', line
            )
        if doc_id in docs:
            raise DataError(
                path,
                f"document id {doc_id!r} appears twice (first on line {lines[doc_id]})",
                'give every document a unique "_id"',
                line,
            )
        title = get(record, "title", str, path, line, default="")
        text = get(record, "text", str, path, line, required=True)
        if not (title.strip() or text.strip()):
            raise DataError(path, f"document {doc_id!r} has no text", 'fill in "text"', line)
        metadata = get(record, "metadata", dict, path, line, default={})
        docs[doc_id] = Doc(doc_id, title, text, metadata)
        lines[doc_id] = line
    if not docs:
        raise DataError(path, "the corpus has no documents", "add one JSON object per document")
    return docs


def _query(record: dict, path: Path, line: int) -> Query:
    query_id = get(record, "_id", str, path, line, required=True)
    text = get(record, "text", str, path, line, required=True)
    if not query_id.strip():
        raise DataError(path, "empty query id", 'give every query a non-empty "_id"', line)
    if not text.strip():
        raise DataError(path, f"query {query_id!r} has an empty text", 'fill in "text"', line)
    tags = get(record, "tags", list, path, line, default=[])
    if not all(isinstance(t, str) for t in tags):
        raise DataError(path, '"tags" must be a list of strings', 'e.g. "tags": ["smoke"]', line)
    answers = get(record, "answers", list, path, line, default=[])
    if not all(isinstance(a, str) and a.strip() for a in answers):
        raise DataError(
            path,
            '"answers" must be a list of non-empty strings',
            'e.g. "answers": ["Denver Broncos", "the Broncos"]',
            line,
        )
    answer = get(record, "answer", str, path, line)
    return Query(
        id=query_id,
        text=text,
        category=get(record, "category", str, path, line, default=UNCATEGORIZED) or UNCATEGORIZED,
        tags=tuple(tags),
        answer=answer if answer or not answers else answers[0],
        should_refuse=get(record, "should_refuse", bool, path, line, default=False),
        answers=tuple(answers),
    )


def load_queries(path: Path) -> tuple[dict[str, Query], dict[str, int]]:
    """Queries by id, and the line each was read from."""
    queries: dict[str, Query] = {}
    lines: dict[str, int] = {}
    for line, record in read_jsonl(path, "queries"):
        query = _query(record, path, line)
        if query.id in queries:
            raise DataError(
                path,
                f"query id {query.id!r} appears twice (first on line {lines[query.id]})",
                'give every query a unique "_id"',
                line,
            )
        queries[query.id] = query
        lines[query.id] = line
    if not queries:
        raise DataError(path, "there are no queries", "add one JSON object per query")
    return queries, lines


def _qrels_path(folder: Path, split: str) -> Path:
    path = folder / "qrels" / f"{split}.tsv"
    if path.is_file():
        return path
    available = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
    hint = f"use --split {' or '.join(available)}" if available else "add qrels/test.tsv"
    raise DataError(path, f"no qrels for split {split!r}", hint)


def _line_of(path: Path, value: str) -> int | None:
    """The first line of ``path`` whose whitespace-separated fields include ``value``."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if value in line.split():
                return number
    return None


def check_qrels(
    qrels: Qrels, path: Path, docs: dict, queries: dict, drop_unknown: bool = False
) -> tuple[Qrels, dict[str, list[str]]]:
    """The judgements, checked to name known queries and documents. Unknown ids are errors,
    not warnings: a misspelt id silently changes every recall denominator, which is exactly
    what an evaluation must not do. With ``drop_unknown`` (a published set whose qrels name
    documents its corpus lacks) those judgements are left out instead, and named."""
    dropped: dict[str, list[str]] = {}
    for column, known, kind, source in (
        ("query_id", queries, "query", "queries.jsonl"),
        ("doc_id", docs, "document", "corpus.jsonl"),
    ):
        ids = qrels.frame[column].cat.categories.astype(str)
        unknown = [i for i in ids if i not in known]
        if unknown and drop_unknown:
            dropped[kind] = sorted(unknown)
            keep = ~qrels.frame[column].astype(str).isin(set(unknown)).to_numpy()
            qrels = Qrels._from_frame(qrels.frame[keep], qrels.source)
        elif unknown:
            raise DataError(
                path,
                f"{kind} id {unknown[0]!r} is not in {source}"
                + (f" ({len(unknown) - 1} more unknown)" if len(unknown) > 1 else ""),
                f"correct the id or add the {kind} to {source}, "
                "or leave such judgements out with --drop-unknown",
                _line_of(path, unknown[0]),
            )
    return qrels, dropped


def dropped_note(path: Path, n_dropped: int, dropped: dict[str, list[str]]) -> str:
    """One line saying which judgements ``drop_unknown`` left out of ``path``."""
    named = "; ".join(
        f"{len(ids)} {kind} id{'s' if len(ids) > 1 else ''} not in "
        f"{'corpus' if kind == 'document' else 'queries'}.jsonl: "
        + ", ".join(ids[:5])
        + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        for kind, ids in dropped.items()
    )
    return f"{path}: dropped {n_dropped} judgement{'s' if n_dropped != 1 else ''} ({named})"


def _category_warnings(queries: dict[str, Query], path: Path, lines: dict[str, int]) -> list[str]:
    """A category that reads like a misspelling of a built-in category, or of a category the
    dataset uses more often (``logistcs`` once among forty ``logistics``), one warning per
    query line that carries it."""
    counts = Counter(q.category for q in queries.values())
    warnings = []
    for query in queries.values():
        category = query.category
        if category in KNOWN_CATEGORIES or category == UNCATEGORIZED:
            continue
        likely = [c for c in counts if c != category and counts[c] > counts[category]]
        candidates = list(dict.fromkeys([*KNOWN_CATEGORIES, *sorted(likely)]))
        close = difflib.get_close_matches(category, candidates, n=1, cutoff=0.75)
        if close:
            shown = ", ".join(c for c in candidates if c in KNOWN_CATEGORIES or c in counts)
            warnings.append(
                f"{path}:{lines[query.id]}: category {category!r} looks like a typo of "
                f"{close[0]!r} (categories: {shown})"
            )
    return warnings


def _unreviewed_note(queries: dict[str, Query], folder: Path) -> list[str]:
    """A line when generated queries await review: they run, but are not labelled yet."""
    from rag_bench.data import UNREVIEWED_TAG

    waiting = sum(UNREVIEWED_TAG in q.tags for q in queries.values())
    if not waiting:
        return []
    return [
        f"{folder / 'queries.jsonl'}: {waiting} of {len(queries)} queries are generated and "
        f"unreviewed (tag {UNREVIEWED_TAG!r}: --tag or --slice tag keeps them apart); they count "
        f"as labelled once accepted: rag-bench generate --accept LABELS --dataset {folder}"
    ]


def _digest(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def shipped_datasets() -> list[str]:
    """The names of the datasets shipped with rag-bench."""
    return [name for name in SHIPPED if (SHIPPED_FOLDER / name / "corpus.jsonl").is_file()]


def is_shipped(folder: Path) -> bool:
    """Whether ``folder`` is one of the shipped datasets (never edited in place)."""
    resolved = folder.resolve()
    return any(resolved.is_relative_to(SHIPPED_FOLDER / name) for name in SHIPPED)


def dataset_folder(path: str | Path | None = None) -> Path:
    """The folder of a dataset given as a folder or, when no such folder exists, as the name of
    a dataset in the data folder (a shipped one, or in a checkout one of the user's own in
    ``data/``); None is the default shipped dataset (kestrel-kb)."""
    folder = Path(path if path is not None else SHIPPED_FOLDER / DEFAULT_DATASET)
    if folder.is_dir():
        return folder
    named = SHIPPED_FOLDER / str(path)
    if (named / "corpus.jsonl").is_file() and named.parent == SHIPPED_FOLDER:
        return named
    raise DataError(
        folder,
        "no such dataset folder",
        f"give the folder holding corpus.jsonl, or a shipped dataset: {', '.join(SHIPPED)}",
    )


def load_dataset(
    path: str | Path | None = None, split: str = "test", drop_unknown: bool = False
) -> Dataset:
    """Load and validate a dataset (a folder, a shipped dataset's name, or None for the shipped
    kestrel-kb); the evaluated queries are those of ``split``'s qrels plus every
    ``should_refuse`` query (which has no relevant document by definition). A judgement
    naming a query or document the dataset lacks is an error; with ``drop_unknown`` it is
    left out, counted in ``n_dropped``, its ids in ``dropped`` and a warning."""
    folder = dataset_folder(path)
    docs = load_corpus(folder / "corpus.jsonl")
    queries_path = folder / "queries.jsonl"
    all_queries, lines = load_queries(queries_path)
    if not any((folder / "qrels").glob("*.tsv")):  # no qrels at all: every query unlabelled
        qrels_path = folder / "qrels" / f"{split}.tsv"
        qrels = Qrels(Qrels.from_records([]).frame, str(qrels_path))
    else:
        qrels_path = _qrels_path(folder, split)
        # unanswerable queries need no judgement: a dataset of them alone has qrels of a header
        only_unanswerable = all(q.should_refuse for q in all_queries.values())
        qrels = load_qrels(qrels_path, allow_empty=only_unanswerable)
    before = len(qrels)
    qrels, dropped = check_qrels(qrels, qrels_path, docs, all_queries, drop_unknown)
    n_dropped = before - len(qrels)
    notes = [dropped_note(qrels_path, n_dropped, dropped)] if dropped else []
    judged = set(qrels.frame["query_id"].cat.categories.astype(str))
    queries = {
        q: v
        for q, v in all_queries.items()
        if q in judged or v.should_refuse or not qrels_path.is_file()
    }
    answers_path = folder / "answers.jsonl"
    answers = load_answers(answers_path, docs, queries) if answers_path.is_file() else {}
    hashed = [folder / "corpus.jsonl", queries_path]
    hashed += [qrels_path] if qrels_path.is_file() else []
    hashed += [answers_path] if answers_path.is_file() else []
    return Dataset(
        name=folder.resolve().name,
        path=folder,
        docs=docs,
        queries=queries,
        qrels=qrels,
        answers=answers,
        sha256=_digest(hashed),
        warnings=notes
        + _category_warnings(queries, queries_path, lines)
        + _unreviewed_note(queries, folder),
        dropped=dropped,
        n_dropped=n_dropped,
        split=split,
    )
