"""Versioned qrels: reviewed grades merged into a dataset's judgements as new versions.

A dataset's own ``qrels/<split>.tsv`` is its ``base`` version and is never edited. Each merge
of a labels file (the ``pair`` lines of the shared labels format, see docs/qrels.md) writes a
new version beside it, append-only::

    <dataset>/qrels/versions/<split>/<sha256>.tsv            the judgements, BEIR TSV
    <dataset>/qrels/versions/<split>/0001.json                what the version is

A version is named by the sha256 of its judgements in canonical form (one ``query doc grade``
line per judgement, sorted, tab-separated), which is also the hash every run's manifest records
(``qrels.sha256``). Its JSON names the parent version, what changed (added, changed and
unchanged judgements, counted and listed), who labelled them, when, and from which file. The
shipped datasets are never written to: merging into one is refused with the copy to make.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rag_bench.data.dataset import (
    Dataset,
    check_qrels,
    dataset_folder,
    is_shipped,
    load_dataset,
    load_queries,
)
from rag_bench.data.qrels import Qrels, load_qrels
from rag_bench.data.review import check_label
from rag_bench.errors import DataError, UsageError
from rag_bench.io.durable import atomic_create, atomic_write
from rag_bench.io.jsonl import read_jsonl

BASE = "base"
LATEST = "latest"
VERSIONS = "versions"
_VERSION_FILE = re.compile(r"^(\d{4,})\.json$")
_HEX = re.compile(r"^[0-9a-f]{4,64}$")
_SHA = re.compile(r"^[0-9a-f]{64}$")
TSV_HEADER = "query-id\tcorpus-id\tscore\n"


def canonical(qrels: Qrels) -> bytes:
    """The judgements as bytes that depend on nothing but the judgements: one
    ``query<TAB>doc<TAB>grade`` line each, sorted by query and document id."""
    rows = sorted(
        (str(q), str(d), int(g))
        for q, d, g in qrels.frame[["query_id", "doc_id", "grade"]].itertuples(index=False)
    )
    return "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows).encode()


def qrels_sha256(qrels: Qrels) -> str:
    """The content hash naming a set of judgements (of :func:`canonical`)."""
    return hashlib.sha256(canonical(qrels)).hexdigest()


@dataclass(frozen=True)
class PairLabel:
    """One person's grade of one (query, document) pair, from line ``line`` of a labels file."""

    query_id: str
    doc_id: str
    grade: int
    labeller: str
    labelled_at: str
    line: int


@dataclass(frozen=True)
class QrelsVersion:
    """One version of a dataset's qrels: ``number`` 0 is the dataset's own file (``base``)."""

    number: int
    sha256: str
    n_judgements: int
    record: dict  # the version's JSON (empty for base)
    path: Path  # the judgements file

    @property
    def label(self) -> str:
        return BASE if self.number == 0 else str(self.number)


@dataclass(frozen=True)
class MergeResult:
    """What a merge did: the version written (None when nothing changed) and its parent."""

    version: QrelsVersion | None
    parent: QrelsVersion
    added: list[tuple[str, str, int]]
    changed: list[tuple[str, str, int, int]]
    unchanged: list[tuple[str, str, int]]
    labellers: dict[str, int]
    other_lines: int  # lines of other kinds (claim verdicts, generated queries): not qrels
    notes: list[str]


def read_pair_labels(path: str | Path) -> tuple[dict[tuple[str, str], PairLabel], int]:
    """The ``pair`` labels of a labels file (every line checked by the review format's one
    rule, :func:`rag_bench.data.review.check_label`), the last line per (query, document)
    winning (a person may correct themselves), and the number of lines of other kinds."""
    path = Path(path)
    labels: dict[tuple[str, str], PairLabel] = {}
    other = 0
    for line, record in read_jsonl(path, "labels"):
        record = check_label(record, path, line)
        if record["kind"] != "pair":
            other += 1
            continue
        label = PairLabel(
            record["query_id"],
            record["doc_id"],
            record["grade"],
            record["labeller"].strip(),
            record["labelled_at"],
            line,
        )
        labels.pop((label.query_id, label.doc_id), None)  # keep the order of the last lines
        labels[(label.query_id, label.doc_id)] = label
    return labels, other


