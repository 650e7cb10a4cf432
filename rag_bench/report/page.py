"""A self-contained HTML report of stored runs: gather (``data``), draw (``figures``), render
(``sections``), and write one page here.

For runs made on the same dataset, the first the baseline and the last the candidate, the page
holds: the paired comparison (compare's delta, interval, p, Holm-adjusted p and wins / ties /
losses per slice and metric); what changed (diff's largest regressions and improvements, each
with both runs' traces side by side); the diagnosis of the candidate against the baseline; each
run's mean with an interval; a per-query scatter; the failure classes; the manifests.

It is one HTML file without scripts that opens offline: the charts are inline SVG, and only the
listed queries' traces are embedded, so its size grows with the number of runs and metrics, not
with the number of queries. Every string that comes from the data is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rag_bench.io.durable import write_output
from rag_bench.report import sections
from rag_bench.report.data import ReportData, report_data
from rag_bench.report.html import STYLE, e
from rag_bench.runs import RunStore, open_runs

# (anchor, link text, heading, renderer) in page order; a heading may name the runs or metric
SECTIONS = (
    ("paired", "Paired comparison", "Paired comparison with the baseline", sections.paired),
    ("changed", "What changed", "What changed on {metric}", sections.changed),
    ("diagnosis", "Diagnosis", "Diagnosis of {last}", sections.diagnosis),
    ("means", "Means", "Means per {slice} with 95 % intervals", sections.means),
    ("scatter", "Per query", "Per query: {first} vs {last} on {metric}", sections.scatter),
    ("failures", "Failure classes", "Failure classes per run and {slice}", sections.failures),
    ("length", "Length", "Answer length and faithfulness", sections.length),
    ("manifests", "Manifests", "Manifests", sections.manifests),
)


def render_report(data: ReportData) -> str:
    """The report as one HTML page: no script, every data string escaped."""
    names = {
        "metric": e(data.metric),
        "slice": e(data.slice_by or "slice"),
        "first": e(data.labels[data.runs[0].run_id]),
        "last": e(data.labels[data.runs[-1].run_id]),
    }
    runs_line = ", ".join(
        f"<b>{e(data.labels[r.run_id])}</b> (<code>{e(r.run_id)}</code>)" for r in data.runs
    )
    nav = "".join(f'<a href="#{anchor}">{name}</a>' for anchor, name, _, _ in SECTIONS)
    body = "".join(
        f'<h2 id="{anchor}">{heading.format(**names)}</h2>\n{render(data)}\n'
        for anchor, _, heading, render in SECTIONS
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rag-bench report: {e(" vs ".join(data.labels[r.run_id] for r in data.runs))}</title>
<style>{STYLE}</style>
</head>
<body><main>
<h1>rag-bench report</h1>
<p class="lead">Runs: {runs_line}. The first is the baseline, the last the candidate.</p>
<nav>{nav}</nav>
{body}</main></body>
</html>
"""


def report(
    runs_dir: str | Path | RunStore | None,
    refs: Sequence[str],
    *,
    slice_by: str | None = "category",
    metric: str = "ndcg@10",
    metrics: Sequence[str] | None = None,
    primary: str | Sequence[str] | None = None,
    top: int = 10,
    test: str = "randomization",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
    allow_mismatch: bool = False,
    output: str | Path | None = None,
) -> str:
    """The HTML report of ``refs`` (the first is the baseline, the last the candidate);
    ``metric`` orders what changed (``top`` queries each way) and the scatter, ``metrics`` are
    compared and averaged (default: the headline metrics); ``primary``, ``test``, ``alpha``,
    ``resamples`` and ``seed`` are compare's.

    Returns the HTML; with ``output`` also writes it there.
    """
    store = open_runs(runs_dir)
    store.check_output(output, "report")
    data = report_data(
        store,
        refs,
        slice_by=slice_by,
        metric=metric,
        metrics=metrics,
        primary=primary,
        top=top,
        test=test,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
        allow_mismatch=allow_mismatch,
    )
    page = render_report(data)
    if output is not None:
        write_output(output, page.encode("utf-8"), "the report")  # whole or not at all
    return page
