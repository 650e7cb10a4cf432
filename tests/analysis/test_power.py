"""What each tier can detect: tier_power over per-query differences, the dataset cards' tables,
and a check that the shipped cards agree with fresh runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rag_bench.analysis.power import (
    END,
    START,
    card_block,
    card_table,
    tier_power,
    with_table,
)
from rag_bench.data.dataset import SHIPPED_FOLDER, load_dataset
from rag_bench.errors import RagBenchError
from rag_bench.evaluation.stats import minimum_detectable_effect, queries_needed
from rag_bench.model import Query


def metrics_frame(values: dict[str, float | None], metric: str = "ndcg@10") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": list(values),
            "metric": metric,
            "value": [np.nan if v is None else v for v in values.values()],
        }
    )


def queries(n: int, smoke: int, regression: int | None = None) -> dict[str, Query]:
    def tags(i: int) -> tuple[str, ...]:
        return (("smoke",) if i < smoke else ()) + (
            ("regression",) if regression is not None and i < regression else ()
        )

    return {f"q{i}": Query(f"q{i}", "text", tags=tags(i)) for i in range(n)}


def test_tier_power_is_the_paired_mde_of_each_tiers_queries():
    rng = np.random.default_rng(0)
    a = {f"q{i}": float(rng.random()) for i in range(40)}
    b = {q: v + float(rng.normal(0.05, 0.2)) for q, v in a.items()}
    a["q3"] = None  # undefined in one run: not paired
    power = tier_power(metrics_frame(a), metrics_frame(b), queries(40, 10), ["ndcg@10"])
    assert list(power["tier"]) == ["smoke", "regression = deep"]
    smoke, full = power.iloc[0], power.iloc[1]
    d = np.array([b[f"q{i}"] - a[f"q{i}"] for i in range(10) if i != 3])
    assert smoke["queries"] == 10 and smoke["paired"] == 9
    assert smoke["delta"] == pytest.approx(d.mean())
    assert smoke["sd"] == pytest.approx(d.std(ddof=1))
    assert smoke["mde"] == pytest.approx(minimum_detectable_effect(d))
    assert smoke["needed_0.02"] == queries_needed(d, 0.02)
    assert full["queries"] == 40 and full["paired"] == 39
    assert full["mde"] < smoke["mde"]  # four times the queries, similar spread


def test_a_tagged_regression_tier_gets_its_own_rows():
    a = metrics_frame({f"q{i}": 0.5 for i in range(20)})
    b = metrics_frame({f"q{i}": 0.5 + (i % 3) / 10 for i in range(20)})
    power = tier_power(a, b, queries(20, 4, regression=12), ["ndcg@10"])
    assert list(power["tier"]) == ["smoke", "regression", "deep"]
    assert list(power["queries"]) == [4, 12, 20]


def test_the_card_table_and_its_markers():
    a = metrics_frame({f"q{i}": 0.5 for i in range(6)})
    b = metrics_frame({f"q{i}": 0.5 + (0.1 if i % 2 else 0.0) for i in range(6)})
    same = metrics_frame({f"q{i}": 0.5 for i in range(6)})
    varied = tier_power(a, b, queries(6, 6), ["ndcg@10"])
    table = card_table(varied)
    head = table.splitlines()[0]
    assert head.startswith("| tier | queries | metric | paired | Δ (hybrid − baseline)")
    assert f"| {varied['mde'][0]:.3f} |" in table
    # two runs that never differ give no spread to plan with: said, not shown as 0
    flat = card_table(tier_power(a, same, queries(6, 6), ["ndcg@10"]))
    assert "– (no query differed)" in flat
    card = f"# card\n\ntext\n\n{START}\nold\n{END}\n\nmore\n"
    updated = with_table(card, table)
    assert card_block(updated) == table and updated.endswith("\n\nmore\n")
    with pytest.raises(RagBenchError, match="markers"):
        with_table("# a card without markers\n", table)
    with pytest.raises(RagBenchError, match="answer_f1"):
        tier_power(a, b, queries(6, 6), ["ndcg@10", "answer_f1"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kestrel-kb", "lumen-mall-zh"])
def test_the_shipped_card_agrees_with_fresh_runs(shipped_runs, name):
    """A stale card fails: its table is recomputed from runs of baseline and hybrid made now.
    Fix it with `python -m rag_bench.analysis.power`."""
    baseline, hybrid = shipped_runs(name)
    power = tier_power(baseline.metrics, hybrid.metrics, load_dataset(name).queries)
    card = (SHIPPED_FOLDER / name / "README.md").read_text(encoding="utf-8")
    assert card_block(card) == card_table(power), "run: python -m rag_bench.analysis.power"
    assert card.count(START) == 1
