"""How big a change each query tier can detect, for a dataset card.

The minimum detectable effect (80 % power, two-sided alpha 0.05, paired) of a tier depends on
its number of queries and on how much two variants' per-query values differ from query to
query. :func:`tier_power` takes that spread from two real runs (the card uses ``baseline`` and
``hybrid``: the size of change one pipeline edit makes), tier by tier, and says how many
queries a tier needs to detect 0.02 or 0.01. :func:`card_table` renders it as the Markdown table
of the shipped cards, between two markers; ``python -m rag_bench.analysis.power`` runs the two
variants on every shipped dataset with a card table and rewrites it, and a test recomputes the
tables from fresh runs and fails when a card disagrees.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.data import TIERS
from rag_bench.data.tiers import tier_queries
from rag_bench.errors import RagBenchError
from rag_bench.evaluation.stats import minimum_detectable_effect, queries_needed
from rag_bench.model import Query

HEADLINE = ("ndcg@10", "recall@10", "answer_f1", "key_fact_recall")
CARD_VARIANTS = ("baseline", "hybrid")
PLANNED_DELTAS = (0.02, 0.01)  # the changes the card says a deep tier needs queries for
START, END = "<!-- tier-power:start -->", "<!-- tier-power:end -->"
BLOCK = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.S)


def tier_power(
    metrics_a: pd.DataFrame,
    metrics_b: pd.DataFrame,
    queries: dict[str, Query],
    metrics: Sequence[str] = HEADLINE,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Per tier and metric: the paired queries (both runs defined), the mean difference b − a,
    the standard deviation of the differences, the minimum detectable effect, and the queries
    needed for each of :data:`PLANNED_DELTAS` at that spread. ``metrics_a`` / ``metrics_b`` are
    two runs' metrics tables over the same dataset; a tier with the same queries as the one
    before it is merged into that row (``regression = deep`` while no query is tagged
    regression)."""
    wide = _paired(metrics_a, metrics_b, metrics)
    rows, previous = [], None
    for tier in TIERS:
        ids = tier_queries(queries, tier)
        if ids == previous:
            for row in rows[-len(metrics) :]:
                row["tier"] += f" = {tier}"
            continue
        previous = ids
        for metric in metrics:
            rows.append({"tier": tier, "metric": metric} | _row(wide, metric, ids, alpha))
    return pd.DataFrame(rows)


def _paired(a: pd.DataFrame, b: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """metric × query_id → the two runs' values, where both are defined."""
    both = pd.concat([a.assign(run="a"), b.assign(run="b")])
    both = both[both["metric"].isin(metrics)]
    wide = both.pivot_table(index=["metric", "query_id"], columns="run", values="value")
    missing = [m for m in metrics if m not in wide.index.get_level_values("metric")]
    if missing:
        raise RagBenchError(
            f"the runs have no values of {', '.join(missing)}", "run with the default cutoffs"
        )
    return wide.dropna()


def _row(wide: pd.DataFrame, metric: str, ids: list[str], alpha: float) -> dict:
    values = wide.loc[metric]
    values = values[values.index.isin(ids)]
    d = (values["b"] - values["a"]).to_numpy()
    row: dict[str, float | None] = {
        "queries": len(ids),
        "paired": len(d),
        "delta": float(d.mean()) if len(d) else np.nan,
        "sd": float(d.std(ddof=1)) if len(d) > 1 else np.nan,
        "mde": minimum_detectable_effect(d, alpha),
    }
    for delta in PLANNED_DELTAS:
        row[f"needed_{delta:g}"] = queries_needed(d, delta, alpha)
    return row


def card_table(power: pd.DataFrame, names: tuple[str, str] = CARD_VARIANTS) -> str:
    """The Markdown table of a dataset card (without the markers)."""
    a, b = names
    head = (
        f"| tier | queries | metric | paired | Δ ({b} − {a}) | sd of Δ | detectable Δ | "
        + " | ".join(f"queries for Δ {d:g}" for d in PLANNED_DELTAS)
        + " |"
    )
    lines = [head, "|" + "---|" * (7 + len(PLANNED_DELTAS))]
    for row in power.to_dict("records"):
        cells = [row["tier"], row["queries"], f"`{row['metric']}`", row["paired"]]
        cells += [_number(row["delta"], signed=True), _number(row["sd"])]
        if row["sd"] == 0:  # no query differed: there is no spread to plan with
            cells += ["– (no query differed)"] + ["–"] * len(PLANNED_DELTAS)
        else:
            cells += [_number(row["mde"])]
            cells += [_count(row[f"needed_{d:g}"]) for d in PLANNED_DELTAS]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def _number(value: float, signed: bool = False) -> str:
    if not np.isfinite(value):
        return "–"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _count(value) -> str:
    return "–" if value is None or pd.isna(value) else f"{int(value):,}"


def card_block(card: str) -> str:
    """The table between the markers of a card's text."""
    found = BLOCK.search(card)
    if found is None:
        raise RagBenchError(f"the card has no {START} … {END} block", "add the two markers")
    return found.group(0)[len(START) + 1 : -len(END)].strip()


def with_table(card: str, table: str) -> str:
    """The card's text with the table between its markers replaced."""
    card_block(card)  # the markers are there
    return BLOCK.sub(lambda _: f"{START}\n{table}\n{END}", card)


def dataset_power(dataset: str, runs_dir: str | Path, **run_options) -> pd.DataFrame:
    """Run :data:`CARD_VARIANTS` on a dataset (default parameters, every query) into
    ``runs_dir`` and compute its :func:`tier_power`."""
    from rag_bench.data.dataset import load_dataset
    from rag_bench.experiment.session import run

    data = load_dataset(dataset)
    results = run(list(CARD_VARIANTS), data, runs_dir=runs_dir, **run_options)
    assert isinstance(results, list)  # a list of variants gives a list of runs
    a, b = results
    return tier_power(a.metrics, b.metrics, data.queries)


def main() -> None:
    """Rewrite the table of every shipped card that has the markers, from fresh runs."""
    import tempfile

    from rag_bench.data.dataset import SHIPPED_FOLDER, shipped_datasets

    for name in shipped_datasets():
        card = SHIPPED_FOLDER / name / "README.md"
        if not card.is_file() or START not in card.read_text(encoding="utf-8"):
            continue
        with tempfile.TemporaryDirectory() as runs:
            table = card_table(dataset_power(name, runs))
        card.write_text(with_table(card.read_text(encoding="utf-8"), table), encoding="utf-8")
        print(f"{card}: table rewritten")


if __name__ == "__main__":
    main()
