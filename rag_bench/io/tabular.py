"""Reading whitespace-delimited record files (TREC runs, TREC and BEIR qrels).

Three readers, fastest first. The compiled scanner (``_scan.c``, where it was built) reads the
parts of the file on every core and hashes the document ids as it goes; it declines any file it
would not read exactly as the next two do. pyarrow's multi-threaded CSV reader comes next. Both
results are checked with vectorised tests. Whenever anything is off (a parse error, a bad value,
a duplicate) the file is read again line by line, which finds the first offending line and
reports it by number. The slow path is also what accepts irregular whitespace (several spaces,
mixed tabs), as trec_eval does.

The scanner maps the file into memory: a file truncated by another process while it is being
read can end this one with SIGBUS, as with any reader of a memory-mapped file.

The forms trec_eval 10 reads are read alike: a line starting with ``#`` is a comment, grades may be
negative (judged non-relevant; trec_eval calls them unjudged, which no metric here tells apart),
and a format may ignore fields after its last one (trec_eval's run lines).

Identifiers come in two kinds. :data:`ID` columns (query ids, qrels' document ids) become pandas
Categoricals. :data:`TEXT_ID` columns (a run's document ids: millions of rows, about as many
distinct values) stay Arrow-backed strings, because building a dictionary over them costs more than
everything else put together. Where rows must be matched on such ids they are compared through
64-bit hashes (:mod:`rag_bench.io.idhash`): equal ids always have equal hashes, and the rare
unequal ids with equal hashes are told apart by whoever uses them (the slow path here, a string
comparison elsewhere).
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from math import isfinite
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.errors import DataError
from rag_bench.io.idhash import (
    ROW_BLOCK,
    IdColumn,
    combine_into,
    grouped_repeat,
    remember_categories,
    remember_hashes,
    take,
)
from rag_bench.io.textfile import text_lines
from rag_bench.io.threads import in_parallel, usable_cores

try:  # the compiled line scanner (rag_bench/io/_scan.c); pyarrow reads the files without it
    from rag_bench.io import _scan
except ImportError:
    _scan = None  # type: ignore[assignment]

ID = "id"  # a string identifier, kept as a pandas Categorical
TEXT_ID = "text id"  # a string identifier with about as many values as rows, kept as strings
SCORE = "score"  # a finite float
GRADE = "grade"  # an integer within GRADES
GRADES = (-127, 127)  # the grades trec_eval documents
COMMENT = "#"
MAX_FAST_EXTRA = 4  # trailing fields the fast path reads (and drops); more go the slow way


@dataclass(frozen=True)
class Field:
    name: str
    position: int
    kind: str


@dataclass(frozen=True)
class RecordFormat:
    """What one line holds: ``n_fields`` whitespace-separated values, some of them kept."""

    what: str  # "TREC run", "TREC qrels", ...
    n_fields: int
    fields: tuple[Field, ...]
    unique: tuple[str, ...]  # names of the fields that together must be unique
    layout_hint: str  # how a correct line looks, for error messages
    header: bool = False
    trailing: bool = False  # fields after the n_fields-th are ignored

    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]


def read_records(path: str | Path, fmt: RecordFormat, allow_empty: bool = False) -> pd.DataFrame:
    """Read ``path`` as records of ``fmt``; raise :class:`DataError` naming the bad line (and,
    unless ``allow_empty``, when a file of non-empty lines holds no record)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, f"no such {fmt.what} file", "check the path")
    if path.stat().st_size == 0:
        raise DataError(path, f"the {fmt.what} file is empty", f"each line is: {fmt.layout_hint}")
    layout = _fast_layout(path, fmt)
    frame = _read_compiled(path, fmt, layout)
    if frame is None:
        frame = _read_fast(path, fmt, layout)
    if frame is None or not _valid(frame, fmt):
        frame = _read_slow(path, fmt)
    if frame.empty and not allow_empty:
        raise DataError(
            path, f"the {fmt.what} file has no records", f"each line is: {fmt.layout_hint}"
        )
    return frame


FAST_LINE_LIMIT = 1 << 16  # a first line longer than this goes to the line-by-line reader


