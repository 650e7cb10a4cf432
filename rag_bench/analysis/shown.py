"""How the results of compare, gate and diff read in a notebook, a REPL and a pytest failure:
plain text (``repr``) and HTML (``_repr_html_``), each naming what it is before its table.

The command line renders the same results its own way (fitted to the terminal, see
:mod:`rag_bench.cli.views`); these views keep every row and column, wrapped only by the reader.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd

DIGITS = 4


def text_view(title: str, frame: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """A title line, the table as aligned text (numbers to 4 decimals) and notes below."""
    table = frame.to_string(index=False, float_format=lambda v: f"{v:.{DIGITS}f}")
    return "\n".join([title, table, *notes])


def html_view(title: str, frame: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """The same as HTML: a heading paragraph, the table, the notes as a list."""
    table = frame.to_html(index=False, float_format=lambda v: f"{v:.{DIGITS}f}", na_rep="")
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return f"<p><b>{html.escape(title)}</b></p>{table}" + (f"<ul>{items}</ul>" if items else "")


def gate_title(passed: bool, rows: pd.DataFrame) -> str:
    failed = int((rows["verdict"] == "fail").sum())
    if passed:
        return f"gate passed: {len(rows)} metric(s) within their allowed drop"
    return f"gate FAILED: {failed} of {len(rows)} metric(s) dropped more than allowed"


def gate_notes(rows: pd.DataFrame, warnings: list[str]) -> list[str]:
    """One line per metric with the gate's reason, then its warnings."""
    reasons = [f"{r.metric}: {r.verdict}, {r.reason}" for r in rows.itertuples(index=False)]
    return reasons + [f"warning: {w}" for w in warnings]


def comparison_title(rows: pd.DataFrame, n_paired: dict[str, int], test: str, alpha) -> str:
    baseline = rows["run_a"].iloc[0] if len(rows) else "?"
    paired = ", ".join(f"{run} ({n} paired)" for run, n in n_paired.items())
    return (
        f"comparison against {baseline}: {paired}; {test} test; significant: p_adjusted < "
        f"{alpha} within the row's family (confirmatory: Holm, exploratory: Benjamini-Hochberg)"
    )


COMPARISON_COLUMNS = (
    "run_b",
    "slice",
    "metric",
    "family",
    "mean_a",
    "mean_b",
    "delta",
    "ci_low",
    "ci_high",
    "ci_level",
    "p_value",
    "p_adjusted",
    "n",
    "significant",
    "ci_agrees",
)
