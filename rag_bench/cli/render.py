"""One table renderer: a DataFrame as aligned text, JSON, CSV or Markdown."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import os
import re
import shutil
import sys
import textwrap
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

WIDE = "rag_bench.wide"  # set in the click context by --wide
MIN_TEXT = 12  # a text column is never cut narrower than this
WORD_MAX = 24  # a wrapped column keeps words up to this long whole, breaking longer ones


def columns(text: str) -> int:
    """The terminal columns a text takes: a wide or full-width character (Chinese, Japanese,
    Korean) two, a combining mark none, anything else one."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def _cut(text: str, room: int) -> str:
    """``text`` cut to ``room`` columns, its last one "…"."""
    kept, used = [], 0
    for c in text:
        used += columns(c)
        if used > room - 1:
            break
        kept.append(c)
    return "".join(kept) + "…"


def _pad(text: str, width: int, right: bool) -> str:
    gap = " " * (width - columns(text))
    return gap + text if right else text + gap


def _cell(value: object, digits: int) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _text_rows(frame: pd.DataFrame, digits: int) -> list[list[str]]:
    header = [str(c) for c in frame.columns]
    body = [[_cell(v, digits) for v in row] for row in frame.itertuples(index=False)]
    return [header, *body]


def _numeric(frame: pd.DataFrame) -> list[bool]:
    return [pd.api.types.is_numeric_dtype(frame[c]) for c in frame.columns]


