"""The report's charts, drawn as inline SVG: no script, no library, a few kB each.

A chart library would cost megabytes of inlined JavaScript for three charts; SVG renders in any
browser offline, and each mark carries a ``<title>`` that the browser shows on hover.
"""

from __future__ import annotations

import pandas as pd

from rag_bench.analysis.pairing import TIE
from rag_bench.evaluation.measures import improvement, lower_is_better
from rag_bench.evaluation.summary import slice_order
from rag_bench.report.html import e, metric_title

RUN_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d")
GROUP_COLOURS = ("#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d", "#4c78a8", "#f58518")
FAILURE_COLOURS = {
    "ok": "#54a24b",
    "correct_refusal": "#a6d96a",
    "retrieval_miss": "#d62728",
    "ranking": "#ff9896",
    "incomplete": "#fdd0a2",
    "retrieved_not_used": "#fdae61",
    "grounded_but_wrong": "#c49c94",
    "fabricated": "#8c1c13",
    "wrong_citation": "#f46d43",
    "wrongly_refused": "#9467bd",
    "answered_unanswerable": "#e377c2",
}


def _svg(chart_id: str, width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg class="chart" id="{chart_id}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{e(label)}">{"".join(body)}</svg>'
    )


def _text(x: float, y: float, value: object, anchor: str = "start", cls: str = "") -> str:
    css = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{css}>{e(value)}</text>'


def _legend(names: list[str], colours: list[str], x0: float, y: float, width=1150):
    """Rows of coloured squares with names from (x0, y), wrapped at ``width``; and the y of
    the last row."""
    out, x = [], x0
    for name, colour in zip(names, colours):
        if x + 28 + 6.5 * len(name) > width and x > x0:
            x, y = x0, y + 16
        out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{colour}"/>')
        out.append(_text(x + 14, y, name))
        x += 28 + 6.5 * len(name)
    return out, y


def colour_of(run_ids: list[str], run_id: str) -> str:
    return RUN_COLOURS[run_ids.index(run_id) % len(RUN_COLOURS)]


def _panel(means: pd.DataFrame, metric: str, runs: list[str], labels: dict[str, str], x0, y0):
    """One metric's bars: per slice a group of runs, each bar with its 95 % interval."""
    width, height, top, bottom = 380, 170, 22, 36
    part = means[means["metric"] == metric]
    slices = list(dict.fromkeys(part["slice"]))
    scale = max(1.0, float(part["ci_high"].max()) if len(part) else 1.0)
    plot_h = height - top - bottom

    def y(v: float) -> float:
        return y0 + top + plot_h * (1 - v / scale)

    out = [_text(x0 + 4, y0 + 14, metric_title(metric), cls="title")]
    out.append(
        f'<line class="axis" x1="{x0 + 30}" y1="{y(0):.1f}" x2="{x0 + width - 6}" y2="{y(0):.1f}"/>'
    )
    for tick in (0.5, 1.0):
        if tick <= scale:
            out.append(_text(x0 + 26, y(tick) + 4, f"{tick:g}", "end"))
            out.append(
                f'<line class="grid" x1="{x0 + 30}" y1="{y(tick):.1f}" '
                f'x2="{x0 + width - 6}" y2="{y(tick):.1f}"/>'
            )
    group_w = (width - 40) / max(1, len(slices))
    bar_w = min(22.0, (group_w - 8) / max(1, len(runs)))
    indexed = part.set_index(["slice", "run_id"])
    for i, name in enumerate(slices):
        gx = x0 + 34 + i * group_w
        out.append(_text(gx + group_w / 2, y0 + height - 20, name[:14], "middle"))
        for j, run_id in enumerate(runs):
            if (name, run_id) not in indexed.index:
                continue
            bx = gx + (group_w - bar_w * len(runs)) / 2 + j * bar_w
            tip = f"{labels[run_id]} · {name}: "
            out += _bar(indexed.loc[(name, run_id)], bx, bar_w - 2, y, colour_of(runs, run_id), tip)
    return out