def _known(
    labels: dict[tuple[str, str], PairLabel],
    path: Path,
    data: Dataset,
    all_queries: dict,
    drop_unknown: bool,
) -> tuple[dict[tuple[str, str], PairLabel], list[str]]:
    """The labels naming known queries and documents. An unknown id is an error naming its
    line, as in qrels (a misspelt id would add a judgement nothing retrieves); with
    ``drop_unknown`` such labels are left out instead, and named."""
    dropped: dict[str, list[str]] = {}
    kept = {}
    for key, label in sorted(labels.items(), key=lambda item: item[1].line):
        for kind, value, known, source in (
            ("query", label.query_id, all_queries, "queries.jsonl"),
            ("document", label.doc_id, data.docs, "corpus.jsonl"),
        ):
            if value in known:
                continue
            if not drop_unknown:
                raise DataError(
                    path,
                    f"{kind} id {value!r} is not in {source} of {data.name}",
                    f"correct the id or add the {kind} to {source}, "
                    "or leave such labels out with --drop-unknown",
                    label.line,
                )
            dropped.setdefault(kind, []).append(value)
            break
        else:
            kept[key] = label
    notes = []
    if dropped:
        n = len(labels) - len(kept)
        named = "; ".join(
            f"{kind} ids not in {'corpus' if kind == 'document' else 'queries'}.jsonl: "
            + ", ".join(sorted(set(ids))[:5])
            for kind, ids in dropped.items()
        )
        notes.append(f"{path}: dropped {n} label{'s' if n != 1 else ''} ({named})")
    return kept, notes


def versions_folder(data: Dataset, split: str = "test") -> Path:
    return Path(data.path) / "qrels" / VERSIONS / split


def _base_path(data: Dataset, split: str) -> Path:
    return Path(data.path) / "qrels" / f"{split}.tsv"


def qrels_log(
    dataset: Dataset | str | Path | None = None, split: str = "test"
) -> list[QrelsVersion]:
    """Every version of a dataset's qrels of ``split``, oldest first: ``base`` (the dataset's
    own file), then each merge."""
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, split=split)
    base_path = _base_path(data, split)
    base_qrels = _base_qrels(base_path)
    versions = [QrelsVersion(0, qrels_sha256(base_qrels), len(base_qrels), {}, base_path)]
    folder = versions_folder(data, split)
    found = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        match = _VERSION_FILE.match(entry.name)
        if match:
            found.append(_read_version(entry, int(match.group(1))))
    return versions + sorted(found, key=lambda v: v.number)


def _base_qrels(path: Path) -> Qrels:
    """The dataset's own qrels (none at all: a dataset of unlabelled queries judges nothing)."""
    return load_qrels(path, allow_empty=True) if path.is_file() else Qrels.from_records([])


def _read_version(path: Path, number: int) -> QrelsVersion:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(path, f"unreadable qrels version ({exc})", "restore the file") from None
    sha = record.get("sha256") if isinstance(record, dict) else None
    if not isinstance(sha, str) or not _SHA.match(sha) or record.get("version") != number:
        raise DataError(path, "not a qrels version written by a merge", "restore the file")
    # the judgements file is named by the checked hash, never by a path read from disk
    tsv = path.parent / f"{sha}.tsv"
    return QrelsVersion(number, sha, int(record.get("n_judgements", 0)), record, tsv)


def _load_version(version: QrelsVersion) -> Qrels:
    qrels = load_qrels(version.path, allow_empty=True)
    if qrels_sha256(qrels) != version.sha256:
        raise DataError(
            version.path,
            f"the judgements of qrels version {version.label} were edited "
            f"(their sha256 is no longer {version.sha256[:12]})",
            "restore the file; a change of judgements is a new merge",
        )
    return qrels


