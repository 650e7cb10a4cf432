"""The compiled scanner and hash sets (rag_bench/io/_scan.c, _groups.c) against the readers and
numpy code they stand in for: whatever file they accept, they read to the same frame, the same
doubles and the same hashes; whatever they decline, the other readers still read (or reject)
as before."""

from __future__ import annotations

import math
import struct

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_bench.data.qrels import BEIR_QRELS, TREC_QRELS
from rag_bench.data.rankings import TREC_RUN
from rag_bench.errors import DataError
from rag_bench.io import idhash, tabular
from rag_bench.io.idhash import IdColumn

FORMATS = {"run": TREC_RUN, "trec qrels": TREC_QRELS, "beir qrels": BEIR_QRELS}
SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def test_the_compiled_modules_are_built():
    """They are optional for a user (reading falls back to pyarrow and numpy, to the same
    values), not for the tests: `pip install -e .` builds them where a C compiler exists."""
    assert tabular._scan is not None, "rag_bench/io/_scan.c is not built: pip install -e ."
    assert idhash._groups is not None, "rag_bench/io/_groups.c is not built: pip install -e ."


def compiled(path) -> pd.DataFrame | None:
    """The run file as the compiled scanner reads it (None: declined)."""
    return tabular._read_compiled(path, TREC_RUN, tabular._fast_layout(path, TREC_RUN))


def without_scanner(monkeypatch, path, fmt):
    """What read_records gives (a frame, or the DataError's text) without the compiled modules."""
    with monkeypatch.context() as patch:
        patch.setattr(tabular, "_scan", None)
        patch.setattr(idhash, "_groups", None)
        return read_or_error(path, fmt)


def read_or_error(path, fmt):
    try:
        return tabular.read_records(path, fmt)
    except DataError as error:
        return str(error)


def assert_same_hashes(frame: pd.DataFrame) -> None:
    """The ids' hashes (the scanner's, if it read them) are numpy's hashes of the same strings,
    and a Categorical's strings kept from the reader are its categories."""
    for name in frame:
        column = IdColumn.of(frame[name])
        if isinstance(frame[name].dtype, pd.StringDtype):
            expected = idhash._string_hashes(column.values.combine_chunks())
            assert np.array_equal(column.hashes(), expected)
        elif isinstance(frame[name].dtype, pd.CategoricalDtype):  # strings the reader kept
            values = pa.array(frame[name].astype(str).to_numpy(object), type=pa.large_string())
            assert column.take(np.arange(len(frame))).to_pylist() == values.to_pylist()
            assert np.array_equal(column.hashes(), idhash._string_hashes(values))


