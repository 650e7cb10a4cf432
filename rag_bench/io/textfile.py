"""Reading a UTF-8 text file line by line, with errors located at their line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rag_bench.errors import DataError


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield (line number, decoded line) for the non-blank lines of ``path``.

    A UTF-8 byte-order mark and CRLF line ends are accepted; bytes that are not UTF-8 are a
    :class:`DataError` naming the line.
    """
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(
                    path,
                    f"bytes that are not UTF-8 ({exc.reason})",
                    "save the file as UTF-8",
                    number,
                ) from None
            if line.strip():
                yield number, line