def find_version(versions: list[QrelsVersion], ref: str) -> QrelsVersion | None:
    """The version ``ref`` names: ``latest``, ``base``, a version number, or a unique prefix
    (4+ hex digits) of its sha256; None when it names none (it may be a file)."""
    if ref == LATEST:
        return versions[-1]
    if ref == BASE:
        return versions[0]
    if ref.isdigit() and len(ref) < 4:
        return next((v for v in versions if v.number == int(ref)), None)
    if not _HEX.match(ref):
        return None
    matches = {v.sha256: v for v in versions if v.sha256.startswith(ref)}
    if len(matches) > 1:
        raise UsageError(
            f"qrels version {ref!r} is ambiguous ({len(matches)} versions start with it)",
            "give more digits of the hash (rag-bench qrels log lists them)",
        )
    # the same judgements twice (a merge back to an earlier state): the latest holds them
    same = [v for v in versions if v.sha256.startswith(ref)]
    return same[-1] if same else None


def with_qrels(data: Dataset, qrels: Qrels, record: dict) -> Dataset:
    """``data`` evaluated on ``qrels`` instead of its own (the judged queries plus every
    ``should_refuse`` one, as :func:`~rag_bench.data.dataset.load_dataset` chooses them);
    ``record`` says which qrels they are, for the manifest."""
    if "queries_file" in data.provenance:  # a user's queries: every one runs, judged or not
        queries = data.queries
    else:
        all_queries, _ = load_queries(Path(data.path) / "queries.jsonl")
        judged = set(qrels.frame["query_id"].astype(str))
        queries = {q: v for q, v in all_queries.items() if q in judged or v.should_refuse}
    answers = {q: a for q, a in data.answers.items() if q in queries}
    return dataclasses.replace(
        data, qrels=qrels, queries=queries, answers=answers, qrels_version=record
    )


def use_qrels(
    data: Dataset, ref: str | Path, split: str | None = None, drop_unknown: bool = False
) -> Dataset:
    """``data`` evaluated on the qrels ``ref`` names: a version of its own (``latest``,
    ``base``, a number, a sha256 prefix; see :func:`qrels_log`) or a qrels file (TREC or BEIR;
    its judgements checked against the dataset as the dataset's own are, ``drop_unknown``
    leaving out those naming unknown ids)."""
    split = split or data.split or "test"
    versions = qrels_log(data, split)
    text = str(ref)
    version = None if Path(text).is_file() else find_version(versions, text)
    if version is not None:
        if version.number == 0 and not data.qrels_version:  # the dataset's own, as loaded
            return with_qrels(data, data.qrels, _record(version, split))
        qrels = _load_version(version) if version.number else _base_qrels(version.path)
        qrels, _ = check_qrels(qrels, version.path, data.docs, _all(data), drop_unknown)
        return with_qrels(data, qrels, _record(version, split))
    path = Path(text)
    if not path.is_file():
        shown = ", ".join(f"{v.label} {v.sha256[:12]}" for v in versions)
        raise UsageError(
            f"--qrels {text!r} is neither a qrels version of {data.name} ({split}) nor a file",
            f"give latest, base, a version number or hash prefix ({shown}), or a qrels file",
        )
    qrels, _ = check_qrels(load_qrels(path), path, data.docs, _all(data), drop_unknown)
    sha = qrels_sha256(qrels)
    known = next((v for v in reversed(versions) if v.sha256 == sha), None)
    record = _record(known, split) if known else {"version": "file", "source": path.name}
    return with_qrels(data, qrels, {**record, "split": split})


def _all(data: Dataset) -> dict:
    """Every query of the dataset, and those of a user's queries file it runs."""
    return {**load_queries(Path(data.path) / "queries.jsonl")[0], **data.queries}


def _record(version: QrelsVersion, split: str) -> dict:
    source = f"qrels/{split}.tsv" if version.number == 0 else f"qrels/{VERSIONS}/{split}"
    return {"version": version.label, "source": source, "split": split}