def _first_line(path: Path) -> tuple[str | None, int]:
    """The single-character delimiter of the first line (``None`` unless the line is regular,
    not a comment, the file's first, and shorter than ``FAST_LINE_LIMIT``: a longer one is left
    to the line-by-line reader, so a hostile one-line file is read once, not twice), and its
    number of fields."""
    with path.open("rb") as handle:
        for raw in iter(lambda: handle.readline(FAST_LINE_LIMIT), b""):
            if len(raw) == FAST_LINE_LIMIT and not raw.endswith(b"\n"):
                return None, 0
            line = raw.rstrip(b"\r\n").removeprefix(b"\xef\xbb\xbf")
            if line.strip():
                if line.startswith(COMMENT.encode()):
                    return None, 0
                if b"\t" in line and b" " not in line:
                    return "\t", line.count(b"\t") + 1
                if b" " in line and b"\t" not in line:
                    return " ", line.count(b" ") + 1
                return None, 0
    return None, 0


SCAN_PART = 1 << 22  # bytes: a file is scanned in parts of at least this size, one per core
_SCAN_KINDS = {ID: b"i", TEXT_ID: b"t", SCORE: b"s", GRADE: b"g"}


def _read_compiled(
    path: Path, fmt: RecordFormat, layout: tuple[str, int] | None
) -> pd.DataFrame | None:
    """The file read by the compiled scanner (``rag_bench/io/_scan.c``), its parts on all cores
    at once; ``None`` when the scanner is not built or declines the file (anything it does not
    read exactly as the other two readers do). ``layout``: :func:`_fast_layout`'s."""
    if _scan is None or layout is None:
        return None
    delimiter, n_fields = layout
    kinds = bytearray(b"." * n_fields)  # every line has the first line's fields
    for field in fmt.fields:
        kinds[field.position : field.position + 1] = _SCAN_KINDS[field.kind]
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start = 0
        if fmt.header:
            start = data.find(b"\n") + 1
            if start == 0 or not data[:start].strip():
                return None
        parts = _scan_parts(data, start, len(data), usable_cores())
        scanned = in_parallel(
            [partial(_scan_part, data, a, b, delimiter, bytes(kinds), fmt) for a, b in parts],
            workers=len(parts),
        )
    if any(part is None for part in scanned) or sum(part[0] for part in scanned) == 0:
        return None
    columns = [_scanned_column(field, scanned) for field in fmt.fields]
    return pd.DataFrame(dict(zip(fmt.field_names(), columns)), copy=False)


