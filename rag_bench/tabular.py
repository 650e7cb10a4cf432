"""Reading whitespace-delimited record files (TREC runs, TREC and BEIR qrels).

The fast path hands the file to pyarrow's multi-threaded CSV reader and checks the result with
vectorised tests. Whenever anything is off (a parse error, a bad value, a duplicate) the file is
read again line by line, which finds the first offending line and reports it by number. The slow
path is also what accepts irregular whitespace (several spaces, mixed tabs), as trec_eval does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import isfinite
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.errors import DataError
from rag_bench.textfile import text_lines

ID = "id"  # a string identifier, kept as a pandas Categorical
SCORE = "score"  # a finite float
GRADE = "grade"  # a non-negative integer


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

    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]


def read_records(path: str | Path, fmt: RecordFormat) -> pd.DataFrame:
    """Read ``path`` as records of ``fmt``; raise :class:`DataError` naming the bad line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, f"no such {fmt.what} file", "check the path")
    if path.stat().st_size == 0:
        raise DataError(path, f"the {fmt.what} file is empty", f"each line is: {fmt.layout_hint}")
    frame = _read_fast(path, fmt)
    if frame is None or not _valid(frame, fmt):
        frame = _read_slow(path, fmt)
    if frame.empty:
        raise DataError(
            path, f"the {fmt.what} file has no records", f"each line is: {fmt.layout_hint}"
        )
    return frame


def _delimiter(path: Path) -> str | None:
    """The single-character delimiter of the first record line, if the line is regular."""
    with path.open("rb") as handle:
        for raw in handle:
            line = raw.rstrip(b"\r\n").removeprefix(b"\xef\xbb\xbf")
            if line.strip():
                if b"\t" in line and b" " not in line:
                    return "\t"
                if b" " in line and b"\t" not in line:
                    return " "
                return None
    return None


def _read_fast(path: Path, fmt: RecordFormat) -> pd.DataFrame | None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    delimiter = _delimiter(path)
    if delimiter is None:
        return None
    names = [f"f{i}" for i in range(fmt.n_fields)]
    for field in fmt.fields:
        names[field.position] = field.name
    arrow_types = {ID: pa.string(), SCORE: pa.float64(), GRADE: pa.int64()}
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
    return pd.DataFrame({f.name: _column(table[f.name], f.kind) for f in fmt.fields}, copy=False)


def _column(column, kind: str):
    """An Arrow column as numpy, ids as a Categorical (one dictionary over all blocks)."""
    import pyarrow.compute as pc

    combined = column.combine_chunks()
    if kind != ID:
        return combined.to_numpy()
    # Encoding the combined array once is far cheaper than unifying per-block dictionaries.
    encoded = pc.dictionary_encode(combined)
    categories = pd.Index(encoded.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    codes = encoded.indices.to_numpy()
    return pd.Categorical.from_codes(codes, categories=categories, validate=False)


def _valid(frame: pd.DataFrame, fmt: RecordFormat) -> bool:
    """Vectorised checks of what the fast path read; any failure sends the file to the slow
    path, which finds and names the offending line."""
    for field in fmt.fields:
        values = frame[field.name].array
        if field.kind == SCORE and not np.isfinite(values).all():
            return False
        if field.kind == GRADE and (values < 0).any():
            return False
    if fmt.unique:
        key = np.zeros(len(frame), dtype=np.int64)
        for name in fmt.unique:
            column = frame[name].array
            key *= len(column.categories)
            key += column.codes
        key.sort()  # sorting integers is much faster than hashing them
        if np.any(key[1:] == key[:-1]):
            return False
    return True


def _convert(value: str, kind: str) -> object:
    if kind == SCORE:
        number = float(value)
        if not isfinite(number):
            raise ValueError("not a finite number")
        return number
    if kind == GRADE:
        grade = int(value)
        if grade < 0:
            raise ValueError("negative")
        return grade
    return value


_KIND_HINT = {
    SCORE: "a finite number",
    GRADE: "a whole number ≥ 0 (0 = judged non-relevant)",
}


def _read_slow(path: Path, fmt: RecordFormat) -> pd.DataFrame:
    columns: dict[str, list] = {f.name: [] for f in fmt.fields}
    seen: dict[tuple, int] = {}
    lines = text_lines(path)
    if fmt.header:
        next(lines, None)
    for number, line in lines:
        parts = line.split()
        if len(parts) != fmt.n_fields:
            raise DataError(
                path,
                f"expected {fmt.n_fields} fields in a {fmt.what} line, found {len(parts)}",
                f"each line is: {fmt.layout_hint}",
                number,
            )
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
        elif field.kind == SCORE:
            data[field.name] = np.asarray(values, dtype=np.float64)
        else:
            data[field.name] = np.asarray(values, dtype=np.int64)
    return pd.DataFrame(data)
