"""A self-contained HTML report of stored runs: compute → tabulate → render.

The report puts side by side, for runs made on the same dataset:

- per slice and metric, each run's mean with a seeded 95 % bootstrap interval over queries;
- a per-query scatter of the first run against the last on one metric (query text on hover);
- the failure classes per run and slice;
- the worst queries of the last run (the candidate) with their trace: document ranking with
  relevance marks, answer, each claim's verdict, reason and citations;
- each run's manifest, rows that differ between runs highlighted.

It is one HTML file that opens offline: plotly.js is inlined once (about 4.8 MB, the same for
any number of runs or queries), the tables are plain HTML, and every string that comes from the
data (query text, answers, claims, document ids, manifest values) is escaped.
"""

from __future__ import annotations

import html
import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.analysis.compare import (
    SLICES,
    TIE,
    metric_cutoff,
    query_slices,
)
from rag_bench.errors import RagBenchError, UnknownNameError, UsageError, check_number
from rag_bench.evaluation.diagnosis import FAILURE_CLASSES
from rag_bench.evaluation.measures import (
    canonical,
    canonical_names,
    headline_metrics,
    lower_is_better,
    not_stored,
)
from rag_bench.evaluation.stats import MAX_RESAMPLES, bootstrap_ci
from rag_bench.evaluation.summary import slice_order
from rag_bench.runs import RunStore, StoredRun, open_runs

INSTALL = "pip install 'rag-bench[report]'"

RUN_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d")
FAILURE_COLOURS = {
    "ok": "#54a24b",
    "correct_refusal": "#a6d96a",
    "retrieval_miss": "#d62728",
    "retrieved_not_used": "#fdae61",
    "fabricated": "#8c1c13",
    "wrong_citation": "#f46d43",
    "wrongly_refused": "#9467bd",
    "answered_unanswerable": "#e377c2",
}


@dataclass(frozen=True)
class ReportData:
    """Everything the report shows, as plain tables (one run = one column where it applies)."""

    runs: list[StoredRun]
    labels: dict[str, str]  # run_id → the name shown (variant, or variant · id when repeated)
    slice_by: str | None
    metric: str
    metrics: list[str]
    means: pd.DataFrame  # slice, metric, run_id, mean, ci_low, ci_high, n
    pairs: pd.DataFrame  # query_id, group, query, a, b, delta (first run vs last)
    failures: pd.DataFrame  # run_id, slice, failure_class, n, share
    worst: pd.DataFrame  # query_id, category, query, answer, failure_class, value, baseline, …
    rankings: pd.DataFrame  # query_id, rank, doc_id, relevance, score: top k + relevant below
    claims: pd.DataFrame  # query_id, claim_id, text, supported, support_grade, citations, …
    manifests: pd.DataFrame  # field, one column per run label, differs
    cutoff: int
    resamples: int
    seed: int


# --- compute: read the traces ------------------------------------------------------------


def _resolve(store: RunStore, refs: Sequence[str], allow_mismatch: bool) -> list[StoredRun]:
    if not refs:
        raise UsageError("report needs at least one run", "e.g. rag-bench report latest:baseline")
    runs = [store.get(ref) for ref in refs]
    ids = [r.run_id for r in runs]
    repeated = [i for i in ids if ids.count(i) > 1]
    if repeated:
        raise UsageError(f"run {repeated[0]} is named twice", "name each run once")
    if len({r.dataset_sha256 for r in runs}) > 1 and not allow_mismatch:
        names = ", ".join(f"{r.run_id} ({r.manifest.get('dataset', {}).get('name')})" for r in runs)
        raise RagBenchError(
            f"the runs were made on different datasets: {names}",
            "pass --allow-mismatch to report them side by side anyway",
        )
    return runs


def _run_labels(runs: list[StoredRun]) -> dict[str, str]:
    variants = [r.variant for r in runs]
    return {
        r.run_id: r.variant if variants.count(r.variant) == 1 else f"{r.variant} · {r.run_id}"
        for r in runs
    }


def _quoted(names: Sequence[str]) -> str:
    return ", ".join("'" + n.replace("'", "''") + "'" for n in names)


def _load(con, metric: str, metrics: Sequence[str] | None):
    available = [r[0] for r in con.sql("SELECT DISTINCT metric FROM metrics ORDER BY 1").fetchall()]
    chosen = canonical_names(metrics) if metrics else headline_metrics()
    chosen = chosen if metrics else [m for m in chosen if m in available]
    for name in [metric, *chosen]:
        if name not in available:
            raise not_stored("metric in these runs", name, available)
    wanted = list(dict.fromkeys([*chosen, metric]))
    values = con.sql(
        "SELECT run_id, query_id, metric, value FROM metrics "
        f"WHERE metric IN ({_quoted(wanted)}) AND value IS NOT NULL"
    ).df()
    queries = con.sql(
        "SELECT run_id, query_id, category, tags, query, answer, refused, failure_class, "
        "n_relevant FROM queries"
    ).df()
    return values, queries, chosen