def values_of(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame's values: a Categorical's categories may come in another order, or as another
    string type, from the line-by-line reader than from the other two."""
    return frame.assign(
        **{
            name: frame[name].astype(object)
            for name in frame
            if isinstance(frame[name].dtype, pd.CategoricalDtype)
        }
    )


def assert_read_alike(monkeypatch, path, fmt) -> None:
    expected = without_scanner(monkeypatch, path, fmt)
    got = read_or_error(path, fmt)
    if isinstance(expected, str):
        assert got == expected
        return
    pd.testing.assert_frame_equal(values_of(got), values_of(expected))
    for name in got:  # the doubles bit for bit (assert_frame_equal allows a tolerance)
        if got[name].dtype == np.float64:
            assert got[name].to_numpy().tobytes() == expected[name].to_numpy().tobytes()
    assert_same_hashes(got)


# --- numbers: the double Python's float() gives, bit for bit ----------------------------------

NUMBER_FORMS = [
    repr,
    "{:.17g}".format,
    "{:.3e}".format,
    "{:.6f}".format,
    "{:+.4f}".format,
    "{:.25f}".format,
    "{:.2E}".format,
    lambda x: f"{x:.5f}".rstrip("0"),  # "3." forms
    lambda x: f"{x:.5f}".lstrip("0") if abs(x) < 1 and x >= 0 else repr(x),  # ".5" forms
    lambda x: "000" + repr(abs(x)),
]


def scanned_scores(tmp_path, texts: list[str]) -> np.ndarray | None:
    path = tmp_path / "scores.run"
    lines = [f"q Q0 d{i} {i + 1} {text} tag" for i, text in enumerate(texts)]
    path.write_text("\n".join(lines) + "\n")
    frame = compiled(path)
    return None if frame is None else frame["score"].to_numpy()


@SETTINGS
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=64)
        | st.floats(min_value=-1e3, max_value=1e3)
        | st.integers(-(10**30), 10**30).map(float),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from(range(len(NUMBER_FORMS))),
)
def test_scores_are_the_doubles_python_reads(tmp_path, values, form):
    texts = [NUMBER_FORMS[form](value) for value in values]
    # beyond the largest double a text reads as infinite: declined, as the other readers do
    texts = [t for t in texts if math.isfinite(float(t)) and len(t) < 60]
    if not texts:
        return
    got = scanned_scores(tmp_path, texts)
    assert got is not None, texts
    for text, value in zip(texts, got):
        assert struct.pack("<d", value) == struct.pack("<d", float(text)), text


@pytest.mark.parametrize(
    "text",
    [
        "9007199254740993",  # 2^53 + 1: beyond the exact mantissa
        "0.1",
        "1e22",
        "1e23",
        "123456789012345678901234567890",
        "4.9406564584124654e-324",
        "2.2250738585072011e-308",
        "1.7976931348623157e308",
        "-0",
        "-0.0e5",
        "0.000000000000000000000000000001",
        "1" + "0" * 40 + "e-40",
    ],
)
def test_hard_numbers_are_read_exactly(tmp_path, text):
    got = scanned_scores(tmp_path, [text])
    assert got is not None
    assert struct.pack("<d", got[0]) == struct.pack("<d", float(text))


@pytest.mark.parametrize(
    "text", ["inf", "nan", "1e999", "0x10", "1_000", "1e", ".", "+", "1.2.3", "٣", "1e+"]
)
def test_what_is_not_a_plain_finite_number_is_declined(tmp_path, text):
    assert scanned_scores(tmp_path, ["1.0", text]) is None


# --- whole files: the same frame, or the same error -------------------------------------------

FIELD_TEXT = st.text(
    alphabet=st.sampled_from(list("ab1Q0.-+e#é漢") + [" ", "\t", "\r", "\x7f", "\x00", "\n"]),
    max_size=6,
)


@st.composite
def record_files(draw) -> tuple[bytes, str]:
    """Files of mostly regular lines, with hostile bytes mixed in."""
    fmt = draw(st.sampled_from(sorted(FORMATS)))
    n_fields = FORMATS[fmt].n_fields
    delimiter = draw(st.sampled_from([" ", "\t"])) if fmt != "beir qrels" else "\t"
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    lines = ["query-id\tcorpus-id\tscore"] if fmt == "beir qrels" else []
    queries = draw(st.lists(st.sampled_from(["q1", "q2", "3", "é"]), min_size=1, max_size=4))
    for query in queries:
        for k in range(draw(st.integers(1, 6))):
            doc = draw(st.sampled_from(["d1", "d2", "doc-漢", "clueweb12-0000tw-00-0000" + str(k)]))
            number = draw(st.sampled_from(["3", "0", "-1", "2.5", "1e2", "12345678901234567890"]))
            fields = {
                "run": [query, "Q0", doc, str(k + 1), number, "tag"],
                "trec qrels": [query, "0", doc, number],
                "beir qrels": [query, doc, number],
            }[fmt]
            if draw(st.integers(0, 9)) == 0:  # a hostile field
                fields[draw(st.integers(0, n_fields - 1))] = draw(FIELD_TEXT)
            if fmt == "run" and draw(st.integers(0, 5)) == 0:
                fields.append("trailing words")
            lines.append(delimiter.join(fields))
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(["", "# a comment", "  ", "\r"])))
    data = ending.join(lines) + draw(st.sampled_from(["", ending, ending * 2]))
    raw = data.encode()
    if draw(st.integers(0, 15)) == 0:  # invalid UTF-8
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + b"\xff" + raw[at:]
    return raw, fmt


@SETTINGS
@given(record_files())
def test_any_file_reads_to_the_same_frame_or_error(tmp_path, monkeypatch, case):
    raw, fmt = case
    path = tmp_path / "records.txt"
    path.write_bytes(raw)
    assert_read_alike(monkeypatch, path, FORMATS[fmt])


@pytest.mark.parametrize("cores", [1, 2, 3, 7])
def test_a_file_read_in_parts_reads_as_in_one(tmp_path, monkeypatch, cores):
    """Parts of a few lines each, their ids' runs cut between parts."""
    lines = [
        f"q{q} Q0 d{(q * 7 + k) % 13}-{k} {k} {1.0 / (k + 1)!r} tag"
        for q in range(9)
        for k in range(5 + q)
    ]
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines))  # no newline at the end
    whole = tabular.read_records(path, TREC_RUN)
    monkeypatch.setattr(tabular, "SCAN_PART", 50)
    monkeypatch.setattr(tabular, "usable_cores", lambda: cores)
    assert len(tabular._scan_parts(path.read_bytes(), 0, path.stat().st_size, cores)) == cores
    parted = compiled(path)
    pd.testing.assert_frame_equal(parted, whole)
    assert_same_hashes(parted)
    assert_read_alike(monkeypatch, path, TREC_RUN)


def test_a_duplicate_across_parts_is_found(tmp_path, monkeypatch):
    lines = [f"q1 Q0 d{k} {k} {10 - k} tag" for k in range(8)] + ["q1 Q0 d0 9 1 tag"]
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(tabular, "SCAN_PART", 40)
    monkeypatch.setattr(tabular, "usable_cores", lambda: 4)
    with pytest.raises(DataError, match=r"run.txt:9.*first on line 1"):
        tabular.read_records(path, TREC_RUN)


