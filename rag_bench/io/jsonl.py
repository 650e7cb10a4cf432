"""Reading JSON Lines files with errors that name the file, the line and the fix; and JSON
that stays JSON when written (:func:`finite`)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag_bench.errors import DataError, shown_value
from rag_bench.io.textfile import text_lines


def read_jsonl(path: Path, what: str) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line of a JSONL file.

    A UTF-8 byte-order mark and CRLF line ends are accepted; anything else that is not one
    JSON object per line is a :class:`DataError` located at its line.
    """
    if not path.is_file():
        raise DataError(
            path, f"missing {what} file", f"create {path.name} (one JSON object per line)"
        )
    for number, line in text_lines(path):
        try:
            value = json.loads(line, parse_constant=_no_constant)
        except RecursionError:
            raise DataError(path, "JSON nested too deep", "flatten the record", number) from None
        except json.JSONDecodeError as exc:
            raise DataError(
                path,
                f"not valid JSON ({exc.msg} at column {exc.colno})",
                "write one complete JSON object per line",
                number,
            ) from None
        except ValueError as exc:  # NaN or Infinity, which JSON has not
            raise DataError(
                path, f"not valid JSON ({exc})", "write finite numbers", number
            ) from None
        if not isinstance(value, dict):
            raise DataError(
                path,
                f"a line holds a JSON {type(value).__name__}, not an object",
                "write one JSON object per line",
                number,
            )
        yield number, value


def field(
    record: dict,
    name: str,
    kind: type | tuple[type, ...],
    path: Path,
    line: int,
    *,
    required: bool = False,
    default: Any = None,
) -> Any:
    """Fetch ``record[name]`` checking its JSON type; ids given as numbers become strings. The
    value is of type ``kind`` (checked here, at run time), hence ``Any`` to the type checker."""
    if name not in record or record[name] is None:
        if required:
            raise DataError(path, f"missing field {name!r}", f'add "{name}" to the object', line)
        return default
    value = record[name]
    if kind is str and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in kinds):
        expected = (
            kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        )
        raise DataError(
            path,
            f"field {name!r} is a {type(value).__name__}, expected {expected}",
            f'give "{name}" a {expected} value',
            line,
        )
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not _finite(value):
        raise DataError(
            path,
            f"field {name!r} is {shown_value(value)}, beyond the range of a float",
            f'give "{name}" a finite number',
            line,
        )
    return value


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int of hundreds of digits
        return False


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def finite(value: object) -> object:
    """``value`` with every non-finite float (a sum that overflowed, a NaN) as the text SQL
    shows, "inf", "-inf" or "nan": what ``json.dumps`` would write as the non-JSON Infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