RANKING_COLUMNS = ["query_id", "rank", "doc_id", "relevance", "score"]
CLAIM_COLUMNS = [
    "query_id",
    "claim_id",
    "text",
    "supported",
    "support_grade",
    "citations",
    "supported_by",
    "reason",
]


def _details(con, run_id: str, query_ids: list[str], k: int):
    """The candidate's top-k documents (and relevant ones further down) and its claims."""
    if not query_ids:
        return pd.DataFrame(columns=RANKING_COLUMNS), pd.DataFrame(columns=CLAIM_COLUMNS)
    listing = _quoted(query_ids)
    rankings = con.execute(
        f"SELECT {', '.join(RANKING_COLUMNS)} FROM retrieved "
        "WHERE run_id = ? AND stage = 'documents' AND (rank <= ? OR relevance >= 1) "
        f"AND query_id IN ({listing}) "
        "ORDER BY query_id, rank",
        [run_id, k],
    ).df()
    claims = con.execute(
        f"SELECT {', '.join(CLAIM_COLUMNS)} FROM claims "
        f"WHERE run_id = ? AND query_id IN ({listing}) "
        "ORDER BY query_id, claim_id",
        [run_id],
    ).df()
    return rankings, claims


# --- tabulate: plain tables ----------------------------------------------------------------


def slice_labels(
    queries: pd.DataFrame, runs: list[StoredRun], slice_by: str | None
) -> dict[str, list[str]]:
    """Each query's slices, as ``compare`` reads them: from the first run that has the query."""
    if slice_by is not None and slice_by not in SLICES:
        raise UnknownNameError("slice", slice_by, SLICES)
    labels: dict[str, list[str]] = {}
    for run in reversed(runs):
        labels.update(query_slices(queries, run.run_id, slice_by))
    return labels


def _slices_of(labels: dict[str, list[str]]) -> list[str]:
    return ["all", *slice_order({s for names in labels.values() for s in names})]


