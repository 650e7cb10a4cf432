"""The report's sections as HTML, one function per section, each from the plain tables of
:class:`~rag_bench.report.data.ReportData`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rag_bench.evaluation.measures import lower_is_better
from rag_bench.evaluation.stats import spearman
from rag_bench.report.data import ReportData, failure_order
from rag_bench.report.figures import failure_chart, length_chart, means_chart, scatter_chart
from rag_bench.report.html import change_class, codes, e, metric_title, number, table


def _label(data: ReportData, run_id: str) -> str:
    return e(data.labels[run_id])


def _runs_phrase(data: ReportData) -> str:
    return (
        "both runs" if len(data.runs) == 2 else ("the run" if len(data.runs) == 1 else "every run")
    )


def _no_values(data: ReportData, metric: str) -> str:
    runs = ", ".join(_label(data, r) for r in data.undefined[metric])
    return f"<p class='note'>{e(metric)} has no defined value in {runs}.</p>"


def collapsed(data: ReportData) -> str:
    """The metrics with one value throughout, one line each, and those a run has no value of."""
    lines = [
        f"<li><b>{e(m)}</b>: {v:g} in every query of {_runs_phrase(data)}</li>"
        for m, v in data.constant.items()
    ]
    lines += [
        f"<li><b>{e(m)}</b> has no defined value in "
        + ", ".join(_label(data, r) for r in ids)
        + " (NULL for every query: nothing to average or compare there)</li>"
        for m, ids in data.undefined.items()
    ]
    return f"<ul class='constant'>{''.join(lines)}</ul>" if lines else ""


def paired(data: ReportData) -> str:
    """compare's table: per candidate, slice and metric the delta against the baseline."""
    result = data.comparison
    if result is None:
        return "<p class='note'>The paired comparison needs two runs.</p>"
    rows = result.rows[~result.rows["metric"].isin(list(data.constant))]
    several = len(data.runs) > 2
    body = []
    for row in rows.itertuples():
        moved = change_class(row.metric, row.delta)
        metric = e(row.metric) + (
            " <span class='n'>↓ better</span>" if lower_is_better(row.metric) else ""
        )
        body.append(
            f"<tr class='{'sig' if row.significant else ''}'>"
            + (f"<td>{_label(data, row.run_b)}</td>" if several else "")
            + f"<td>{e(row.slice)}</td><td>{metric}</td>"
            f"<td class='num'>{number(row.mean_a)}</td><td class='num'>{number(row.mean_b)}</td>"
            f"<td class='num {moved}'>{number(row.delta, signed=True)}</td>"
            f"<td class='num ci'>[{number(row.ci_low, signed=True)}, "
            f"{number(row.ci_high, signed=True)}]</td>"
            f"<td class='num'>{number(row.p_value, 4)}</td>"
            f"<td class='num'>{number(row.p_adjusted, 4)}</td>"
            f"<td class='num'>{row.wins}/{row.ties}/{row.losses}</td>"
            f"<td class='num'>{row.n}</td><td class='mark'>{_mark(row)}</td>"
            "</tr>"
        )
    head = (["run"] if several else []) + [
        data.slice_by or "slice",
        "metric",
        data.labels[data.runs[0].run_id],
        "candidate" if several else data.labels[data.runs[-1].run_id],
        "delta",
        "CI",
        "p",
        "p_adj",
        "W/T/L",
        "n",
        "sig",
    ]
    n_sig = int(rows["significant"].sum())
    return (
        f"<p class='lead'>Each run against <b>{_label(data, data.runs[0].run_id)}</b> over "
        f"the queries both answered: {e(result.test)} test. {_families(result)} "
        f"Bold = p_adj &lt; {result.alpha:g} ({n_sig} rows). Delta is candidate "
        "minus baseline, green where it is an improvement in the metric's direction; W/T/L "
        "counts queries that improved, tied and worsened.</p>"
        + collapsed(data)
        + (table(head, body, "paired") if body else "<p>Every metric is constant.</p>")
    )


def _mark(row) -> str:
    """★ a confirmatory row's rejection, ☆ an exploratory row's discovery."""
    if not row.significant:
        return ""
    return "★" if row.family == "confirmatory" else "☆"