def _bar(row: pd.Series, x: float, width: float, y, colour: str, tip: str) -> list[str]:
    """A mean's bar (``y`` maps a value to its height on the page) and its interval's whisker."""
    tip += f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] n={int(row['n'])}"
    mid = x + width / 2
    return [
        f'<rect x="{x:.1f}" y="{y(row["mean"]):.1f}" width="{width:.1f}" '
        f'height="{max(0.0, y(0) - y(row["mean"])):.1f}" fill="{colour}"><title>{e(tip)}</title>'
        "</rect>",
        f'<line x1="{mid:.1f}" y1="{y(row["ci_low"]):.1f}" x2="{mid:.1f}" '
        f'y2="{y(row["ci_high"]):.1f}" stroke="#333"/>',
    ]


def means_chart(means: pd.DataFrame, metrics: list[str], runs: list[str], labels) -> str:
    """Small multiples: one panel per metric, bars per slice and run with 95 % intervals."""
    shown = [m for m in metrics if m in set(means["metric"])]
    columns = 3
    rows = max(1, -(-len(shown) // columns))
    body, _ = _legend([labels[r] for r in runs], [colour_of(runs, r) for r in runs], 10, 18)
    for i, metric in enumerate(shown):
        body += _panel(means, metric, runs, labels, 390 * (i % columns), 28 + 175 * (i // columns))
    return _svg("chart-means", 1170, 36 + 175 * rows, body, "means per slice and run")


def scatter_chart(pairs: pd.DataFrame, metric: str, a_label: str, b_label: str) -> str:
    """One point per query: the first run's value against the last run's, the diagonal for
    unchanged; a point's title names the query and both values."""
    size, pad = 520, 50
    values = pd.concat([pairs["a"], pairs["b"]])
    low = float(min(0.0, values.min())) if len(values) else 0.0
    high = float(max(1.0, values.max())) if len(values) else 1.0
    span = (high - low) or 1.0

    def at(v: float) -> float:
        return pad + (size - 2 * pad) * (v - low) / span

    def up(v: float) -> float:
        return size - at(v) + 10

    gain = pd.Series(improvement(metric, pairs["delta"]))  # per query, as the deltas
    better, worse = int((gain > TIE).sum()), int((gain < -TIE).sum())
    side = "below" if lower_is_better(metric) else "above"
    body = [
        _text(
            pad,
            20,
            f"{metric}: {better} better, {len(pairs) - better - worse} unchanged, "
            f"{worse} worse (points {side} the diagonal improved)",
            cls="title",
        ),
        f'<line class="grid" x1="{at(low):.1f}" y1="{up(low):.1f}" x2="{at(high):.1f}" '
        f'y2="{up(high):.1f}" stroke-dasharray="4 3" stroke="#999"/>',
        f'<line class="axis" x1="{pad}" y1="{up(low):.1f}" x2="{at(high):.1f}" '
        f'y2="{up(low):.1f}"/>',
        f'<line class="axis" x1="{pad}" y1="{up(low):.1f}" x2="{pad}" y2="{up(high):.1f}"/>',
    ]
    for tick in (low, (low + high) / 2, high):
        body.append(_text(at(tick), up(low) + 16, f"{tick:g}", "middle"))
        body.append(_text(pad - 6, up(tick) + 4, f"{tick:g}", "end"))
    body.append(_text(size / 2, size + 2, f"{a_label} (first run)", "middle"))
    body.append(
        f'<text transform="translate(14 {size / 2:.0f}) rotate(-90)" text-anchor="middle">'
        f"{e(b_label)} (last run)</text>"
    )
    groups = slice_order(set(pairs["group"]))
    for i, group in enumerate(groups):
        colour = FAILURE_COLOURS.get(group, GROUP_COLOURS[i % len(GROUP_COLOURS)])
        for row in pairs[pairs["group"] == group].itertuples():
            tip = f"{row.query_id} ({group}): {row.a:.3f} → {row.b:.3f}\n{row.query}"
            body.append(
                f'<circle cx="{at(row.a):.1f}" cy="{up(row.b):.1f}" r="4.5" fill="{colour}" '
                f'fill-opacity="0.6" class="point"><title>{e(tip)}</title></circle>'
            )
    colours = [
        FAILURE_COLOURS.get(g, GROUP_COLOURS[i % len(GROUP_COLOURS)]) for i, g in enumerate(groups)
    ]
    body += _side_legend(groups, colours, size + 4)
    return _svg("chart-scatter", size + 190, size + 12, body, f"{metric} per query")


def _side_legend(names: list[str], colours: list[str], x: float) -> list[str]:
    out = []
    for i, (name, colour) in enumerate(zip(names, colours)):
        y = 50 + 18 * i
        out.append(f'<circle cx="{x + 5}" cy="{y - 4}" r="5" fill="{colour}"/>')
        out.append(_text(x + 14, y, name))
    return out


def failure_chart(failures: pd.DataFrame, order: list[str], runs: list[str], labels) -> str:
    """Per run, one bar of its queries split by failure class (the ``all`` slice)."""
    part = failures[failures["slice"] == "all"].set_index(["run_id", "failure_class"])
    left, width, bar = 180, 960, 24
    body, below = _legend(order, [FAILURE_COLOURS.get(f, "#999") for f in order], 10, 18, width)
    for i, run_id in enumerate(runs):
        y0 = below + 16 + i * (bar + 10)
        body.append(_text(left - 8, y0 + 16, labels[run_id][:28], "end"))
        x = float(left)
        for failure in order:
            if (run_id, failure) not in part.index:
                continue
            row = part.loc[(run_id, failure)]
            w = (width - left - 10) * float(row["share"])
            tip = f"{labels[run_id]} · {failure}: {int(row['n'])} queries ({row['share']:.0%})"
            body.append(
                f'<rect x="{x:.1f}" y="{y0}" width="{w:.1f}" height="{bar}" '
                f'fill="{FAILURE_COLOURS.get(failure, "#999")}"><title>{e(tip)}</title></rect>'
            )
            x += w
    height = below + 26 + len(runs) * (bar + 10)
    return _svg("chart-failures", width, height, body, "failure classes")


def length_chart(lengths: pd.DataFrame, runs: list[str], labels, rho: dict[str, float]) -> str:
    """One point per (run, query): answer_length across, faithfulness up, coloured by run; the
    legend gives each run's Spearman ρ."""
    width, height, left, bottom, top = 640, 360, 50, 40, 40
    longest = float(max(1.0, lengths["length"].max())) if len(lengths) else 1.0

    def x(v: float) -> float:
        return left + (width - left - 20) * v / longest

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - v)

    names = [f"{labels[r]}: ρ = {rho[r]:.2f}" if rho[r] == rho[r] else labels[r] for r in runs]
    body, _ = _legend(names, [colour_of(runs, r) for r in runs], 10, 18, width)
    body += [
        f'<line class="axis" x1="{left}" y1="{y(0):.1f}" x2="{x(longest):.1f}" y2="{y(0):.1f}"/>',
        f'<line class="axis" x1="{left}" y1="{y(0):.1f}" x2="{left}" y2="{y(1):.1f}"/>',
        _text(width / 2, height - 6, "answer_length (words)", "middle"),
        f'<text transform="translate(14 {height / 2:.0f}) rotate(-90)" text-anchor="middle">'
        "faithfulness</text>",
    ]
    for tick in (0.0, 0.5, 1.0):
        body.append(_text(left - 6, y(tick) + 4, f"{tick:g}", "end"))
    for tick in (0.0, longest / 2, longest):
        body.append(_text(x(tick), y(0) + 16, f"{tick:.0f}", "middle"))
    for row in lengths.itertuples():
        tip = f"{labels[row.run_id]} · {row.query_id}: {row.length:g} words, {row.faithfulness:.2f}"
        body.append(
            f'<circle cx="{x(row.length):.1f}" cy="{y(row.faithfulness):.1f}" r="4" '
            f'fill="{colour_of(runs, row.run_id)}" fill-opacity="0.5" class="point length-point">'
            f"<title>{e(tip)}</title></circle>"
        )
    return _svg("chart-length", width, height, body, "answer length against faithfulness")