def mean_intervals(
    values: pd.DataFrame,
    labels: dict[str, list[str]],
    runs: list[StoredRun],
    metrics: Sequence[str],
    resamples: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per slice, metric and run: the mean over defined values and a 95 % bootstrap interval."""
    rows = []
    slices = _slices_of(labels)
    for metric in metrics:
        for run in runs:
            chosen = values[(values["run_id"] == run.run_id) & (values["metric"] == metric)]
            for name in slices:
                in_slice = (
                    chosen
                    if name == "all"
                    else chosen[[name in labels.get(q, []) for q in chosen["query_id"]]]
                )
                v = in_slice["value"].to_numpy(dtype=np.float64)
                if len(v) == 0:
                    continue
                low, high = bootstrap_ci(v, resamples=resamples, seed=seed)
                rows.append(
                    {
                        "slice": name,
                        "metric": metric,
                        "run_id": run.run_id,
                        "mean": float(v.mean()),
                        "ci_low": low,
                        "ci_high": high,
                        "n": len(v),
                    }
                )
    columns = ["slice", "metric", "run_id", "mean", "ci_low", "ci_high", "n"]
    return pd.DataFrame(rows, columns=columns)


def _group(
    query_id: str, categories: dict[str, str], labels: dict[str, list[str]], slice_by
) -> str:
    """The colour group of a query in the scatter: its slice, or its category for tags."""
    if slice_by in ("category", "failure_class"):
        return ", ".join(labels.get(query_id, [])) or "?"
    return str(categories.get(query_id, "?"))


def query_pairs(
    values: pd.DataFrame,
    queries: pd.DataFrame,
    first: StoredRun,
    last: StoredRun,
    metric: str,
    labels: dict[str, list[str]],
    slice_by: str | None,
) -> pd.DataFrame:
    """One row per query both runs defined ``metric`` for: a (first run), b (last), delta."""
    mine = values[values["metric"] == metric]
    a = mine[mine["run_id"] == first.run_id].set_index("query_id")["value"].rename("a")
    b = mine[mine["run_id"] == last.run_id].set_index("query_id")["value"].rename("b")
    pairs = pd.concat([a, b], axis=1, join="inner").reset_index()
    base = queries[queries["run_id"] == first.run_id].set_index("query_id")
    categories = base["category"].to_dict()
    pairs["group"] = [_group(q, categories, labels, slice_by) for q in pairs["query_id"]]
    pairs["query"] = [base["query"].get(q, "") for q in pairs["query_id"]]
    pairs["delta"] = pairs["b"] - pairs["a"]
    return pairs[["query_id", "group", "query", "a", "b", "delta"]].sort_values("query_id")


def failure_breakdown(
    queries: pd.DataFrame, labels: dict[str, list[str]], runs: list[StoredRun]
) -> pd.DataFrame:
    """Per run and slice (plus ``all``): how many queries fell in each failure class."""
    rows = []
    slices = _slices_of(labels)
    for run in runs:
        mine = queries[queries["run_id"] == run.run_id]
        for name in slices:
            chosen = (
                mine
                if name == "all"
                else mine[[name in labels.get(q, []) for q in mine["query_id"]]]
            )
            counts = chosen["failure_class"].fillna("?").value_counts()
            for failure in _failure_order(set(counts.index)):
                rows.append(
                    {
                        "run_id": run.run_id,
                        "slice": name,
                        "failure_class": failure,
                        "n": int(counts[failure]),
                        "share": float(counts[failure] / len(chosen)),
                    }
                )
    return pd.DataFrame(rows, columns=["run_id", "slice", "failure_class", "n", "share"])


def _failure_order(names: set[str]) -> list[str]:
    known = [f for f in FAILURE_CLASSES if f in names]
    return known + sorted(names - set(known))


def worst_queries(
    values: pd.DataFrame,
    queries: pd.DataFrame,
    candidate: StoredRun,
    baseline: StoredRun | None,
    metric: str,
    top: int = 10,
) -> pd.DataFrame:
    """The candidate's ``top`` worst queries on ``metric``; ties: the larger loss, then id."""
    mine = values[values["metric"] == metric]
    rows = queries[queries["run_id"] == candidate.run_id].merge(
        mine[mine["run_id"] == candidate.run_id][["query_id", "value"]], on="query_id"
    )
    if baseline is not None:
        before = mine[mine["run_id"] == baseline.run_id][["query_id", "value"]]
        rows = rows.merge(before.rename(columns={"value": "baseline"}), on="query_id", how="left")
    else:
        rows["baseline"] = np.nan
    rows["delta"] = rows["value"] - rows["baseline"]
    worse_first = not lower_is_better(metric)
    rows["_badness"] = -rows["value"] if worse_first else rows["value"]
    rows["_loss"] = (-rows["delta"] if worse_first else rows["delta"]).fillna(0.0)
    ordered = rows.sort_values(["_badness", "_loss", "query_id"], ascending=[False, False, True])
    columns = [
        "query_id",
        "category",
        "query",
        "answer",
        "refused",
        "failure_class",
        "n_relevant",
        "value",
        "baseline",
        "delta",
    ]
    return ordered.head(top)[columns].reset_index(drop=True)


def _component(config: dict) -> str:
    params = " ".join(f"{k}={v}" for k, v in config.items() if k != "name")
    return f"{config.get('name', '?')} {params}".strip()


def _manifest_fields(m: dict) -> dict[str, str]:
    dataset = m.get("dataset", {})
    selection = m.get("selection") or {}
    chosen = ", ".join(
        f"{k}={selection[k]}" for k in ("tag", "sample", "seed") if selection.get(k) is not None
    )
    n_selected = len(selection.get("query_ids") or [])
    fields = {
        "run_id": m.get("run_id"),
        "variant": f"{m.get('variant')} ({m.get('variant_origin', '?')})",
        "created_at": m.get("created_at"),
        "duration_s": m.get("duration_s"),
        "status": m.get("status"),
        "dataset": f"{dataset.get('name')} ({dataset.get('n_docs')} docs, "
        f"{dataset.get('n_queries')} queries)",
        "dataset sha256": dataset.get("sha256"),
        "dataset path": dataset.get("path"),
        "selection": f"{n_selected} queries" + (f" ({chosen})" if chosen else ""),
        "ks": ", ".join(str(k) for k in m.get("ks", [])),
        "depth": m.get("depth"),
    }
    for slot, config in (m.get("params") or {}).items():
        fields[f"params.{slot}"] = _component(config)
    index = m.get("index") or {}
    if index:
        fields["index chunks"] = index.get("n_chunks")
    if m.get("usage"):
        fields["usage"] = json.dumps(m["usage"], sort_keys=True)
    fields["rag_bench_version"] = m.get("rag_bench_version")
    fields["git_commit"] = m.get("git_commit")
    for package, version in (m.get("packages") or {}).items():
        fields[f"packages.{package}"] = version
    return {k: "" if v is None else str(v) for k, v in fields.items()}


def _field_rank(field: str) -> int:
    """Manifest rows in reading order: the run, its parameters, then software versions."""
    if field.startswith("params."):
        return 1
    if field in ("index chunks", "usage"):
        return 2
    if field in ("rag_bench_version", "git_commit"):
        return 3
    return 4 if field.startswith("packages.") else 0


def manifest_table(runs: list[StoredRun], labels: dict[str, str]) -> pd.DataFrame:
    """One row per manifest field, one column per run; ``differs`` marks rows that vary."""
    per_run = [_manifest_fields(r.manifest) for r in runs]
    seen = list(dict.fromkeys(f for fields in per_run for f in fields))
    fields = sorted(seen, key=lambda f: (_field_rank(f), seen.index(f)))
    columns = {labels[r.run_id]: [p.get(f, "") for f in fields] for r, p in zip(runs, per_run)}
    table = pd.DataFrame({"field": fields, **columns})
    varies = table.drop(columns=["field"]).nunique(axis=1) > 1
    table["differs"] = varies & (table["field"] != "run_id")
    return table


def report_data(
    runs_dir: str | Path | RunStore | None,
    refs: Sequence[str],
    *,
    slice_by: str | None = "category",
    metric: str = "ndcg@10",
    metrics: Sequence[str] | None = None,
    top: int = 10,
    resamples: int = 10_000,
    seed: int = 0,
    allow_mismatch: bool = False,
) -> ReportData:
    """Read the runs and build every table of the report (no HTML yet)."""
    check_number("top", top, 0, whole=True)
    check_number("resamples", resamples, 1, MAX_RESAMPLES, whole=True)
    metric = canonical(metric)
    store = open_runs(runs_dir)
    runs = _resolve(store, refs, allow_mismatch)
    con = store.connect(runs)
    values, queries, chosen = _load(con, metric, metrics)
    labels = slice_labels(queries, runs, slice_by)
    candidate, baseline = runs[-1], (runs[0] if len(runs) > 1 else None)
    worst = worst_queries(values, queries, candidate, baseline, metric, top)
    cutoff = metric_cutoff(metric)
    rankings, claims = _details(con, candidate.run_id, list(worst["query_id"]), cutoff)
    run_labels = _run_labels(runs)
    return ReportData(
        runs=runs,
        labels=run_labels,
        slice_by=slice_by,
        metric=metric,
        metrics=chosen,
        means=mean_intervals(values, labels, runs, chosen, resamples, seed),
        pairs=query_pairs(values, queries, runs[0], runs[-1], metric, labels, slice_by),
        failures=failure_breakdown(queries, labels, runs),
        worst=worst,
        rankings=rankings,
        claims=claims,
        manifests=manifest_table(runs, run_labels),
        cutoff=cutoff,
        resamples=resamples,
        seed=seed,
    )


# --- render: HTML with inline plotly.js ----------------------------------------------------


def _plotly():
    """plotly's modules, or one line naming the pip install that provides them."""
    from rag_bench.errors import import_backend

    import_backend("plotly", INSTALL, "rag-bench report")
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs
    from plotly.subplots import make_subplots

    return go, make_subplots, get_plotlyjs


def e(value: object) -> str:
    """Escape for HTML text and attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def plot_text(value: object, width: int = 80) -> str:
    """Escape for plotly's text (which reads a few HTML tags and entities), wrapped in lines."""
    lines = textwrap.wrap("" if value is None else str(value), width)
    return "<br>".join(html.escape(line, quote=False) for line in lines) or "&nbsp;"


def _number(value: object, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}f}"
    return str(value)


