"""Reviewed grades merged into a dataset's qrels as versions: hashes, parents, what changed,
append-only files, references, and the bad labels refused with their file and line."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from runs_helpers import fingerprint

from conftest import SHIPPED, assert_one_line_error
from rag_bench.data.dataset import SHIPPED_FOLDER, load_dataset
from rag_bench.data.qrels import load_qrels
from rag_bench.data.qrels_versions import merge_labels, qrels_log, qrels_record, use_qrels
from rag_bench.errors import DataError, UsageError
from rag_bench.io.durable import atomic_create

AT = "2026-12-05T19:04:11Z"


def pair(query_id, doc_id, grade, labeller="ann", **extra) -> dict:
    return {
        "kind": "pair",
        "query_id": query_id,
        "doc_id": doc_id,
        "grade": grade,
        "labeller": labeller,
        "labelled_at": AT,
        **extra,
    }


def write_labels(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def reference_sha(judgements: dict[tuple[str, str], int]) -> str:
    """The canonical hash computed here by hand: sorted 'query TAB doc TAB grade' lines."""
    lines = sorted(f"{q}\t{d}\t{g}\n" for (q, d), g in judgements.items())
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def base_judgements(folder) -> dict[tuple[str, str], int]:
    out = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, g = line.split("\t")
        out[(q, d)] = int(g)
    return out


@pytest.fixture
def kb(tmp_path):
    """A copy of the shipped kestrel-kb (a dataset of the user's own)."""
    target = tmp_path / "kb"
    shutil.copytree(SHIPPED, target)
    return target


def unjudged_pair(folder) -> tuple[str, str]:
    """A (query, document) pair the base qrels do not judge."""
    judged = base_judgements(folder)
    query = sorted({q for q, _ in judged})[0]
    docs = [json.loads(line)["_id"] for line in (folder / "corpus.jsonl").open()]
    return query, next(d for d in docs if (query, d) not in judged)


def test_merge_writes_a_version_with_its_hash_parent_changes_and_labellers(kb, tmp_path):
    judged = base_judgements(kb)
    (q1, d1), g1 = next(iter(judged.items()))
    q2, d2 = unjudged_pair(kb)
    labels = write_labels(
        tmp_path / "labels.jsonl",
        [
            pair(q2, d2, 3, "bob"),
            pair(q1, d1, (g1 + 1) % 4, "ann"),
            {
                "kind": "claim",
                "run_id": "r",
                "query_id": q1,
                "claim_index": 0,
                "label": "supported",
                "labeller": "ann",
                "labelled_at": AT,
            },
            pair(q2, d2, 2, "ann"),  # a correction: the later line wins
        ],
    )
    result = merge_labels(kb, labels)
    expected = {**judged, (q2, d2): 2, (q1, d1): (g1 + 1) % 4}
    version = result.version
    assert version is not None and version.number == 1
    assert version.sha256 == reference_sha(expected)
    assert result.parent.label == "base" and result.parent.sha256 == reference_sha(judged)
    assert result.added == [(q2, d2, 2)]
    assert result.changed == [(q1, d1, g1, (g1 + 1) % 4)]
    assert result.unchanged == [] and result.other_lines == 1
    assert result.labellers == {"ann": 2}  # bob's grade was corrected by ann
    record = json.loads((kb / "qrels" / "versions" / "test" / "0001.json").read_text())
    assert record["parent"]["sha256"] == reference_sha(judged)
    assert record["counts"] == {"added": 1, "changed": 1, "unchanged": 0}
    assert (
        record["labels"]["sha256"]
        == hashlib.sha256((tmp_path / "labels.jsonl").read_bytes()).hexdigest()
    )
    # the judgements file loads as qrels and holds exactly the merged grades
    merged = load_qrels(kb / "qrels" / "versions" / "test" / f"{version.sha256}.tsv").to_dict()
    assert {(q, d): g for q, docs in merged.items() for d, g in docs.items()} == expected
    # the dataset's own qrels are untouched
    assert base_judgements(kb) == judged

    # a second merge goes on top of the first; the log lists all three, oldest first
    again = merge_labels(kb, write_labels(tmp_path / "more.jsonl", [pair(q2, d2, 0, "cy")]))
    assert again.parent.number == 1 and again.changed == [(q2, d2, 2, 0)]
    log = qrels_log(kb)
    assert [v.label for v in log] == ["base", "1", "2"]
    assert log[2].sha256 == reference_sha({**expected, (q2, d2): 0})


def test_a_merge_that_changes_no_grade_writes_nothing(kb, tmp_path):
    (q, d), g = next(iter(base_judgements(kb).items()))
    result = merge_labels(kb, write_labels(tmp_path / "l.jsonl", [pair(q, d, g)]))
    assert result.version is None and result.unchanged == [(q, d, g)]
    assert not (kb / "qrels" / "versions").exists()


def test_references_pick_versions_and_files(kb, tmp_path):
    q, d = unjudged_pair(kb)
    version = merge_labels(kb, write_labels(tmp_path / "l.jsonl", [pair(q, d, 1)])).version
    data = load_dataset(kb)
    base_sha = qrels_record(data)["sha256"]
    assert base_sha == reference_sha(base_judgements(kb))
    for ref in ("latest", "1", version.sha256[:6]):
        scored = use_qrels(data, ref)
        assert qrels_record(scored)["sha256"] == version.sha256
        assert qrels_record(scored)["version"] == "1"
        assert scored.qrels.to_dict()[q][d] == 1
    assert qrels_record(use_qrels(data, "base"))["sha256"] == base_sha
    # a file holding the same judgements is recognised as that version
    same = tmp_path / "same.tsv"
    shutil.copy(kb / "qrels" / "versions" / "test" / f"{version.sha256}.tsv", same)
    assert qrels_record(use_qrels(data, str(same)))["version"] == "1"
    with pytest.raises(UsageError, match="neither a qrels version"):
        use_qrels(data, "ffffffff")


def test_an_edited_version_file_is_refused(kb, tmp_path):
    q, d = unjudged_pair(kb)
    version = merge_labels(kb, write_labels(tmp_path / "l.jsonl", [pair(q, d, 1)])).version
    with version.path.open("a") as handle:
        handle.write(f"{q}\t{d}x\t1\n")
    with pytest.raises(DataError, match="were edited"):
        use_qrels(load_dataset(kb), "latest")


def test_atomic_create_never_overwrites(tmp_path):
    target = tmp_path / "0001.json"
    assert atomic_create(target, b"first")
    assert not atomic_create(target, b"second")
    assert target.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["0001.json"]  # no staging file left


def test_merge_into_a_shipped_dataset_is_refused_and_leaves_it_untouched(tmp_path, rag_bench):
    before = fingerprint(SHIPPED_FOLDER, mtimes=True)
    q, d = unjudged_pair(SHIPPED)
    labels = write_labels(tmp_path / "l.jsonl", [pair(q, d, 2)])
    outcome = rag_bench("qrels", "merge", "--dataset", "kestrel-kb", labels)
    assert_one_line_error(outcome, "shipped with rag-bench", "cp -r")
    with pytest.raises(DataError):
        merge_labels(SHIPPED, labels)
    # a copy takes the merge; the shipped folder stays as it was, byte for byte and in time
    copy = tmp_path / "kb"
    shutil.copytree(SHIPPED, copy)
    assert rag_bench("qrels", "merge", "--dataset", copy, labels).exit_code == 0
    assert fingerprint(SHIPPED_FOLDER, mtimes=True) == before


BAD = [
    ("unknown query", lambda q, d: pair("no-such-query", d, 1), 2, "query id 'no-such-query'"),
    ("unknown doc", lambda q, d: pair(q, "no-such-doc", 1), 2, "document id 'no-such-doc'"),
    ("grade text", lambda q, d: pair(q, d, "2"), 2, 'grade is "2", not a whole number'),
    ("grade float", lambda q, d: pair(q, d, 1.5), 2, "grade is 1.5"),
    ("grade bool", lambda q, d: pair(q, d, True), 2, "grade is true"),
    ("grade range", lambda q, d: pair(q, d, 7), 2, "outside 0..3"),
    (
        "no labeller",
        lambda q, d: {k: v for k, v in pair(q, d, 1).items() if k != "labeller"},
        2,
        "names no labeller",
    ),
    ("empty labeller", lambda q, d: pair(q, d, 1, "  "), 2, "names no labeller"),
    ("bad time", lambda q, d: pair(q, d, 1, labelled_at="yesterday"), 2, "not an ISO-8601"),
    (
        "no kind",
        lambda q, d: {k: v for k, v in pair(q, d, 1).items() if k != "kind"},
        2,
        "has no kind",
    ),
]


@pytest.mark.parametrize(("case", "make", "line", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_labels_name_their_file_and_line(kb, tmp_path, rag_bench, case, make, line, message):
    q, d = unjudged_pair(kb)
    labels = write_labels(tmp_path / "l.jsonl", [pair(q, d, 1), make(q, d)])
    before = fingerprint(kb)
    outcome = rag_bench("qrels", "merge", "--dataset", kb, labels)
    assert_one_line_error(outcome, f"{labels}:{line}:", message)
    assert outcome.exit_code == DataError.exit_code
    assert fingerprint(kb) == before  # nothing written


def test_drop_unknown_leaves_unknown_ids_out_and_names_them(kb, tmp_path, rag_bench):
    q, d = unjudged_pair(kb)
    labels = write_labels(tmp_path / "l.jsonl", [pair(q, d, 1), pair(q, "ghost-doc", 2)])
    outcome = rag_bench("qrels", "merge", "--dataset", kb, labels, "--drop-unknown")
    assert outcome.exit_code == 0, outcome.stderr
    assert "dropped 1 label" in outcome.stderr and "ghost-doc" in outcome.stderr
    assert "1 added" in outcome.stdout
    log = rag_bench("qrels", "log", "--dataset", kb, "--format", "json")
    rows = json.loads(log.stdout)
    assert [r["version"] for r in rows] == ["base", "1"] and rows[1]["added"] == 1


def test_a_merge_racing_another_for_its_number_writes_nothing(kb, tmp_path, monkeypatch):
    """Two merges read the log at once: the second to write finds its number taken and is
    told to merge again; the first one's version stays as it was."""
    from rag_bench.data import qrels_versions

    q, d = unjudged_pair(kb)
    first = merge_labels(kb, write_labels(tmp_path / "a.jsonl", [pair(q, d, 1)])).version
    written = (kb / "qrels" / "versions" / "test" / "0001.json").read_bytes()
    stale = qrels_versions.qrels_log(kb)[:1]  # the log as the second merge read it: base only
    monkeypatch.setattr(qrels_versions, "qrels_log", lambda *a, **k: stale)
    with pytest.raises(UsageError, match="meanwhile"):
        merge_labels(kb, write_labels(tmp_path / "b.jsonl", [pair(q, d, 3)]))
    assert (kb / "qrels" / "versions" / "test" / "0001.json").read_bytes() == written
    monkeypatch.undo()
    assert [v.sha256 for v in qrels_log(kb)] == [qrels_log(kb)[0].sha256, first.sha256]
