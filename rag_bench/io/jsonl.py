"""Reading JSON Lines files with errors that name the file, the line and the fix."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag_bench.errors import DataError
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
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                path,
                f"not valid JSON ({exc.msg} at column {exc.colno})",
                "write one complete JSON object per line",
                number,
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
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = (
            kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        )
        raise DataError(
            path,
            f"field {name!r} is a {type(value).__name__}, expected {expected}",
            f'give "{name}" a {expected} value',
            line,
        )
    return value