def _metric_title(metric: str) -> str:
    return f"{metric} (lower is better)" if lower_is_better(metric) else metric


def _colour(run_ids: list[str], run_id: str) -> str:
    return RUN_COLOURS[run_ids.index(run_id) % len(RUN_COLOURS)]


def _means_figure(data: ReportData, go, make_subplots):
    metrics = [m for m in data.metrics if m in set(data.means["metric"])]
    columns = 2 if len(metrics) > 1 else 1
    rows = max(1, -(-len(metrics) // columns))
    fig = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=[plot_text(_metric_title(m)) for m in metrics],
        vertical_spacing=0.35 / rows if rows > 1 else 0.1,
        horizontal_spacing=0.08,
    )
    run_ids = [r.run_id for r in data.runs]
    for i, metric in enumerate(metrics):
        row, col = i // columns + 1, i % columns + 1
        for run in data.runs:
            part = data.means[
                (data.means["metric"] == metric) & (data.means["run_id"] == run.run_id)
            ]
            fig.add_trace(
                go.Bar(
                    name=plot_text(data.labels[run.run_id]),
                    legendgroup=run.run_id,
                    showlegend=i == 0,
                    x=[plot_text(s) for s in part["slice"]],
                    y=part["mean"],
                    marker_color=_colour(run_ids, run.run_id),
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": (part["ci_high"] - part["mean"]).clip(lower=0),
                        "arrayminus": (part["mean"] - part["ci_low"]).clip(lower=0),
                        "thickness": 1.2,
                        "width": 3,
                    },
                    customdata=np.stack(
                        [part["ci_low"], part["ci_high"], part["n"]], axis=-1
                    ).tolist()
                    if len(part)
                    else [],
                    hovertemplate=(
                        f"{plot_text(data.labels[run.run_id])}<br>%{{x}}: %{{y:.3f}} "
                        "[%{customdata[0]:.3f}, %{customdata[1]:.3f}]<br>n = %{customdata[2]}"
                        "<extra></extra>"
                    ),
                ),
                row=row,
                col=col,
            )
    fig.update_layout(
        barmode="group",
        height=230 * rows + 120,
        margin={"t": 70, "b": 40, "l": 50, "r": 20},
        legend={"orientation": "h", "y": 0.995, "yanchor": "top", "x": 0, "yref": "container"},
        template="plotly_white",
    )
    return fig


