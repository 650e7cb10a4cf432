"""``generate``: a dataset of proposed queries over a corpus, and ``accept``: people's review
of them applied.

The output folder is a dataset in the BEIR layout that ``rag-bench run --dataset`` runs: the
source corpus (copied byte for byte), ``queries.jsonl`` (each query tagged ``generated`` and
``unreviewed``, with a ``generated`` field: the method that made it, the seed, its source span
and documents, what the method recorded), ``qrels/test.tsv`` (each query's source documents,
grade 1; an unanswerable query has none and ``should_refuse``), ``review.jsonl`` (one
``"kind": "generated"`` item per query for the review page) and ``quality.json`` (the quality
report). Until a person accepts a query it keeps the ``unreviewed`` tag, so ``--tag``,
``--slice tag`` and the dataset's warning keep it apart from labelled queries; ``accept``
applies a labels file: an accepted query becomes ``reviewed`` (with the person's wording when
edited), a rejected one moves to ``rejected.jsonl`` with its qrels.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rag_bench.data import GENERATED_TAG, REVIEWED_TAG, UNREVIEWED_TAG
from rag_bench.data.dataset import Dataset, load_dataset
from rag_bench.errors import DataError, UsageError, check_number
from rag_bench.io.durable import atomic_write
from rag_bench.io.jsonl import field as get
from rag_bench.io.jsonl import read_jsonl
from rag_bench.testsets.propose import CATEGORIES, Proposal, Proposer, with_text

REVIEW_FILE, QUALITY_FILE, REJECTED_FILE = "review.jsonl", "quality.json", "rejected.jsonl"
QRELS_HEADER = "query-id\tcorpus-id\tscore\n"


@dataclass
class GeneratedSet:
    """What ``generate`` wrote: the folder, the queries (id, proposal), the count per method,
    how many LLM replies were unusable (their queries kept the offline wording) and the
    quality report."""

    folder: Path
    queries: list[tuple[str, Proposal]]
    methods: dict[str, int]
    llm_unusable: int = 0
    quality: dict = field(default_factory=dict)


def generate(
    dataset: str | Path | Dataset,
    out_dir: str | Path,
    *,
    n: int = 40,
    seed: int = 0,
    categories: Sequence[str] = CATEGORIES,
    llm: str | None = None,
    llm_overrides: Sequence[str] = (),
    differences: Sequence[float] | None = None,
    differences_source: str = "",
    effects: Sequence[float] | None = None,
    cache_dir: str | Path | None = None,
) -> GeneratedSet:
    """Propose ``n`` queries over ``dataset``'s corpus (seeded) in ``categories``, word them
    with the generator component ``llm`` (``llama_cpp``, ``openai``; None: the offline rules
    word them) and write the dataset, review file and quality report into ``out_dir``, which
    must not exist yet."""
    from rag_bench.testsets.quality import EFFECTS, quality_report

    check_number("n", n, 1, whole=True)
    check_number("seed", seed, 0, whole=True)
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    out = Path(out_dir)
    if out.exists():
        raise UsageError(f"{out} already exists", "give a new folder for the generated set")
    writer = None
    if llm is not None:
        from rag_bench.testsets.llm import question_writer

        writer = question_writer(llm, llm_overrides)
    proposals = Proposer(data, seed).propose(n, categories)
    if not proposals:
        raise DataError(
            data.path / "corpus.jsonl",
            "no sentence of the corpus makes a question (the rules read English sentences "
            "holding a number, date, amount, code or name)",
            "use a corpus with such sentences",
        )
    unusable = 0
    if writer is not None:
        from rag_bench.testsets.llm import word

        worded = []
        for proposal in proposals:
            text = word(writer, proposal)
            unusable += text is None
            worded.append(with_text(proposal, text, f"llm:{llm}") if text else proposal)
        proposals = worded
    named = [(f"gen-{seed}-{i + 1:04d}", p) for i, p in enumerate(proposals)]
    _write(data, out, named, seed)
    generated = load_dataset(out)
    quality = quality_report(
        generated,
        effects=effects or EFFECTS,
        differences=differences,
        differences_source=differences_source,
        cache_dir=cache_dir,
    )
    atomic_write(out / QUALITY_FILE, (json.dumps(quality, indent=2) + "\n").encode())
    methods = dict(sorted(Counter(p.method for _, p in named).items()))
    return GeneratedSet(out, named, methods, unusable, quality)


def query_record(query_id: str, proposal: Proposal, seed: int) -> dict:
    record: dict = {
        "_id": query_id,
        "text": proposal.text,
        "category": proposal.category,
        "tags": [GENERATED_TAG, UNREVIEWED_TAG],
    }
    if proposal.gold_answer is not None:
        record["answer"] = proposal.gold_answer
    record["should_refuse"] = proposal.gold_answer is None
    record["generated"] = {
        "method": proposal.method,
        "seed": seed,
        "doc_ids": list(proposal.doc_ids),
        "source_span": proposal.source_span,
        **proposal.details,
    }
    return record


def review_item(data: Dataset, query_id: str, proposal: Proposal) -> dict:
    """The review page's item for one generated query (the shared ``generated`` kind)."""
    shown = proposal.doc_ids or (proposal.details.get("template_doc"),)
    texts = [data.docs[d].full_text() for d in shown if d in data.docs]
    return {
        "kind": "generated",
        "dataset": data.name,
        "query_id": query_id,
        "query": proposal.text,
        "category": proposal.category,
        "doc_ids": list(proposal.doc_ids),
        "gold_answer": proposal.gold_answer or "",
        "source_span": proposal.source_span,
        "doc_text": "\n\n---\n\n".join(texts),
    }


