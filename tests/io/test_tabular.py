"""The record reader's id handling: string hashes, duplicate checks, and exactness whatever the
hashes say (a degenerate hash may cost time, never a wrong number or a false error)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rag_bench import Qrels, Run, evaluate_run, load_run
from rag_bench.errors import DataError
from rag_bench.evaluation import retrieval
from rag_bench.io import idhash, tabular
from rag_bench.io.idhash import IdColumn

IDS = [
    "",
    "d",
    "d1",
    "d12",
    "1234567",
    "12345678",
    "123456789",
    "0¡¡𐀀",
    "clueweb12-0000tw-00-00001",
]
METRICS = "precision@3,recall@5,mrr,ndcg@5,map,rprec"


def hashes_of(values: list[str], arrow_type) -> np.ndarray:
    return IdColumn(pa.chunked_array([pa.array(values, type=arrow_type)])).hashes()


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string()])
def test_a_hash_depends_on_the_string_alone(arrow_type):
    together = hashes_of(IDS, arrow_type)
    alone = [hashes_of([value], arrow_type)[0] for value in IDS]
    assert list(together) == alone
    assert len(set(together)) == len(IDS)
    # a slice of a larger array (nonzero offsets) hashes the same
    sliced = pa.array(["x" * 20, *IDS], type=arrow_type).slice(1)
    assert list(IdColumn(pa.chunked_array([sliced])).hashes()) == alone


def test_categorical_and_string_columns_hash_alike():
    categorical = IdColumn.of(pd.Series(pd.Categorical(IDS[::-1] + IDS)))
    strings = IdColumn.of(pd.Series(IDS[::-1] + IDS, dtype="str"))
    assert np.array_equal(categorical.hashes(), strings.hashes())
    rows = np.array([3, 0, 10])
    assert categorical.take(rows).to_pylist() == strings.take(rows).to_pylist()


def write(path, lines: list[str]):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def run_lines(docs_by_query: dict[str, list[str]]) -> list[str]:
    return [
        f"{q} Q0 {d} {rank} {10 - rank / 2} tag"
        for q, docs in docs_by_query.items()
        for rank, d in enumerate(docs, start=1)
    ]


def test_a_file_runs_doc_ids_are_strings_that_evaluate_like_the_dict(tmp_path):
    docs = {"q1": ["d3", "d1", "d2", "d10"], "q2": ["d2", "d9", "d1"]}
    run_path = write(tmp_path / "run.txt", run_lines(docs))
    qrels = Qrels.from_dict({"q1": {"d1": 2, "d10": 1}, "q2": {"d9": 1, "d4": 3}})
    loaded = load_run(run_path)
    assert isinstance(loaded.frame["doc_id"].dtype, pd.StringDtype)
    from_dict = Run.from_scores(
        {q: {d: 10 - rank / 2 for rank, d in enumerate(ds, start=1)} for q, ds in docs.items()}
    )
    assert (
        evaluate_run(qrels, loaded, METRICS).means()
        == evaluate_run(qrels, from_dict, METRICS).means()
    )


@pytest.fixture(
    params=["compiled", None, 2], ids=["compiled", "numpy, one block", "numpy, blocks of 2 rows"]
)
def row_block(request, monkeypatch):
    """Files read, ids hashed and joined and duplicates looked for by the compiled modules, or
    by pyarrow and numpy: rows in one block, or in many tiny ones."""
    if request.param == "compiled":
        assert tabular._scan is not None and idhash._groups is not None, "not built"
        return
    monkeypatch.setattr(tabular, "_scan", None)
    monkeypatch.setattr(idhash, "_groups", None)
    if request.param:
        monkeypatch.setattr(idhash, "ROW_BLOCK", request.param)
        monkeypatch.setattr(tabular, "ROW_BLOCK", request.param)
        monkeypatch.setattr(retrieval, "ROW_BLOCK", request.param)


def test_a_document_retrieved_twice_names_both_lines(tmp_path, row_block):
    lines = run_lines({"q1": ["d1", "d2", "d3"], "q2": ["d1", "d2", "d1"], "q3": ["d1"]})
    with pytest.raises(DataError) as error:
        load_run(write(tmp_path / "run.txt", lines))
    assert "run.txt:6" in str(error.value) and "first on line 4" in str(error.value)
    # a query whose lines come back later, with a document retrieved again
    lines = run_lines({"q1": ["d1", "d2"], "q2": ["d1"]}) + run_lines({"q1": ["d3", "d2"]})
    with pytest.raises(DataError, match="first on line 2"):
        load_run(write(tmp_path / "split.txt", lines))


def _hash_by_length(strings) -> np.ndarray:
    """A degenerate hash: ids of equal length collide."""
    return pc.binary_length(strings).to_numpy().astype(np.uint64)


def test_colliding_hashes_change_no_number_and_raise_no_false_duplicate(
    tmp_path, monkeypatch, row_block
):
    lines = run_lines(
        {"q1": ["d3", "d1", "d2", "d10", "d11"], "q2": ["d2", "d9", "d1", "d12"], "q3": ["d5"]}
    )
    lines[1] = lines[1].replace(" 9.0 ", " 9.5 ")  # a tie with the line before
    run_path = write(tmp_path / "run.txt", lines)
    judged = ["q1 0 d1 2", "q1 0 d10 1", "q1 0 d11 0", "q2 0 d9 1", "q2 0 d12 3", "q3 0 d6 1"]
    qrels_path = write(tmp_path / "qrels.txt", judged)
    expected = evaluate_run(qrels_path, run_path, METRICS).per_query
    # the scanner hashes ids as it reads them, with the real hash: here numpy hashes them all
    monkeypatch.setattr(tabular, "_scan", None)
    monkeypatch.setattr(idhash, "_string_hashes", _hash_by_length)
    got = evaluate_run(qrels_path, run_path, METRICS).per_query
    pd.testing.assert_frame_equal(got, expected)
    with pytest.raises(DataError, match="twice"):
        load_run(write(tmp_path / "dup.txt", lines + [lines[2]]))


def test_run_frames_built_by_hand_evaluate_alike():
    """Doc ids as Arrow strings in several chunks, or as plain objects, in any row order."""
    qrels = Qrels.from_dict({"q1": {"d1": 2, "d10": 1}, "q2": {"d9": 1}})
    scores = {"q1": {"d3": 3.0, "d1": 2.0, "d10": 2.0}, "q2": {"d9": 1.0, "d1": 5.0}}
    reference = evaluate_run(qrels, Run.from_scores(scores), METRICS).means()
    frame = Run.from_scores(scores).frame.iloc[[4, 0, 2, 1, 3]].reset_index(drop=True)
    ids = frame["doc_id"].astype(str).tolist()
    chunked = pa.chunked_array([pa.array(part, pa.large_string()) for part in (ids[:2], ids[2:])])
    for doc_ids in (pd.array(chunked, dtype="str"), pd.array(ids, dtype=object)):
        run = Run(frame.assign(doc_id=doc_ids), ordered=False)
        assert evaluate_run(qrels, run, METRICS).means() == reference


@pytest.mark.parametrize("rows", [[4, 0, 3, 3, 1], [0, 2, 4], []])
def test_take_across_chunks_keeps_the_order_asked_for(rows):
    values = pa.chunked_array(
        [pa.array(["a", "b"]), pa.array([], pa.string()), pa.array(["c", "d", "e"])]
    )
    rows = np.array(rows, dtype=np.int64)
    assert idhash.take(values, rows).to_pylist() == [values[int(i)].as_py() for i in rows]