def _scan_parts(data, start: int, end: int, cores: int) -> list[tuple[int, int]]:
    """Byte ranges of whole lines: one per core, none under :data:`SCAN_PART` bytes."""
    n = max(1, min(cores, (end - start) // SCAN_PART))
    cuts = [start]
    for k in range(1, n):
        newline = data.find(b"\n", max(cuts[-1], start + (end - start) * k // n))
        if newline < 0:
            break
        cuts.append(newline + 1)
    cuts.append(end)
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def _scan_part(data, start: int, end: int, delimiter: str, kinds: bytes, fmt: RecordFormat):
    """(rows, per field its outputs) of one part, or None when the scanner declines it."""
    size = end - start
    # at most this many lines: each holds a byte per field and a delimiter or line end after it
    # (the arrays are allocated, not touched: only the rows written take memory)
    rows = (size + 1) // (2 * len(kinds)) + 1
    outputs: dict[int, list[np.ndarray]] = {}
    for field in fmt.fields:
        arrays: list[np.ndarray]
        if field.kind == ID:  # the row each run of equal ids starts at, the runs' ids, hashes
            arrays = [
                np.empty(rows, np.int64),
                np.empty(rows + 1, np.int64),
                np.empty(size + 8, np.uint8),
                np.empty(rows, np.uint64),
            ]
        elif field.kind == TEXT_ID:  # every id, and its hash
            arrays = [
                np.empty(rows + 1, np.int64),
                np.empty(size + 8, np.uint8),
                np.empty(rows, np.uint64),
            ]
        else:
            arrays = [np.empty(rows, np.float64 if field.kind == SCORE else np.int64)]
        outputs[field.position] = arrays
    in_order = [array for position in sorted(outputs) for array in outputs[position]]
    done = _scan.scan(data, start, end, delimiter, kinds, in_order)
    if done is None:
        return None
    n, runs = done
    return n, {f.name: (outputs[f.position], runs[f.position]) for f in fmt.fields}


def _arrow_strings(n: int, offsets: np.ndarray, data: np.ndarray):
    import pyarrow as pa

    return pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(offsets[: n + 1]), pa.py_buffer(data[: offsets[n]])
    )


def _scanned_column(field: Field, scanned: list):
    """One field's column, from the outputs of every part, as :func:`_column` makes it."""
    import pyarrow as pa

    sizes = [part[0] for part in scanned]
    outputs = [part[1][field.name] for part in scanned]
    if field.kind == ID:
        bases = np.cumsum([0] + sizes[:-1])
        starts = np.concatenate([out[0][:runs] + base for (out, runs), base in zip(outputs, bases)])
        heads = pa.concat_arrays([_arrow_strings(runs, out[1], out[2]) for out, runs in outputs])
        hashes = np.concatenate([out[3][:runs] for out, runs in outputs])
        return _categorical_of_runs(heads, starts, sum(sizes), hashes)
    if field.kind == TEXT_ID:
        strings = pa.chunked_array(
            [_arrow_strings(n, out[0], out[1]) for n, (out, _) in zip(sizes, outputs)],
            type=pa.large_string(),
        )
        ids = pd.array(strings, dtype="str")
        remember_hashes(
            IdColumn.of(pd.Series(ids, copy=False)).values,
            np.concatenate([out[2][:n] for n, (out, _) in zip(sizes, outputs)]),
        )
        return ids
    return np.concatenate([out[0][:n] for n, (out, _) in zip(sizes, outputs)])


def _fast_layout(path: Path, fmt: RecordFormat) -> tuple[str, int] | None:
    """The first line's delimiter and field count, when the two fast readers take the file
    (then every line must have as many fields); ``None`` sends it to the line-by-line reader."""
    delimiter, n_fields = _first_line(path)
    extra = n_fields - fmt.n_fields
    if delimiter is None or not 0 <= extra <= (MAX_FAST_EXTRA if fmt.trailing else 0):
        return None
    return delimiter, n_fields


def _read_fast(
    path: Path, fmt: RecordFormat, layout: tuple[str, int] | None
) -> pd.DataFrame | None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if layout is None:
        return None
    delimiter, n_fields = layout
    names = [f"f{i}" for i in range(n_fields)]
    for field in fmt.fields:
        names[field.position] = field.name
    # large_string: what pandas' Arrow-backed strings hold, so they take the column without a copy
    arrow_types = {
        ID: pa.string(),
        TEXT_ID: pa.large_string(),
        SCORE: pa.float64(),
        GRADE: pa.int64(),
    }
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(
                column_names=names, skip_rows=1 if fmt.header else 0, block_size=1 << 22
            ),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=False),
            convert_options=pacsv.ConvertOptions(
                include_columns=fmt.field_names(),
                column_types={f.name: arrow_types[f.kind] for f in fmt.fields},
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if table.num_rows == 0:
        return None
    columns = in_parallel([partial(_column, table[f.name], f.kind) for f in fmt.fields])
    return pd.DataFrame(dict(zip(fmt.field_names(), columns)), copy=False)


def _column(column, kind: str):
    """An Arrow column as numpy, a Categorical (ids) or pandas strings (text ids, hashed now
    for the duplicate check, while the other columns are converted)."""
    if kind == ID:
        return _categorical(column)
    if kind == TEXT_ID:
        ids = pd.array(column, dtype="str")
        IdColumn.of(pd.Series(ids, copy=False)).hashes()
        return ids
    return column.to_numpy()


def _categorical(column) -> pd.Categorical:
    """Ids as a Categorical with one dictionary over all blocks.

    Equal ids mostly come in runs (the lines of one query), so only the first id of each run is
    looked up in the dictionary; the codes of the others repeat it.
    """
    import pyarrow.compute as pc

    n = len(column)
    changes = pc.not_equal(column[1:], column[:-1]).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.concatenate(([True], changes)))
    if len(starts) > n // 2:  # ids do not come in runs: encode them all
        encoded = pc.dictionary_encode(column.combine_chunks())
        return _as_categorical(encoded, encoded.indices.to_numpy())
    return _categorical_of_runs(take(column, starts), starts, n)


def _categorical_of_runs(
    heads, starts: np.ndarray, n: int, hashes: np.ndarray | None = None
) -> pd.Categorical:
    """The Categorical of ``n`` ids that come in runs: ``heads[i]`` from row ``starts[i]`` on
    (``hashes``: theirs, when known; then the categories' strings and hashes are remembered for
    :class:`IdColumn`)."""
    import pyarrow.compute as pc

    by_hash = None if hashes is None else _encoded_by_hash(heads, hashes)
    encoded = pc.dictionary_encode(heads) if by_hash is None else by_hash[0]
    run_codes = encoded.indices.to_numpy().astype(_code_type(len(encoded.dictionary)))
    if len(starts) < n:
        run_codes = np.repeat(run_codes, np.diff(np.append(starts, n)))
    categorical = _as_categorical(encoded, run_codes)
    if by_hash is not None:
        remember_categories(categorical.categories, encoded.dictionary, by_hash[1])
    return categorical


def _encoded_by_hash(strings, hashes: np.ndarray):
    """``pc.dictionary_encode(strings)`` from the strings' hashes (numbering 64-bit integers is
    faster than numbering strings), and the hashes of its dictionary; None when two distinct
    strings share a hash."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(hashes) == 0:
        return None
    codes, _ = pd.factorize(hashes)  # numbered in order of first appearance, as Arrow numbers
    seen = np.maximum.accumulate(codes)
    first = np.flatnonzero(np.r_[True, seen[1:] > seen[:-1]])  # where each code first appears
    dictionary = strings.take(first)
    if not pc.all(pc.equal(dictionary.take(codes), strings)).as_py():
        return None  # a hash collision: the strings decide
    indices = pa.array(codes, type=pa.int32())
    return pa.DictionaryArray.from_arrays(indices, dictionary), hashes[first]


def _as_categorical(encoded, codes: np.ndarray) -> pd.Categorical:
    """The Categorical of a dictionary encoding's ``codes``. Its categories are distinct and
    never missing by construction, so pandas' checks of them (hashing every one) are skipped
    where pandas offers the constructors that skip them."""
    categories = pd.Index(encoded.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    codes = codes.astype(_code_type(len(categories)), copy=False)
    dtype_of = getattr(pd.CategoricalDtype, "_from_fastpath", None)
    new = getattr(pd.Categorical, "_simple_new", None)
    if dtype_of is not None and new is not None:
        return new(codes, dtype_of(categories, False))
    return pd.Categorical.from_codes(codes, categories=categories, validate=False)


def _code_type(n_categories: int) -> np.dtype:
    """The narrowest codes pandas keeps for so many categories (so it does not convert them)."""
    return np.min_scalar_type(-n_categories - 1)


def _valid(frame: pd.DataFrame, fmt: RecordFormat) -> bool:
    """Vectorised checks of what the fast path read; any failure sends the file to the slow
    path, which finds and names the offending line (or skips a comment)."""
    for field in fmt.fields:
        values = frame[field.name].array
        if field.position == 0 and _comments(values):
            return False
        if field.kind == SCORE and not np.isfinite(values).all():
            return False
        if field.kind == GRADE and not _within(np.asarray(values), *GRADES):
            return False
    return not fmt.unique or not _may_repeat(frame, fmt.unique)


def _within(values: np.ndarray, low: int, high: int) -> bool:
    return bool(len(values) == 0 or (values.min() >= low and values.max() <= high))


def _comments(first_fields) -> bool:
    """Whether a line's first field starts a comment (the first field is a query id, a
    Categorical: only its distinct values are looked at)."""
    values = first_fields.categories if isinstance(first_fields, pd.Categorical) else first_fields
    return bool(pd.Index(values).astype(str).str.startswith(COMMENT).any())


def _exact_or_hashed(column: pd.Series) -> np.ndarray:
    """Integer keys of a column's values: a Categorical's codes, or the hashes of strings."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.array.codes
    return IdColumn.of(column).hashes()


def _may_repeat(frame: pd.DataFrame, names: Sequence[str]) -> bool:
    """Whether two rows may agree on all of ``names``: certainly not when their hashed keys all
    differ; two equal keys send the file to the slow path, which is exact."""
    keys = [_exact_or_hashed(frame[name]) for name in names]
    starts = _whole_groups(frame[names[0]])
    if starts is not None and len(keys) > 1:
        # within a group the first field is one value: the others decide
        rest = keys[1].astype(np.uint64, copy=len(keys) > 2)  # combined in place: a copy
        for more in keys[2:]:
            combine_into(rest, more)
        repeat = grouped_repeat(starts, rest)
        if repeat is not None:
            return repeat
    for start, stop in _blocks_of_whole_groups(frame[names[0]], starts):
        key = keys[0][start:stop].astype(np.uint64)
        for more in keys[1:]:
            combine_into(key, more[start:stop])
        key.sort()  # sorting integers is much faster than hashing them
        if np.any(key[1:] == key[:-1]):
            return True
    return False


def run_starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal consecutive values begins."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.r_[0, np.flatnonzero(values[1:] != values[:-1]) + 1]


def _whole_groups(column: pd.Series) -> np.ndarray | None:
    """Where each value of a Categorical starts, when equal values are contiguous (a run's
    queries); None when a value comes back later, or the column is not a Categorical."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return None
    codes = column.array.codes
    starts = run_starts(codes)
    if len(starts) != len(np.unique(codes[starts])):  # a value comes back later
        return None
    return starts


def _blocks_of_whole_groups(column: pd.Series, starts: np.ndarray | None) -> list[tuple[int, int]]:
    """Row ranges of about :data:`ROW_BLOCK` rows that never split the groups starting at
    ``starts`` (see :func:`_whole_groups`), so that duplicates can be looked for block by block;
    a single range when there are no such groups."""
    n = len(column)
    if starts is None or n <= ROW_BLOCK:
        return [(0, n)]
    at = np.searchsorted(starts, np.arange(0, n, ROW_BLOCK))
    cuts = np.unique(starts[np.minimum(at, len(starts) - 1)])
    bounds = np.append(cuts, n)
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def _convert(value: str, kind: str) -> object:
    if kind == SCORE:
        number = float(value)
        if not isfinite(number):
            raise ValueError("not a finite number")
        return number
    if kind == GRADE:
        grade = int(value)
        if not GRADES[0] <= grade <= GRADES[1]:
            raise ValueError("out of range")
        return grade
    return value


_KIND_HINT = {
    SCORE: "a finite number",
    GRADE: f"a whole number from {GRADES[0]} to {GRADES[1]} (0 or less: judged non-relevant)",
}


def _records(path: Path, fmt: RecordFormat):
    """(line number, fields) of each record line: comments skipped, then the header if any.

    A line is split into at most ``n_fields + 1`` pieces, so a huge line costs one pass over it.
    """
    lines = (
        (number, line) for number, line in text_lines(path) if not line.lstrip().startswith(COMMENT)
    )
    if fmt.header:
        next(lines, None)
    for number, line in lines:
        parts = line.split(maxsplit=fmt.n_fields)
        if len(parts) < fmt.n_fields or (len(parts) > fmt.n_fields and not fmt.trailing):
            found = _field_count(line, parts, fmt.n_fields)
            raise DataError(
                path,
                f"expected {fmt.n_fields} fields in a {fmt.what} line, found {found}",
                f"each line is: {fmt.layout_hint}",
                number,
            )
        yield number, parts


def _field_count(line: str, parts: list[str], n_fields: int) -> int | str:
    """How many fields a line has, for the error: counted exactly unless the line is too long
    to split whole."""
    if len(parts) <= n_fields or len(line) < 4096:
        return len(line.split())
    return f"more than {n_fields}"


def _read_slow(path: Path, fmt: RecordFormat) -> pd.DataFrame:
    columns: dict[str, list] = {f.name: [] for f in fmt.fields}
    seen: dict[tuple, int] = {}
    for number, parts in _records(path, fmt):
        for field in fmt.fields:
            value = parts[field.position]
            try:
                columns[field.name].append(_convert(value, field.kind))
            except ValueError:
                raise DataError(
                    path,
                    f"{field.name} {value!r} is not {_KIND_HINT[field.kind]}",
                    f"each line is: {fmt.layout_hint}",
                    number,
                ) from None
        if fmt.unique:
            key = tuple(parts[f.position] for f in fmt.fields if f.name in fmt.unique)
            if key in seen:
                raise DataError(
                    path,
                    f"{'/'.join(fmt.unique)} {' '.join(key)} appears twice "
                    f"(first on line {seen[key]})",
                    "keep one line per pair",
                    number,
                )
            seen[key] = number
    return _frame(columns, fmt.fields)


def _frame(columns: dict[str, list], fields: Sequence[Field]) -> pd.DataFrame:
    data = {}
    for field in fields:
        values = columns[field.name]
        if field.kind == ID:
            data[field.name] = pd.Categorical(values)
        elif field.kind == TEXT_ID:
            data[field.name] = pd.array(values, dtype="str")
        elif field.kind == SCORE:
            data[field.name] = np.asarray(values, dtype=np.float64)
        else:
            data[field.name] = np.asarray(values, dtype=np.int64)
    return pd.DataFrame(data)
