"""Reading the text tables the command line prints: their cells, a wrapped row's lines, and
how many terminal columns a line takes."""

from __future__ import annotations

import unicodedata


def columns(line: str) -> int:
    """The terminal columns a line takes: wide and full-width characters (CJK) two each,
    combining marks none, everything else one."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in line
    )


def cells(table: str) -> list[dict[str, str]]:
    """The rows of an aligned table (up to its note of the columns not shown), cut into its
    columns where the rule under the header has its dashes (counted in terminal columns)."""
    header, rule, *body = table.split("\n(not shown, to fit")[0].splitlines()
    spans, start = [], 0
    for dashes in rule.split("  "):
        spans.append((start, start + len(dashes)))
        start += len(dashes) + 2
    names = [header[a:b].strip() for a, b in spans]
    return [
        {n: between(line, a, b).strip() for n, (a, b) in zip(names, spans)} for line in body if line
    ]


def between(line: str, start: int, end: int) -> str:
    """The characters of a line that begin at terminal columns ``start`` to ``end`` - 1."""
    kept, at = [], 0
    for c in line:
        if start <= at < end:
            kept.append(c)
        at += columns(c)
    return "".join(kept)


def grouped(rows: list[dict[str, str]], key: str) -> dict[str, dict[str, list[str]]]:
    """The lines of each table row and its continuation rows (a blank ``key``), by column."""
    groups: dict[str, dict[str, list[str]]] = {}
    current = ""
    for row in rows:
        current = row[key] or current
        for column, text in row.items():
            groups.setdefault(current, {}).setdefault(column, []).append(text)
    return groups


def wrapped_rows(rows: list[dict[str, str]], key: str) -> list[dict[str, list[str]]]:
    """The lines of each table row, in order: a row starts where ``key`` (a column that never
    wraps) is filled, and the rows below it with ``key`` blank continue it."""
    out: list[dict[str, list[str]]] = []
    for row in rows:
        if row[key] or not out:
            out.append({column: [] for column in row})
        for column, text in row.items():
            out[-1][column].append(text)
    return out


def joined(lines: list[str]) -> str:
    """A wrapped cell's lines as one text, whitespace left out (a line may break after a
    comma as well as at a space)."""
    return "".join("".join(lines).split())