# --- hash sets per group ----------------------------------------------------------------------


def numpy_repeat(starts: np.ndarray, keys: np.ndarray) -> bool:
    bounds = np.append(starts, len(keys))
    return any(
        len(np.unique(keys[a:b])) < b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    )


@pytest.fixture(params=[False, True], ids=["one part", "parts on 3 threads"])
def parts(request, monkeypatch):
    """The groups in one call, or shared out over three threads however few their rows."""
    if request.param:
        monkeypatch.setattr(idhash, "PARALLEL_ROWS", 1)
        monkeypatch.setattr(idhash, "usable_cores", lambda: 3)


@SETTINGS
@given(st.lists(st.lists(st.integers(0, 12), max_size=30), min_size=1, max_size=20))
def test_a_repeat_within_a_group_and_only_there(parts, groups):
    keys = np.array([k for group in groups for k in group], dtype=np.uint64)
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]]).astype(np.int64)
    assert idhash.grouped_repeat(starts, keys) == numpy_repeat(starts, keys)


@SETTINGS
@given(
    st.lists(
        st.tuples(st.integers(-1, 4), st.lists(st.integers(0, 9), max_size=15)),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.lists(st.integers(0, 9), max_size=8), min_size=5, max_size=5),
)
def test_the_join_finds_every_pair_of_equal_keys_in_row_order(parts, groups, entries):
    """Rows in groups of a query (-1: none; a query may come back), entries per query, hash
    collisions (equal keys within a query's entries) included."""
    keys = np.array([k for _, rows in groups for k in rows], dtype=np.uint64)
    starts = np.cumsum([0] + [len(rows) for _, rows in groups[:-1]]).astype(np.int64)
    group_query = np.array([q for q, _ in groups], dtype=np.int64)
    entry_keys = np.array([k for per_query in entries for k in per_query], dtype=np.uint64)
    offsets = np.cumsum([0] + [len(e) for e in entries]).astype(np.int64)
    expected = []
    row = 0
    for query, rows in groups:
        for key in rows:
            if query >= 0:
                expected += [
                    (row, e)
                    for e in range(offsets[query], offsets[query + 1])
                    if entry_keys[e] == key
                ]
            row += 1
    found = idhash.grouped_join(starts, group_query, keys, offsets, entry_keys)
    if found is None:  # more pairs than rows (of a part): a row with several
        rows = [row for row, _ in expected]
        assert len(set(rows)) < len(rows)
        return
    got = sorted(zip(found[0].tolist(), found[1].tolist()))
    assert got == sorted(expected)
    assert list(found[0]) == sorted(found[0])


def test_bad_groups_are_an_error_not_a_crash():
    keys = np.arange(4, dtype=np.uint64)
    with pytest.raises(ValueError):
        idhash._groups.any_repeat(np.array([0, 9], dtype=np.int64), keys)
    with pytest.raises(ValueError):
        idhash._groups.join(
            np.array([0], dtype=np.int64),
            np.array([3], dtype=np.int64),  # a query without offsets
            keys,
            np.array([0, 1], dtype=np.int64),
            keys,
            np.empty(4, dtype=np.int64),
            np.empty(4, dtype=np.int64),
        )


def test_large_strings_of_a_scanned_run_are_arrow_strings(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 d1 1 2.0 tag\nq1 Q0 d2 2 1.0 tag\n")
    frame = compiled(path)
    assert IdColumn.of(frame["doc_id"]).values.type == pa.large_string()


def test_categoricals_skip_no_check_they_need():
    """pandas' constructors without validation build what the validating one does."""
    encoded = pa.compute.dictionary_encode(pa.array(["b", "a", "b", "c", "a"]))
    fast = tabular._as_categorical(encoded, encoded.indices.to_numpy())
    checked = pd.Categorical.from_codes(
        encoded.indices.to_numpy().astype(np.int8),
        categories=pd.Index(["b", "a", "c"], dtype=object),
    )
    pd.testing.assert_extension_array_equal(fast, checked)
    assert fast.codes.dtype == checked.codes.dtype
    assert list(fast) == ["b", "a", "b", "c", "a"]


def test_fields_after_a_runs_tag_are_read_past_when_every_line_has_them(tmp_path, monkeypatch):
    """trec_eval ignores what follows the run tag; pyarrow's reader takes lines of as many
    fields as the first, and so does the scanner."""
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 d1 1 2.5 tag extra 漢\nq1 Q0 d2 2 1.5 tag more 字\n")
    assert compiled(path) is not None
    assert_read_alike(monkeypatch, path, TREC_RUN)
    path.write_text("q1 Q0 d1 1 2.5 tag extra\nq1 Q0 d2 2 1.5 tag\n")  # one line without
    assert compiled(path) is None
    assert_read_alike(monkeypatch, path, TREC_RUN)