def _families(result) -> str:
    """compare's two families, as its table states them (docs/statistics.md)."""
    primary = ", ".join(e(m) for m in result.primary)
    confirm = (
        f"Confirmatory: {primary} over all queries, p_adj Holm across the compared runs, "
        "its CI at the family's simultaneous level 1 − α/m, ★ = p_adj &lt; α. "
        if primary
        else "No confirmatory row (no primary metric compared). "
    )
    return (
        confirm + "Exploratory: every other row, p raw, p_adj Benjamini–Hochberg across them "
        "(a false discovery rate), a 95% CI per row, ☆ = p_adj &lt; α."
    )


def means(data: ReportData) -> str:
    """Each run's mean per slice and metric with its bootstrap interval: a chart and a table."""
    ids = [r.run_id for r in data.runs]
    shown = [m for m in data.metrics if m not in data.constant]
    indexed = data.means.set_index(["slice", "metric", "run_id"])
    body = []
    for metric in shown:
        for name in dict.fromkeys(data.means["slice"]):
            cells = [
                f"<td class='num'>{number(indexed.loc[k, 'mean'])} <span class='ci'>"
                f"[{number(indexed.loc[k, 'ci_low'])}, {number(indexed.loc[k, 'ci_high'])}]"
                f"</span> <span class='n'>n={int(indexed.loc[k, 'n'])}</span></td>"
                if (k := (name, metric, r)) in indexed.index
                else "<td class='same'>no defined value</td>"
                for r in ids
            ]
            if any("num" in c for c in cells):
                body.append(
                    f"<tr><td>{e(metric_title(metric))}</td><td>{e(name)}</td>{''.join(cells)}</tr>"
                )
    head = ["metric", data.slice_by or "slice", *(data.labels[r] for r in ids)]
    return (
        f"<p class='lead'>Mean over the queries with a defined value; whiskers and brackets are "
        f"a percentile bootstrap over queries ({data.resamples} resamples, seed {data.seed}), "
        "each run on its own: the paired section above is the comparison.</p>"
        + ("" if data.comparison else collapsed(data))
        + means_chart(data.means, shown, ids, data.labels)
        + table(head, body, "means")
    )


def scatter(data: ReportData) -> str:
    """The per-query scatter of the first run against the last."""
    if len(data.runs) > 1 and data.metric in data.undefined:
        return _no_values(data, data.metric)
    if len(data.runs) < 2 or data.pairs.empty:
        return "<p class='note'>The per-query scatter needs two runs that share queries.</p>"
    first, last = data.runs[0].run_id, data.runs[-1].run_id
    return (
        "<p class='lead'>One point per query; hover a point for its id and text.</p>"
        + scatter_chart(data.pairs, data.metric, data.labels[first], data.labels[last])
    )


def length(data: ReportData) -> str:
    """answer_length against faithfulness per query, and each run's Spearman correlation."""
    frame = data.lengths
    ids = [r.run_id for r in data.runs]
    if frame.empty:
        return (
            "<p class='note'>No query has both answer_length and faithfulness: the runs refused "
            "every answer, or were made before answer_length was stored.</p>"
        )
    mine = {r: frame[frame["run_id"] == r] for r in ids}
    rho = {r: spearman(m["length"], m["faithfulness"]) for r, m in mine.items()}
    body = [
        f"<tr><td>{_label(data, r)}</td><td class='num'>{number(rho[r])}</td>"
        f"<td class='num'>{number(m['length'].mean())}</td><td class='num'>{len(m)}</td></tr>"
        for r, m in mine.items()
    ]
    return (
        "<p class='lead'>One point per answered query with judged claims: its length in words "
        "(citation markers removed) against its faithfulness. ρ is Spearman's rank correlation "
        "over those queries (tied values at their average rank; none below 3 queries or when "
        "either is constant): below 0, longer answers are less faithful.</p>"
        + length_chart(frame, ids, data.labels, rho)
        + table(["run", "Spearman ρ", "mean length", "n"], body, "length")
    )


def failures(data: ReportData) -> str:
    """Failure classes per run (a chart of all queries) and per slice (a table)."""
    frame = data.failures
    classes = failure_order(set(frame["failure_class"]))
    counts = frame.set_index(["slice", "run_id", "failure_class"])["n"]
    body = [
        f"<tr><td>{e(name)}</td><td>{_label(data, run.run_id)}</td>"
        + "".join(
            f"<td class='num'>{int(counts.get((name, run.run_id, f), 0)) or ''}</td>"
            for f in classes
        )
        + "</tr>"
        for name in dict.fromkeys(frame["slice"])
        for run in data.runs
    ]
    ids = [r.run_id for r in data.runs]
    return failure_chart(frame, classes, ids, data.labels) + table(
        [data.slice_by or "slice", "run", *classes], body, "failures"
    )