def _scatter_figure(data: ReportData, go):
    pairs = data.pairs
    first, last = data.runs[0], data.runs[-1]
    lower_better = lower_is_better(data.metric)
    better = pairs["delta"] < -TIE if lower_better else pairs["delta"] > TIE
    worse = pairs["delta"] > TIE if lower_better else pairs["delta"] < -TIE
    fig = go.Figure()
    groups = slice_order(set(pairs["group"]))
    for i, group in enumerate(groups):
        part = pairs[pairs["group"] == group]
        fig.add_trace(
            go.Scatter(
                x=part["a"],
                y=part["b"],
                mode="markers",
                name=plot_text(group),
                marker={
                    "size": 9,
                    "opacity": 0.65,
                    "color": RUN_COLOURS[(i + 2) % len(RUN_COLOURS)]
                    if data.slice_by != "failure_class"
                    else FAILURE_COLOURS.get(group, "#888"),
                    "line": {"width": 0.5, "color": "white"},
                },
                customdata=[
                    [plot_text(q, 40), plot_text(t), plot_text(group)]
                    for q, t in zip(part["query_id"], part["query"])
                ],
                hovertemplate=(
                    "<b>%{customdata[0]}</b> (%{customdata[2]})<br>%{customdata[1]}<br>"
                    f"{plot_text(data.labels[first.run_id])}: %{{x:.3f}} → "
                    f"{plot_text(data.labels[last.run_id])}: %{{y:.3f}}<extra></extra>"
                ),
            )
        )
    values = pd.concat([pairs["a"], pairs["b"]])
    low = float(min(0.0, values.min())) if len(values) else 0.0
    high = float(max(1.0, values.max())) if len(values) else 1.0
    pad = (high - low) * 0.04
    fig.add_shape(
        type="line", x0=low, y0=low, x1=high, y1=high, line={"color": "#999", "dash": "dot"}
    )
    direction = "below" if lower_better else "above"
    fig.update_layout(
        title=plot_text(
            f"{data.metric} per query: {int(better.sum())} better, "
            f"{int((~better & ~worse).sum())} unchanged, {int(worse.sum())} worse "
            f"(points {direction} the diagonal improved)",
            200,
        ),
        xaxis={
            "title": plot_text(f"{data.metric} · {data.labels[first.run_id]}"),
            "range": [low - pad, high + pad],
            "constrain": "domain",
        },
        yaxis={
            "title": plot_text(f"{data.metric} · {data.labels[last.run_id]}"),
            "range": [low - pad, high + pad],
            "scaleanchor": "x",
            "scaleratio": 1,
        },
        height=620,
        margin={"t": 60, "b": 50, "l": 60, "r": 20},
        template="plotly_white",
        hoverlabel={"align": "left"},
    )
    return fig


