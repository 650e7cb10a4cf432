"""Which metrics moved between runs (the columns a narrow table keeps longest): a regression
in the metric's own direction, or a change whose Holm-adjusted paired p is below alpha."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from table_text import cells

from rag_bench.analysis.moved import RESAMPLES, first_on_each_dataset, moved_metrics
from rag_bench.cli.render import as_table, hiding_order

QUERIES = [f"q{i:02d}" for i in range(20)]


def long_rows(run: str, metric: str, values) -> list[dict]:
    return [
        {"run_id": run, "query_id": q, "metric": metric, "value": v, "repeat": 0}
        for q, v in zip(QUERIES, values)
    ]


def two_runs() -> pd.DataFrame:
    """Run b against run a over 20 queries: ndcg@10 up by 0.5 on every query; over_refusal
    (lower is better) up on one query; recall@10 up on one query; faithfulness the same, with
    one query undefined in b."""
    base = np.linspace(0.1, 0.4, 20)
    refused = np.zeros(20)
    more_refused = refused.copy()
    more_refused[3] = 1.0
    recall = np.full(20, 0.5)
    better_recall = recall.copy()
    better_recall[7] = 1.0
    faithful = np.ones(20)
    undefined = faithful.copy()
    undefined[5] = np.nan
    rows = [
        *long_rows("a", "ndcg@10", base),
        *long_rows("b", "ndcg@10", base + 0.5),
        *long_rows("a", "over_refusal", refused),
        *long_rows("b", "over_refusal", more_refused),
        *long_rows("a", "recall@10", recall),
        *long_rows("b", "recall@10", better_recall),
        *long_rows("a", "faithfulness", faithful),
        *long_rows("b", "faithfulness", undefined),
    ]
    return pd.DataFrame(rows)


METRICS = ["recall@10", "ndcg@10", "faithfulness", "over_refusal"]


def test_a_regression_and_a_significant_change_moved_and_nothing_else():
    found = moved_metrics(two_runs(), {"b": "a"}, METRICS)
    assert [(m.metric, m.why) for m in found] == [
        ("ndcg@10", "significant"),
        ("over_refusal", "regressed"),
    ]
    # 20 untied differences of one sign: no resample of 2,000 reaches the observed sum
    # (chance 2^-19 each), so p = 1/2001; Holm multiplies the smallest of 4 p-values by 4.
    assert found[0].p_adjusted == pytest.approx(4 / (RESAMPLES + 1))
    # one untied difference: every sign flip is as extreme, p = 1
    assert found[1].p_adjusted == 1.0


def test_an_improvement_of_a_lower_is_better_metric_is_no_regression():
    values = two_runs()
    flipped = {"b": "a"}
    swapped = values.assign(run_id=values["run_id"].map({"a": "b", "b": "a"}))
    found = moved_metrics(swapped, flipped, ["over_refusal", "recall@10"])
    assert [(m.metric, m.why) for m in found] == [("recall@10", "regressed")]


def test_repeats_are_averaged_per_query_before_pairing():
    values = two_runs()
    again = values[values["run_id"] == "b"].assign(repeat=1)
    again.loc[again["metric"] == "over_refusal", "value"] = 0.0  # repeat 1 does not refuse
    # q03 of b: over_refusal 1 then 0, mean 0.5, still worse than a's 0
    found = moved_metrics(pd.concat([values, again]), {"b": "a"}, ["over_refusal"])
    assert [(m.metric, m.why) for m in found] == [("over_refusal", "regressed")]


def test_each_run_is_paired_with_the_first_shown_on_its_dataset():
    listed = [("r1", "kestrel"), ("r2", "arguana"), ("r3", "kestrel"), ("r4", "arguana")]
    assert first_on_each_dataset(listed) == {"r3": "r1", "r4": "r2"}
    assert moved_metrics(two_runs(), {}, METRICS) == []


def test_the_hiding_order_puts_what_moved_last():
    moved = {"m2": "significant", "m4": "regressed"}  # most moved first
    order = hiding_order(("created_at",), ["m1", "m2", "m3", "m4"], moved)
    assert order == ["created_at", "m3", "m1", "m4", "m2"]


def test_a_narrow_table_keeps_the_moved_metric_and_says_so(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    frame = pd.DataFrame({"variant": ["a", "b"], **{f"metric{i}": [0.5, 0.6] for i in range(1, 6)}})
    names = [f"metric{i}" for i in range(1, 6)]
    plain = as_table(frame, metrics=names)
    assert list(cells(plain)[0]) == ["variant", "metric1", "metric2", "metric3"]
    assert "(not shown, to fit 40 columns: metric5, metric4;" in " ".join(plain.split())
    kept = as_table(frame, metrics=names, moved={"metric5": "regressed"})
    assert list(cells(kept)[0]) == ["variant", "metric1", "metric2", "metric5"]
    note = " ".join(kept.split("\n(")[1].split())
    assert note.startswith("not shown, to fit 40 columns: metric4, metric3;")
    assert "kept as they moved: metric5 (regressed)" in note
    assert max(len(line) for line in kept.splitlines()) <= 40