def qrels_record(data: Dataset) -> dict:
    """What a run's manifest says of the qrels it was scored on: their sha256 and which
    version (``base``: the dataset's own file) or file they are."""
    record = data.qrels_version or {"version": BASE, "source": f"qrels/{data.split or 'test'}.tsv"}
    return {"sha256": qrels_sha256(data.qrels), **record}


def merge_labels(
    dataset: Dataset | str | Path | None,
    labels: str | Path,
    *,
    split: str = "test",
    drop_unknown: bool = False,
    now: datetime | None = None,
) -> MergeResult:
    """Merge the ``pair`` labels of ``labels`` into the latest qrels version of ``dataset``
    (a folder of the user's own: a shipped dataset is never written to) as a new version;
    nothing is written when no grade changes. Returns what changed."""
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, split=split)
    folder = dataset_folder(data.path)
    if is_shipped(folder):
        raise DataError(
            folder,
            f"{data.name} is a dataset shipped with rag-bench, never edited in place",
            f"copy it (cp -r {folder} my-{data.name}) and merge into the copy: "
            f"rag-bench qrels merge --dataset my-{data.name} {labels}",
        )
    labels_path = Path(labels)
    read, other = read_pair_labels(labels_path)
    if not read:
        raise DataError(
            labels_path,
            "the labels file holds no pair labels",
            'grade pairs as {"kind": "pair", "query_id": ..., "doc_id": ..., "grade": 0..3, '
            '"labeller": ..., "labelled_at": ...}',
        )
    read, notes = _known(read, labels_path, data, _all(data), drop_unknown)
    versions = qrels_log(data, split)
    parent = versions[-1]
    current = (_load_version(parent) if parent.number else _base_qrels(parent.path)).to_dict()
    added, changed, unchanged = [], [], []
    for (query_id, doc_id), label in read.items():
        before = current.get(query_id, {}).get(doc_id)
        if before is None:
            added.append((query_id, doc_id, label.grade))
        elif before != label.grade:
            changed.append((query_id, doc_id, before, label.grade))
        else:
            unchanged.append((query_id, doc_id, label.grade))
        current.setdefault(query_id, {})[doc_id] = label.grade
    labellers = dict(sorted(Counter(label.labeller for label in read.values()).items()))
    result = MergeResult(None, parent, added, changed, unchanged, labellers, other, notes)
    if not added and not changed:
        return result
    merged = Qrels.from_dict(current)
    body = canonical(merged)
    sha = hashlib.sha256(body).hexdigest()
    number = parent.number + 1
    times = sorted(label.labelled_at for label in read.values())
    record = {
        "format": 1,
        "version": number,
        "sha256": sha,
        "split": split,
        "parent": {"version": parent.label, "sha256": parent.sha256},
        "created_at": (now or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
        "labellers": labellers,
        "labelled_at": {"first": times[0], "last": times[-1]},
        "labels": {
            "file": labels_path.name,
            "sha256": hashlib.sha256(labels_path.read_bytes()).hexdigest(),
            "pairs": len(read),
        },
        "n_judgements": len(merged),
        "counts": {"added": len(added), "changed": len(changed), "unchanged": len(unchanged)},
        "added": [list(a) for a in added],
        "changed": [list(c) for c in changed],
        "unchanged": [list(u) for u in unchanged],
    }
    target = versions_folder(data, split)
    target.mkdir(parents=True, exist_ok=True)
    atomic_write(target / f"{sha}.tsv", TSV_HEADER.encode() + body)
    # the version number is the name: two merges racing for it cannot both take it
    name = target / f"{number:04d}.json"
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    if not atomic_create(name, text.encode()):
        raise UsageError(
            f"another merge wrote qrels version {number} of {data.name} meanwhile",
            "merge again: the labels go on top of that version",
        )
    version = QrelsVersion(number, sha, len(merged), record, target / f"{sha}.tsv")
    return dataclasses.replace(result, version=version)