def _lines(records) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def _write(data: Dataset, out: Path, named: list[tuple[str, Proposal]], seed: int) -> None:
    """The folder, written under a staging name and renamed when complete."""
    staging = out.with_name(f".{out.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    (staging / "qrels").mkdir(parents=True)
    shutil.copyfile(Path(data.path) / "corpus.jsonl", staging / "corpus.jsonl")
    (staging / "queries.jsonl").write_bytes(_lines(query_record(q, p, seed) for q, p in named))
    rows = [f"{q}\t{d}\t1\n" for q, p in named for d in p.doc_ids]
    (staging / "qrels" / "test.tsv").write_text(QRELS_HEADER + "".join(rows), encoding="utf-8")
    (staging / REVIEW_FILE).write_bytes(_lines(review_item(data, q, p) for q, p in named))
    staging.rename(out)


# --- acceptance ------------------------------------------------------------------------------


@dataclass
class Acceptance:
    """What ``accept`` did: ids accepted (and of those, edited), rejected, not labelled yet,
    and labels that named no query of the set (already applied or another set's)."""

    accepted: list[str]
    edited: list[str]
    rejected: list[str]
    unlabelled: list[str]
    unknown: list[str]


def read_decisions(path: Path) -> dict[str, dict]:
    """The last ``generated`` label per query id in a labels file (a later line overrides an
    earlier one); labels of other kinds are skipped."""
    decisions: dict[str, dict] = {}
    for line, record in read_jsonl(path, "labels"):
        kind = get(record, "kind", str, path, line, required=True)
        if kind != "generated":
            continue
        query_id = get(record, "query_id", str, path, line, required=True)
        accept = get(record, "accept", bool, path, line, required=True)
        labeller = get(record, "labeller", str, path, line, required=True)
        labelled_at = get(record, "labelled_at", str, path, line, required=True)
        if not labeller.strip():
            raise DataError(path, "empty labeller", 'name who labelled it in "labeller"', line)
        text = get(record, "query", str, path, line)
        if text is not None and not text.strip():
            raise DataError(path, "empty edited query", 'leave "query" out or fill it in', line)
        decisions[query_id] = {
            "accept": accept,
            "labeller": labeller,
            "labelled_at": labelled_at,
            "query": text,
            "line": line,
        }
    return decisions


def accept(folder: str | Path, labels: str | Path) -> Acceptance:
    """Apply a labels file's ``generated`` decisions to a generated set in ``folder``."""
    folder, labels = Path(folder), Path(labels)
    queries_path, qrels_path = folder / "queries.jsonl", folder / "qrels" / "test.tsv"
    if not (queries_path.is_file() and (folder / REVIEW_FILE).is_file()):
        raise DataError(
            folder, "no generated set here (queries.jsonl and review.jsonl)", "give the -o folder"
        )
    decisions = read_decisions(labels)
    records = [r for _, r in read_jsonl(queries_path, "queries")]
    known = {r["_id"] for r in records}
    kept, rejected = [], []
    result = Acceptance([], [], [], [], sorted(set(decisions) - known))
    for record in records:
        decision = decisions.get(record["_id"])
        if decision is None:
            if UNREVIEWED_TAG in record.get("tags", []):
                result.unlabelled.append(record["_id"])
            kept.append(record)
            continue
        review = {k: decision[k] for k in ("accept", "labeller", "labelled_at")}
        record.setdefault("generated", {})["review"] = review
        if not decision["accept"]:
            rejected.append(record)
            result.rejected.append(record["_id"])
            continue
        if decision["query"] is not None and decision["query"] != record["text"]:
            record["generated"]["proposed_text"] = record["text"]
            record["text"] = decision["query"]
            result.edited.append(record["_id"])
        tags = [t for t in record.get("tags", []) if t != UNREVIEWED_TAG]
        record["tags"] = tags + ([REVIEWED_TAG] if REVIEWED_TAG not in tags else [])
        result.accepted.append(record["_id"])
        kept.append(record)
    if not kept:
        raise UsageError(
            f"{labels} rejects every query of {folder}", "a dataset needs one query at least"
        )
    gone = {r["_id"] for r in rejected}
    old_rows = qrels_path.read_text(encoding="utf-8").splitlines(keepends=True)
    rows = [row for row in old_rows[1:] if row.split("\t")[0] not in gone]
    # the rejected queries are kept first, then the qrels lose them, then the queries do: a
    # stop in between leaves a loadable dataset and nothing lost
    before = folder / REJECTED_FILE
    earlier = before.read_bytes() if before.is_file() else b""
    if rejected:
        dropped = [row for row in old_rows[1:] if row.split("\t")[0] in gone]
        for record in rejected:
            record["qrels"] = [r.rstrip("\n") for r in dropped if r.split("\t")[0] == record["_id"]]
        atomic_write(before, earlier + _lines(rejected))
    atomic_write(qrels_path, (QRELS_HEADER + "".join(rows)).encode())
    atomic_write(queries_path, _lines(kept))
    return result
