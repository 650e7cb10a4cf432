"""The report's SVG charts on hand-made tables: marks where the numbers put them, directions read
from the metric catalogue, every data string escaped."""

from __future__ import annotations

import re

import pandas as pd

from rag_bench.report.figures import failure_chart, means_chart, scatter_chart


def pairs(a, b, query="q"):
    frame = pd.DataFrame({"a": a, "b": b})
    frame["query_id"] = [f"q{i}" for i in range(len(frame))]
    frame["group"] = "literal"
    frame["query"] = query
    frame["delta"] = frame["b"] - frame["a"]
    return frame


def test_the_scatter_counts_changes_in_the_metrics_direction():
    frame = pairs([0.0, 1.0, 0.5], [1.0, 0.0, 0.5])
    up = scatter_chart(frame, "recall@10", "A", "B")
    assert "1 better, 1 unchanged, 1 worse (points above the diagonal improved)" in up
    down = scatter_chart(frame, "over_refusal", "A", "B")
    assert "1 better, 1 unchanged, 1 worse (points below the diagonal improved)" in down
    assert up.count('class="point"') == 3


def test_a_point_sits_at_its_two_values():
    svg = scatter_chart(pairs([0.0, 1.0, 0.25], [0.0, 1.0, 0.75]), "ndcg@10", "A", "B")
    points = [tuple(map(float, p)) for p in re.findall(r'cx="([\d.]+)" cy="([\d.]+)" r="4.5"', svg)]
    (x0, y0), (x1, y1), (x, y) = points
    assert x == x0 + 0.25 * (x1 - x0)  # x: the first run's value
    assert y == y0 + 0.75 * (y1 - y0)  # y: the last run's value (SVG's y grows downwards)
    assert y1 < y0


def test_chart_text_is_escaped():
    svg = scatter_chart(pairs([0.1], [0.2], query="<script>alert(1)</script>"), "mrr", "<a>", "b")
    assert "<script" not in svg and "<a>" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg


def test_failure_bars_split_by_share():
    failures = pd.DataFrame(
        {
            "run_id": ["r1", "r1"],
            "slice": ["all", "all"],
            "failure_class": ["ok", "retrieval_miss"],
            "n": [3, 1],
            "share": [0.75, 0.25],
        }
    )
    svg = failure_chart(failures, ["ok", "retrieval_miss"], ["r1"], {"r1": "baseline"})
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="\d+" width="([\d.]+)"', svg)]
    assert widths[0] == 3 * widths[1] > 0
    assert "baseline · ok: 3 queries (75%)" in svg


def test_means_bars_and_intervals_scale_together():
    means = pd.DataFrame(
        {
            "slice": ["all", "all"],
            "metric": ["recall@10", "recall@10"],
            "run_id": ["r1", "r2"],
            "mean": [0.8, 0.4],
            "ci_low": [0.7, 0.3],
            "ci_high": [0.9, 0.5],
            "n": [10, 10],
        }
    )
    svg = means_chart(means, ["recall@10", "faithfulness"], ["r1", "r2"], {"r1": "a", "r2": "b"})
    heights = [float(h) for h in re.findall(r'height="([\d.]+)" fill="#\w+"><title>', svg)]
    assert heights[0] == 2 * heights[1] > 0
    assert "faithfulness" not in svg  # no panel for a metric without means
    assert "a · all: 0.800 [0.700, 0.900] n=10" in svg