def terminal_width() -> int:
    """``$COLUMNS``, else the terminal's width, else 120 (a pipe or a CI log)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    if sys.stdout is not None and sys.stdout.isatty():  # None: standard output closed
        return shutil.get_terminal_size().columns
    return 120


def table_width() -> int | None:
    """The width a table must fit: None under ``--wide``, else :func:`terminal_width`."""
    import click

    context = click.get_current_context(silent=True)
    if context is not None and context.find_root().meta.get(WIDE):
        return None
    return terminal_width()


def fit_line(text: str) -> str:
    """A line of prose wrapped to the table width (words kept whole)."""
    width = table_width()
    if width is None or len(text) <= width:
        return text
    return textwrap.fill(text, width=width, break_on_hyphens=False, subsequent_indent="  ")


def warn(text: str) -> None:
    """A warning or note on standard error, wrapped like a table's lines when a width is asked
    for (``$COLUMNS`` set); otherwise on one line, which a terminal folds by itself and a search
    of a pipe or a log finds whole."""
    import click

    at_width = os.environ.get("COLUMNS", "").isdigit()
    click.echo(fit_line(text) if at_width else text, err=True)


def hiding_order(
    drop: Sequence[str] = (), metrics: Sequence[str] = (), moved: Mapping[str, str] | None = None
) -> list[str]:
    """The order in which a table too wide for the terminal leaves columns out: ``drop``'s
    columns first (what the command says matters least), then the metric columns (``metrics``,
    in the table's fixed order) that did not move, the rightmost first, then those that moved
    (``moved``: metric → why, the most moved first), the least moved first. The one rule of
    every table with metric columns, so a metric that regressed or changed significantly is
    the last to go."""
    moved = moved or {}
    still = [m for m in metrics if m not in moved and m not in drop]
    going = [m for m in moved if m in metrics and m not in drop]
    return [*drop, *reversed(still), *reversed(going)]


def as_table(
    frame: pd.DataFrame,
    digits: int = 4,
    drop: Sequence[str] = (),
    wrap: Sequence[str] = (),
    metrics: Sequence[str] = (),
    moved: Mapping[str, str] | None = None,
) -> str:
    """Aligned text. The cells of the ``wrap`` columns continue on lines of their own below the
    row (at their newlines, and at spaces or after ``,;[/|`` to fit the table width). Wider
    than the table width even with those at their narrowest, it leaves out columns in
    :func:`hiding_order` (``drop``, then the metric columns ``metrics`` that did not move, then
    those that did: ``moved``), then cuts the longest text cells of the other columns with "…",
    and says what it hid and which moved metrics it kept."""
    rows = _text_rows(frame, digits)
    right = _numeric(frame)
    width = table_width()
    hidden: list[str] = []
    wrapped = [c for c in wrap if c in rows[0]] if len(rows) > 1 else []
    if width is not None:
        order = hiding_order(drop, metrics, moved)
        rows, right, hidden = _fit(rows, right, width, order, wrapped)
    if wrapped:
        rows = _wrapped(rows, [c for c in wrapped if c in rows[0]], width)
    widths = [max(columns(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [_pad(c, w, right[i] and n > 0) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    if hidden:
        lines.append(fit_line(_hidden_note(width, hidden, rows[0], moved or {})))
    return "\n".join(lines)


def _hidden_note(width: int | None, hidden: list[str], shown: list[str], moved: Mapping) -> str:
    kept = [f"{m} ({why})" for m, why in moved.items() if m in shown]
    return (
        f"(not shown, to fit {width} columns: {', '.join(hidden)}"
        + (f"; kept as they moved: {', '.join(kept)}" if kept else "")
        + "; --wide shows every column)"
    )


def _wrapped(rows: list[list[str]], names: Sequence[str], width: int | None):
    """The rows with each cell of the columns ``names`` split at its newlines and, given a
    ``width``, wrapped to its share of it (a wrapped line's continuation indented); a cell's
    further lines go on rows of their own below it, blank in the other columns."""
    index = [rows[0].index(name) for name in names]
    limits = _shares(rows, index, width) if width is not None else {}
    out = [rows[0]]
    for row in rows[1:]:
        pieces = {i: _pieces(row[i], limits.get(i)) for i in index}
        for n in range(max(len(p) for p in pieces.values())):
            out.append(
                [
                    (pieces[i][n] if n < len(pieces[i]) else "")
                    if i in pieces
                    else (cell if n == 0 else "")
                    for i, cell in enumerate(row)
                ]
            )
    return out


class _Wrapper(textwrap.TextWrapper):
    """Wraps at spaces and, inside a word too long for the line, after ``,;[/|``: a sweep's
    name (``hybrid[retriever.k1=0.9,chunker.size=128]``) breaks between its settings."""

    BREAKS = re.compile(r"(?<=[,;\[/|])(?=[^\s,;\[/|])")

    def __init__(self, width: int = 70, **options):
        super().__init__(width, break_on_hyphens=False, **options)

    def _split(self, text: str) -> list[str]:
        room = self.width - len(self.subsequent_indent)
        return [
            piece
            for chunk in super()._split(text)
            for piece in (self.BREAKS.split(chunk) if len(chunk) > room else [chunk])
            if piece
        ]


def _pieces(cell: str, limit: int | None) -> list[str]:
    lines = cell.split("\n")
    if limit is None:
        return lines
    wrapper = _Wrapper(limit, subsequent_indent="  ")
    return [
        piece
        for line in lines
        for piece in (wrapper.wrap(line) if line.isascii() else _wide_wrap(line, limit)) or [""]
    ]


def _wide_wrap(line: str, limit: int, indent: str = "  ") -> list[str]:
    """:class:`_Wrapper`'s lines of a text holding wide characters, measured in terminal
    columns: words whole where they fit, a run of Chinese (no spaces) broken where the line is
    full."""
    out: list[str] = []
    current, used = "", 0
    for chunk in _Wrapper(1)._split(line):
        room = limit - (len(indent) if out else 0)
        if chunk.isspace():
            if current:
                current, used = current + " ", used + 1
            continue
        if used + columns(chunk) > room and current.strip():
            out.append(current.rstrip())
            current, used, room = "", 0, limit - len(indent)
        for c in chunk:
            if used + columns(c) > room and current.strip():
                out.append(current.rstrip())
                current, used, room = "", 0, limit - len(indent)
            current, used = current + c, used + columns(c)
    if current.strip():
        out.append(current.rstrip())
    return out[:1] + [indent + piece for piece in out[1:]]


def _narrowest(rows: list[list[str]], i: int) -> int:
    """How narrow a wrapped column may be: as wide as its header, ``MIN_TEXT`` and its longest
    unbreakable piece (a class name, a setting of a sweep; up to ``WORD_MAX``), or its longest
    line if that is shorter."""
    lines = [line for r in rows[1:] for line in r[i].split("\n")]
    longest = max((columns(line) for line in lines), default=0)
    pieces = (p.strip() for line in lines for p in _Wrapper(1)._split(line))  # split all
    word = min(max((columns(p) for p in pieces), default=0), WORD_MAX)
    return max(len(rows[0][i]), min(longest, max(MIN_TEXT, word)))


def _shares(rows: list[list[str]], index: list[int], width: int) -> dict[int, int]:
    """How wide each wrapped column may be: the room the other columns leave, shared evenly,
    except that a column needing less than its share keeps its own width and leaves the rest
    to the others; never narrower than :func:`_narrowest`."""
    need = {i: max(columns(line) for r in rows for line in r[i].split("\n")) for i in index}
    others = [max(columns(r[i]) for r in rows) for i in range(len(rows[0])) if i not in index]
    room = width - sum(others) - 2 * (len(rows[0]) - 1)
    limits = {}
    pending = sorted(index, key=need.__getitem__)
    while pending:
        i = pending.pop(0)
        limits[i] = max(_narrowest(rows, i), min(need[i], room // (len(pending) + 1)))
        room -= limits[i]
    return limits


def _total(rows: list[list[str]], wrapped: Sequence[str] = ()) -> int:
    """The width of the rows, the ``wrapped`` columns at their narrowest."""
    return sum(
        _narrowest(rows, i) if rows[0][i] in wrapped else max(columns(r[i]) for r in rows)
        for i in range(len(rows[0]))
    ) + 2 * (len(rows[0]) - 1)


def _fit(
    rows: list[list[str]],
    right: list[bool],
    width: int,
    order: Sequence[str],
    wrapped: Sequence[str] = (),
):
    """Leave out ``order``'s columns in turn, then cut the longest cells of the columns not
    ``wrapped``, until the rows fit ``width`` (the wrapped columns at their narrowest), or
    nothing more can go; the rows, alignments and hidden column names."""
    hidden: list[str] = []
    for name in order:
        if _total(rows, wrapped) <= width:
            break
        if name in rows[0] and len(rows[0]) > 1:
            i = rows[0].index(name)
            rows = [r[:i] + r[i + 1 :] for r in rows]
            right = right[:i] + right[i + 1 :]
            hidden.append(name)
    while _total(rows, wrapped) > width:
        cells = [
            0 if right[i] or rows[0][i] in wrapped else max(columns(r[i]) for r in rows[1:])
            for i in range(len(right))
        ]
        widest = max(range(len(cells)), key=cells.__getitem__) if rows[1:] else 0
        excess = _total(rows, wrapped) - width
        keep = max(MIN_TEXT, len(rows[0][widest]), cells[widest] - excess)
        if not rows[1:] or keep >= cells[widest]:
            break
        for row in rows[1:]:
            if columns(row[widest]) > keep:
                row[widest] = _cut(row[widest], keep)
    while _total(rows, wrapped) > width and len(rows[0]) > 1:  # last resort: the rightmost
        hidden.append(rows[0][-1])
        rows, right = [r[:-1] for r in rows], right[:-1]
    return rows, right, hidden


def as_markdown(frame: pd.DataFrame, digits: int = 4) -> str:
    rows = _text_rows(frame, digits)
    right = _numeric(frame)
    rule = ["---:" if r else "---" for r in right]
    lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def _json_value(value: object) -> object:
    """A value as JSON holds it: NULL and NaN as null; list, struct and map cells, nested too;
    numpy scalars as numbers; what JSON has no type for (infinities, dates, times, intervals,
    blobs, UUIDs, decimals) as the text SQL would show."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):  # a list column's cell
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):  # numpy scalars
        return _json_value(value.item())
    if isinstance(value, decimal.Decimal):  # a DECIMAL inside a list or struct
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, datetime.timedelta):
        return pd.Timedelta(value).isoformat()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)


def as_records(frame: pd.DataFrame) -> list[dict]:
    return [
        {str(k): _json_value(v) for k, v in zip(frame.columns, row)}
        for row in frame.itertuples(index=False)
    ]


def to_json(data: object) -> str:
    return json.dumps(_json_value(data), indent=2, ensure_ascii=False, allow_nan=False)


def stream_rows(chunks: Iterable[pd.DataFrame], fmt: str) -> Iterator[str]:
    """CSV or JSON of a result that arrives in chunks (the first names the columns), piece by
    piece with one chunk in memory at a time; together the pieces are what :func:`render` of the
    whole result prints, with its final newline."""
    if fmt == "json":
        yield from _json_pieces(chunks)
        return
    for n, chunk in enumerate(chunks):
        if n == 0 or len(chunk):
            yield chunk.to_csv(index=False, header=n == 0)


def _json_pieces(chunks: Iterable[pd.DataFrame]) -> Iterator[str]:
    """The pieces of ``to_json(as_records(whole result))``, one record at a time."""
    opened = False
    for chunk in chunks:
        for record in as_records(chunk):
            text = textwrap.indent(to_json(record), "  ")
            yield ("[\n" if not opened else ",\n") + text
            opened = True
    yield "\n]\n" if opened else "[]\n"


def head(chunks: Iterable[pd.DataFrame], limit: int) -> tuple[pd.DataFrame, int]:
    """The first ``limit`` rows, and how many rows came after them."""
    kept: list[pd.DataFrame] = []
    left_out, room = 0, limit
    for chunk in chunks:
        if room or not kept:
            kept.append(chunk.iloc[:room])
        left_out += max(len(chunk) - room, 0)
        room = max(room - len(chunk), 0)
    return pd.concat(kept, ignore_index=True), left_out


def render(
    frame: pd.DataFrame,
    fmt: str,
    digits: int = 4,
    drop: Sequence[str] = (),
    wrap: Sequence[str] = (),
    metrics: Sequence[str] = (),
    moved: Mapping[str, str] | None = None,
) -> str:
    """Render ``frame``; JSON is a list of row objects with NULL for missing values. A table
    fits the terminal (see :func:`as_table`; ``wrap``: the columns whose cells may take several
    lines; ``drop``: the columns it may leave out, first first; ``metrics``: its metric columns
    in their fixed order, ``moved``: those that moved, kept longest); json, csv and markdown
    keep everything."""
    if fmt == "table":
        return as_table(frame, digits, drop, wrap, metrics, moved)
    if fmt == "markdown":
        return as_markdown(frame, digits)
    if fmt == "csv":
        return frame.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        return to_json(as_records(frame))
    raise ValueError(f"unknown format {fmt!r}")