def _failure_figure(data: ReportData, go):
    failures = data.failures
    slices = list(dict.fromkeys(failures["slice"]))
    run_ids = [r.run_id for r in data.runs]
    x = [[], []]
    for name in slices:
        for run_id in run_ids:
            x[0].append(plot_text(name))
            x[1].append(plot_text(data.labels[run_id]))
    fig = go.Figure()
    for failure in _failure_order(set(failures["failure_class"])):
        part = failures[failures["failure_class"] == failure].set_index(["slice", "run_id"])
        share = [float(part["share"].get((s, r), 0.0)) for s in slices for r in run_ids]
        count = [int(part["n"].get((s, r), 0)) for s in slices for r in run_ids]
        fig.add_trace(
            go.Bar(
                name=plot_text(failure),
                x=x,
                y=share,
                customdata=count,
                marker_color=FAILURE_COLOURS.get(failure, "#999"),
                hovertemplate=(
                    f"{plot_text(failure)}<br>%{{x}}: %{{customdata}} queries "
                    "(%{y:.0%})<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        barmode="stack",
        height=460,
        yaxis={"title": "share of queries", "tickformat": ".0%", "range": [0, 1]},
        margin={"t": 30, "b": 80, "l": 60, "r": 20},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        template="plotly_white",
    )
    return fig


def _figure_html(fig, div_id: str) -> str:
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )


def _means_table(data: ReportData) -> str:
    run_ids = [r.run_id for r in data.runs]
    head = "".join(f"<th>{e(data.labels[r])}</th>" for r in run_ids)
    body = []
    indexed = data.means.set_index(["slice", "metric", "run_id"])
    slices = list(dict.fromkeys(data.means["slice"]))
    for metric in data.metrics:
        for name in slices:
            cells = []
            for run_id in run_ids:
                key = (name, metric, run_id)
                if key not in indexed.index:
                    cells.append("<td>–</td>")
                    continue
                row = indexed.loc[key]
                cells.append(
                    f"<td class='num'>{_number(row['mean'])} "
                    f"<span class='ci'>[{_number(row['ci_low'])}, {_number(row['ci_high'])}]"
                    f"</span> <span class='n'>n={int(row['n'])}</span></td>"
                )
            if any(c != "<td>–</td>" for c in cells):
                body.append(
                    f"<tr><td>{e(_metric_title(metric))}</td><td>{e(name)}</td>{''.join(cells)}</tr>"
                )
    return (
        f"<table class='means'><thead><tr><th>metric</th><th>{e(data.slice_by or 'slice')}</th>"
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _failure_table(data: ReportData) -> str:
    failures = data.failures
    classes = _failure_order(set(failures["failure_class"]))
    head = "".join(f"<th>{e(f)}</th>" for f in classes)
    counts = failures.set_index(["slice", "run_id", "failure_class"])["n"]
    body = []
    for name in dict.fromkeys(failures["slice"]):
        for run in data.runs:
            cells = "".join(
                f"<td class='num'>{int(counts.get((name, run.run_id, f), 0)) or ''}</td>"
                for f in classes
            )
            body.append(f"<tr><td>{e(name)}</td><td>{e(data.labels[run.run_id])}</td>{cells}</tr>")
    return (
        f"<table class='failures'><thead><tr><th>{e(data.slice_by or 'slice')}</th><th>run</th>"
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _relevance_mark(grade: object) -> str:
    if pd.isna(grade):
        return "<span class='unjudged' title='not judged: counts as not relevant'>–</span>"
    grade = int(grade)
    if grade >= 1:
        return f"<span class='relevant' title='relevant, grade {grade}'>✓ {grade}</span>"
    return "<span class='irrelevant' title='judged not relevant'>✗ 0</span>"


def _list(items: object) -> str:
    if items is None or (not isinstance(items, str) and not len(items)):
        return "–"
    return ", ".join(f"<code>{e(i)}</code>" for i in items)


def _trace_html(data: ReportData, row: pd.Series, open_: bool) -> str:
    documents = data.rankings[data.rankings["query_id"] == row["query_id"]]
    ranking = documents[documents["rank"] <= data.cutoff]
    deeper = documents[documents["rank"] > data.cutoff]
    claims = data.claims[data.claims["query_id"] == row["query_id"]]
    shown_relevant = int((ranking["relevance"].fillna(0) >= 1).sum())
    missing = int(row["n_relevant"]) - shown_relevant - len(deeper)
    below = "; ".join(
        f"<code>{e(r['doc_id'])}</code> at rank {int(r['rank'])} (grade {_number(r['relevance'])})"
        for _, r in deeper.iterrows()
    )
    notes = (f"<p class='note'>Relevant further down: {below}</p>" if below else "") + (
        f"<p class='note'>{missing} relevant not retrieved at all</p>" if missing > 0 else ""
    )
    ranking_rows = "".join(
        f"<tr><td class='num'>{int(r['rank'])}</td><td><code>{e(r['doc_id'])}</code></td>"
        f"<td>{_relevance_mark(r['relevance'])}</td><td class='num'>{_number(r['score'])}</td></tr>"
        for _, r in ranking.iterrows()
    )
    claim_rows = "".join(
        f"<tr class='{'supported' if c['supported'] else 'unsupported'}'>"
        f"<td class='num'>{int(c['claim_id'])}</td><td>{e(c['text'])}</td>"
        f"<td>{_verdict(c['supported'])} <span class='n'>grade {_number(c['support_grade'])}</span>"
        f"</td><td>{_list(c['citations'])}</td><td>{_list(c['supported_by'])}</td>"
        f"<td>{e(c['reason'])}</td></tr>"
        for _, c in claims.iterrows()
    )
    baseline = (
        f" · {e(data.labels[data.runs[0].run_id])} {_number(row['baseline'])} "
        f"(Δ {_number(row['delta'])})"
        if len(data.runs) > 1
        else ""
    )
    answer = e(row["answer"]) if row["answer"] else "<em>(no answer)</em>"
    refused = " <span class='tag'>refused</span>" if row["refused"] else ""
    return f"""
<details class="trace"{" open" if open_ else ""}>
<summary><code>{e(row["query_id"])}</code> · {e(row["category"])} ·
<span class="fc fc-{e(row["failure_class"])}">{e(row["failure_class"])}</span> ·
{e(data.metric)} {_number(row["value"])}{baseline}</summary>
<p class="query">{e(row["query"])}</p>
<div class="cols">
<div><h4>Documents: top {data.cutoff}, {shown_relevant} of {_number(row["n_relevant"])} relevant
</h4><table class="ranking"><thead><tr><th>rank</th><th>document</th><th>relevance</th>
<th>score</th></tr></thead><tbody>{ranking_rows or "<tr><td colspan=4>none</td></tr>"}
</tbody></table>{notes}</div>
<div><h4>Answer{refused}</h4><blockquote class="answer">{answer}</blockquote></div>
</div>
<h4>Claims</h4>
<table class="claims"><thead><tr><th>#</th><th>claim</th><th>verdict</th><th>cites</th>
<th>supported by</th><th>reason</th></tr></thead>
<tbody>{claim_rows or "<tr><td colspan=6>no claims</td></tr>"}</tbody></table>
</details>"""


def _verdict(supported: object) -> str:
    if supported is None or pd.isna(supported):
        return "<span class='unjudged'>not judged</span>"
    if supported:
        return "<span class='relevant'>✓ supported</span>"
    return "<span class='irrelevant'>✗ unsupported</span>"


def _worst_html(data: ReportData) -> str:
    if data.worst.empty:
        return "<p>No query of the candidate has a defined value of this metric.</p>"
    return "".join(_trace_html(data, row, i < 3) for i, row in data.worst.iterrows())


def _manifest_html(data: ReportData) -> str:
    runs = [data.labels[r.run_id] for r in data.runs]
    head = "".join(f"<th>{e(label)}</th>" for label in runs)
    body = "".join(
        f"<tr class='{'differs' if row['differs'] else ''}'><th>{e(row['field'])}</th>"
        + "".join(f"<td>{e(row[label])}</td>" for label in runs)
        + "</tr>"
        for _, row in data.manifests.iterrows()
    )
    return (
        f"<table class='manifest'><thead><tr><th>field</th>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;margin:0;
background:#fafafa}
main{max-width:1220px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #ddd;
padding-bottom:4px}h4{margin:10px 0 4px;font-size:13px}
nav a{margin-right:14px}p.lead{color:#555;margin:4px 0 12px}
table{border-collapse:collapse;margin:6px 0;background:#fff;font-size:13px}
th,td{border:1px solid #e2e2e2;padding:3px 8px;text-align:left;vertical-align:top}
thead th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap}
.ci{color:#666}.n{color:#999;font-size:11px}code{font-size:12px}
p.note{color:#555;font-size:12px;margin:4px 0}
tr.differs{background:#fff6d6}table.manifest td{word-break:break-all;max-width:360px}
details.trace{background:#fff;border:1px solid #ddd;border-radius:4px;margin:8px 0;
padding:6px 12px}
details.trace summary{cursor:pointer;font-weight:600}
p.query{font-size:15px;margin:8px 0}
.cols{display:grid;grid-template-columns:minmax(300px,1fr) 2fr;gap:16px}
blockquote.answer{margin:0;padding:6px 10px;background:#f6f8fa;border-left:3px solid #4c78a8;
white-space:pre-wrap;max-height:260px;overflow:auto}
.relevant{color:#2e7d32;font-weight:600}.irrelevant{color:#c62828}.unjudged{color:#999}
tr.unsupported td{background:#fff1f0}
.tag{background:#eee;border-radius:3px;padding:0 5px;font-weight:normal;font-size:12px}
.fc{padding:0 4px;border-radius:3px;background:#eee}.fc-ok,.fc-correct_refusal{background:#e3f4e1}
.chart{background:#fff;border:1px solid #e2e2e2;margin:6px 0}
"""


def render_report(data: ReportData) -> str:
    """The report as one HTML page: plotly.js inline once, every data string escaped."""
    go, make_subplots, get_plotlyjs = _plotly()
    first, last = data.runs[0], data.runs[-1]
    runs_line = ", ".join(
        f"<b>{e(data.labels[r.run_id])}</b> (<code>{e(r.run_id)}</code>)" for r in data.runs
    )
    scatter = (
        f"<div class='chart'>{_figure_html(_scatter_figure(data, go), 'chart-scatter')}</div>"
        if len(data.runs) > 1 and not data.pairs.empty
        else "<p>The per-query scatter needs two runs that share queries.</p>"
    )
    worse = "highest" if lower_is_better(data.metric) else "lowest"
    slice_name = data.slice_by or "none"
    sections = [
        f"""<h2 id="means">Means per {e(slice_name)} with 95 % intervals</h2>
<p class="lead">Mean over the queries with a defined value; whiskers and brackets are a
percentile bootstrap over queries ({data.resamples} resamples, seed {data.seed}).
Slices come from the first run that has the query.</p>
<div class="chart">{_figure_html(_means_figure(data, go, make_subplots), "chart-means")}</div>
{_means_table(data)}""",
        f"""<h2 id="scatter">Per query: {e(data.labels[first.run_id])} vs
{e(data.labels[last.run_id])} on {e(data.metric)}</h2>
<p class="lead">One point per query; hover for its text.</p>
{scatter}""",
        f"""<h2 id="failures">Failure classes per run and {e(slice_name)}</h2>
<div class="chart">{_figure_html(_failure_figure(data, go), "chart-failures")}</div>
{_failure_table(data)}""",
        f"""<h2 id="worst">Worst queries of {e(data.labels[last.run_id])} on {e(data.metric)}</h2>
<p class="lead">The {len(data.worst)} queries with the {worse} {e(data.metric)} (ties: the
largest loss against the first run first), with their trace.</p>
{_worst_html(data)}""",
        f"""<h2 id="manifests">Manifests</h2>
<p class="lead">Highlighted rows differ between the runs.</p>
{_manifest_html(data)}""",
    ]
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rag-bench report: {e(" vs ".join(data.labels[r.run_id] for r in data.runs))}</title>
<style>{STYLE}</style>
<script>{get_plotlyjs()}</script>
</head>
<body><main>
<h1>rag-bench report</h1>
<p class="lead">Runs: {runs_line}. The first is the baseline, the last the candidate.</p>
<nav><a href="#means">Means</a><a href="#scatter">Per query</a><a href="#failures">Failure
classes</a><a href="#worst">Worst queries</a><a href="#manifests">Manifests</a></nav>
{"".join(sections)}
</main></body>
</html>
"""


def report(
    runs_dir: str | Path | RunStore | None,
    refs: Sequence[str],
    *,
    slice_by: str | None = "category",
    metric: str = "ndcg@10",
    metrics: Sequence[str] | None = None,
    top: int = 10,
    resamples: int = 10_000,
    seed: int = 0,
    allow_mismatch: bool = False,
    output: str | Path | None = None,
) -> str:
    """The HTML report of ``refs`` (the first is the baseline, the last the candidate).

    Returns the HTML; with ``output`` also writes it there.
    """
    _plotly()  # fail before any work when the extra is missing
    store = open_runs(runs_dir)
    if output is not None and store.holds(output):
        raise UsageError(
            f"the report would be written into the runs folder {store} ({output})",
            "write it outside the runs folder",
        )
    data = report_data(
        store,
        refs,
        slice_by=slice_by,
        metric=metric,
        metrics=metrics,
        top=top,
        resamples=resamples,
        seed=seed,
        allow_mismatch=allow_mismatch,
    )
    page = render_report(data)
    if output is not None:
        path = Path(output)
        try:
            path.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise RagBenchError(
                f"cannot write the report to {path}: {exc.strerror}", "pass a writable -o path"
            ) from None
    return page
