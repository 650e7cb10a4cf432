"""The HTML vocabulary the report's sections share: escaping, numbers, marks and the style sheet.

Every string that comes from the data passes through :func:`e` before it reaches the page.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from rag_bench.analysis.pairing import TIE
from rag_bench.evaluation.measures import improvement, lower_is_better


def e(value: object) -> str:
    """Escape for HTML text and attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def number(value: object, digits: int = 3, signed: bool = False) -> str:
    """A value as the report prints it: a dash for missing, fixed digits for floats."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if isinstance(value, (float, np.floating)):
        return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    return str(value)


def metric_title(metric: str) -> str:
    """The metric's name, marked when a fall is the improvement."""
    return f"{metric} (lower is better)" if lower_is_better(metric) else metric


def change_class(metric: str, delta: float) -> str:
    """``better``, ``worse`` or ``same``: the CSS class of a delta, read in the metric's
    direction."""
    gain = improvement(metric, delta)
    if pd.isna(gain) or abs(gain) <= TIE:
        return "same"
    return "better" if gain > 0 else "worse"


def table(head: list[str], rows: list[str], cls: str) -> str:
    """A table of already-rendered ``<tr>`` rows under escaped column names, scrolling
    sideways when wider than the page."""
    cells = "".join(f"<th>{e(h)}</th>" for h in head)
    return (
        f"<div class='wide'><table class='{cls}'><thead><tr>{cells}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def codes(items: object) -> str:
    """A list of ids as code, or a dash when empty."""
    if items is None or (not isinstance(items, str) and not len(items)):
        return "–"
    return ", ".join(f"<code>{e(i)}</code>" for i in items)


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;margin:0;
background:#fafafa}
main{max-width:1240px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #ddd;
padding-bottom:4px}h3{font-size:15px;margin:16px 0 4px}h4{margin:10px 0 4px;font-size:13px}
nav a{margin-right:14px}p.lead{color:#555;margin:4px 0 12px}
.wide{overflow-x:auto}table{border-collapse:collapse;margin:6px 0;background:#fff;font-size:13px}
th,td{border:1px solid #e2e2e2;padding:3px 8px;text-align:left;vertical-align:top}
thead th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap}
.ci{color:#666}.n{color:#999;font-size:11px}code{font-size:12px}
p.note,ul.constant{color:#555;font-size:13px;margin:4px 0}
tr.differs{background:#fff6d6}table.manifest td{word-break:break-all;max-width:360px}
tr.sig td{font-weight:600}tr.sig td.mark{color:#b8860b}
.better{color:#2e7d32}.worse{color:#c62828}.same{color:#777}
td.better{background:#eef8ec}td.worse{background:#fdecea}
details.change{background:#fff;border:1px solid #ddd;border-radius:4px;margin:8px 0;
padding:6px 12px}
details.change summary{cursor:pointer;font-weight:600}
details.change table{font-size:12px}
p.query{font-size:15px;margin:8px 0}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:16px}
.pair>div{min-width:0}
blockquote.answer{margin:0;padding:6px 10px;background:#f6f8fa;border-left:3px solid #4c78a8;
white-space:pre-wrap;max-height:220px;overflow:auto}
.relevant{color:#2e7d32;font-weight:600}.irrelevant{color:#c62828}.unjudged{color:#999}
tr.unsupported td{background:#fff1f0}.reason{color:#777;font-size:11px}
.tag{background:#eee;border-radius:3px;padding:0 5px;font-weight:normal;font-size:12px}
.fc{padding:0 4px;border-radius:3px;background:#eee}.fc-ok,.fc-correct_refusal{background:#e3f4e1}
svg.chart{background:#fff;border:1px solid #e2e2e2;margin:6px 0;max-width:100%;height:auto}
svg.chart text{font:11px system-ui,sans-serif;fill:#333}svg.chart .title{font-size:12px;
font-weight:600}svg.chart .axis{stroke:#bbb}svg.chart .grid{stroke:#eee}
"""