def _relevance(grade: Any) -> str:
    if pd.isna(grade):
        return "<span class='unjudged' title='not judged: counts as not relevant'>–</span>"
    grade = int(grade)
    if grade >= 1:
        return f"<span class='relevant' title='relevant, grade {grade}'>✓ {grade}</span>"
    return "<span class='irrelevant' title='judged not relevant'>✗ 0</span>"


def _verdict(supported: object) -> str:
    if supported is None or pd.isna(supported):
        return "<span class='unjudged'>not judged</span>"
    if supported:
        return "<span class='relevant'>✓ supported</span>"
    return "<span class='irrelevant'>✗ unsupported</span>"


def trace(data: ReportData, run_id: str, query_id: str) -> str:
    """One run's trace of one query: ranking with relevance marks, answer, claims with verdicts."""
    row, documents, claims = data.traces.of(run_id, query_id)
    title = f"<h4>{_label(data, run_id)}</h4>"
    if row is None:
        return title + "<p class='note'>This run has no trace of the query.</p>"
    k = data.traces.cutoff
    top, deeper = documents[documents["rank"] <= k], documents[documents["rank"] > k]
    ranking = [
        f"<tr><td class='num'>{int(r.rank)}</td><td><code>{e(r.doc_id)}</code></td>"
        f"<td>{_relevance(r.relevance)}</td><td class='num'>{number(r.score)}</td></tr>"
        for r in top.itertuples()
    ]
    below = "; ".join(
        f"<code>{e(r.doc_id)}</code> at rank {int(r.rank)}" for r in deeper.itertuples()
    )
    claim_rows = [
        f"<tr class='{'supported' if c.supported else 'unsupported'}'>"
        f"<td class='num'>{int(c.claim_id)}</td><td>{e(c.text)}<br><span class='reason'>"
        f"{e(c.reason)}</span></td><td>{_verdict(c.supported)}</td><td>{codes(c.citations)}</td>"
        "</tr>"
        for c in claims.itertuples()
    ]
    answer = e(row["answer"]) if row["answer"] else "<em>(no answer)</em>"
    refused = " <span class='tag'>refused</span>" if row["refused"] else ""
    return (
        f"{title}<p class='note'><span class='fc fc-{e(row['failure_class'])}'>"
        f"{e(row['failure_class'])}</span> · {int(row['n_relevant'])} relevant</p>"
        + table(["rank", f"top {k}", "relevance", "score"], ranking, "ranking")
        + (f"<p class='note'>Relevant further down: {below}</p>" if below else "")
        + f"<h4>Answer{refused}</h4><blockquote class='answer'>{answer}</blockquote>"
        + (
            table(["#", "claim", "verdict", "cites"], claim_rows, "claims")
            if claim_rows
            else "<p class='note'>No claims.</p>"
        )
    )


def _change(data: ReportData, row, open_: bool) -> str:
    first, last = data.runs[0].run_id, data.runs[-1].run_id
    query, _, _ = data.traces.of(last, row.query_id)
    moves = [
        f"{label}: {e(text)}"
        for label, text in (("entered", row.entered), ("left", row.left), ("moved", row.moved))
        if text
    ]
    return (
        f"<details class='change'{' open' if open_ else ''}><summary>"
        f"<span class='{row.change}'>{e(row.change)}</span> · <code>{e(row.query_id)}</code> · "
        f"{e(row.category)} · {e(data.metric)} {number(row.before)} → {number(row.after)} "
        f"(<span class='{change_class(data.metric, row.delta)}'>Δ {number(row.delta, signed=True)}"
        f"</span>) · {e(row.failure_before)} → {e(row.failure_after)}</summary>"
        + (f"<p class='query'>{e(query['query'])}</p>" if query is not None else "")
        + (
            f"<p class='note'>Relevant documents in the top {data.traces.cutoff}: "
            + "; ".join(moves)
            + "</p>"
            if moves
            else ""
        )
        + f"<div class='pair'><div>{trace(data, first, row.query_id)}</div>"
        f"<div>{trace(data, last, row.query_id)}</div></div></details>"
    )


def changed(data: ReportData) -> str:
    """diff's largest regressions and improvements, each with both runs' traces side by side."""
    if len(data.runs) < 2:
        return "<p class='note'>What changed needs two runs.</p>"
    if data.metric in data.undefined:
        return _no_values(data, data.metric)
    if data.changed.empty:
        return f"<p class='note'>No query changed on {e(data.metric)}.</p>"
    parts = []
    for change, title in (("worse", "Largest regressions"), ("better", "Largest improvements")):
        rows = data.changed[data.changed["change"] == change]
        listed = "".join(_change(data, row, i == 0) for i, row in enumerate(rows.itertuples()))
        parts.append(f"<h3>{title} ({len(rows)})</h3>" + (listed or "<p class='note'>None.</p>"))
    return (
        f"<p class='lead'>The queries whose {e(metric_title(data.metric))} changed most from "
        f"<b>{_label(data, data.runs[0].run_id)}</b> (left) to "
        f"<b>{_label(data, data.runs[-1].run_id)}</b> (right), as <code>rag-bench diff</code> "
        "lists them; open one for both traces.</p>" + "".join(parts)
    )


def _growth(delta: float) -> str:
    """The change of a symptom's share as a cell: grew (worse), shrank (better) or same."""
    if pd.isna(delta):
        return "<td class='num'>–</td>"
    if abs(delta) <= 1e-12:
        return "<td class='num same'>same</td>"
    word, cls = ("grew", "worse") if delta > 0 else ("shrank", "better")
    return f"<td class='num {cls}'>{word} {number(delta * 100, 1, signed=True)} pp</td>"


def _diagnosis_row(row, against: bool) -> str:
    share = (
        "–" if pd.isna(row.share) else f"{row.share:.0%} <span class='n'>{row.n}/{row.of}</span>"
    )
    cells = [
        f"<td>{e(row.symptom)}</td>",
        f"<td>{e(row.slice)}</td>",
        f"<td class='num'>{share}</td>",
    ]
    if against:
        before = "–" if pd.isna(row.share_against) else f"{row.share_against:.0%}"
        cells += [
            f"<td class='num'>{before}</td>",
            _growth(row.delta),
            f"<td class='num'>+{row.appeared} / −{row.cleared}</td>",
        ]
    cells += [
        f"<td>{e(row.culprit)}</td>",
        f"<td>{e(row.what_to_try)}</td>",
        f"<td>{codes(str(row.examples).split())}</td>",
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def diagnosis(data: ReportData) -> str:
    """diagnose's table of the last run, with ``--against`` the first: the ``all`` rows in
    front, the per-slice rows folded below."""
    if data.diagnosis is None:
        return f"<p class='note'>No diagnosis: {e(data.diagnosis_note)}</p>"
    against = len(data.runs) > 1
    head = ["symptom", data.slice_by or "slice", "share"]
    if against:
        head += [data.labels[data.runs[0].run_id], "change", "appeared / cleared"]
    head += ["likely culprit", "what to try", "examples"]
    frame = data.diagnosis
    overall = [_diagnosis_row(r, against) for r in frame[frame["slice"] == "all"].itertuples()]
    sliced = [_diagnosis_row(r, against) for r in frame[frame["slice"] != "all"].itertuples()]
    versus = (
        f", against <b>{_label(data, data.runs[0].run_id)}</b> over the queries both answered "
        "(grew: more queries show the symptom)"
        if against
        else ""
    )
    return (
        f"<p class='lead'>The symptoms <b>{_label(data, data.runs[-1].run_id)}</b> shows, as "
        f"<code>rag-bench diagnose</code> computes them{versus}.</p>"
        + table(head, overall, "diagnosis")
        + (
            f"<details><summary>per {e(data.slice_by)}</summary>{table(head, sliced, 'diagnosis')}"
            "</details>"
            if sliced
            else ""
        )
    )


def manifests(data: ReportData) -> str:
    """Every run's manifest side by side, the rows that differ highlighted."""
    names = [data.labels[r.run_id] for r in data.runs]
    body = [
        f"<tr class='{'differs' if row['differs'] else ''}'><th>{e(row['field'])}</th>"
        + "".join(f"<td>{e(row[name])}</td>" for name in names)
        + "</tr>"
        for _, row in data.manifests.iterrows()
    ]
    return "<p class='lead'>Highlighted rows differ between the runs.</p>" + table(
        ["field", *names], body, "manifest"
    )
