"""Tiers: the query sets a team runs at different cadences. The seed's advice is a small smoke
set in CI, a regression set every night and a deep set every week.

A tier is a tag, so whatever selects or slices by tag works on tiers as well:

- ``smoke``: the queries tagged ``smoke``;
- ``regression``: the queries tagged ``regression``, or every labelled query while no query
  carries that tag;
- ``deep``: every labelled query (those of the split's qrels and the ``should_refuse`` ones).

The deep tier grows by adding labelled queries. Once there are too many to run every night,
:func:`sample_tier` draws a ``regression`` tier from them, stratified by category and seeded,
and :func:`write_tier` writes its tag into ``queries.jsonl``. Tiers nest: a sampled tier keeps
every query of the tiers inside it (a regression sample keeps the smoke queries).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rag_bench.data import SAMPLED_TIERS, TIERS, UNREVIEWED_TAG
from rag_bench.data.dataset import Dataset, is_shipped
from rag_bench.errors import DataError, UnknownNameError, UsageError, check_number
from rag_bench.io.durable import atomic_write
from rag_bench.model import Query

if TYPE_CHECKING:
    import pandas as pd


def check_tier(tier: str, tiers: tuple[str, ...] = TIERS) -> str:
    """``tier`` if it is one of ``tiers``; else an error listing them."""
    if tier not in tiers:
        raise UnknownNameError("tier", tier, list(tiers))
    return tier


def tier_tag(queries: dict[str, Query], tier: str) -> str | None:
    """The tag that selects ``tier`` among the labelled ``queries``; None means all of them."""
    check_tier(tier)
    if tier == "deep":
        return None
    if tier == "regression" and not any(tier in q.tags for q in queries.values()):
        return None
    return tier


def tier_queries(queries: dict[str, Query], tier: str) -> list[str]:
    """The ids of the queries in ``tier``, in the dataset's order (empty when none is tagged).
    A generated query nobody has reviewed yet (tagged ``unreviewed``) is in no tier: it is not
    labelled until a person accepts it."""
    tag = tier_tag(queries, tier)
    return [
        q
        for q, query in queries.items()
        if (tag is None or tag in query.tags) and UNREVIEWED_TAG not in query.tags
    ]


def inner_tiers(tier: str) -> tuple[str, ...]:
    """The tiers a sample of ``tier`` must contain: the smaller ones."""
    return TIERS[: TIERS.index(check_tier(tier))]


def sample_tier(queries: dict[str, Query], tier: str, size: int, seed: int = 0) -> list[str]:
    """``size`` query ids for ``tier``, drawn from the next larger tier: every query of the
    smaller tiers, then a seeded draw per category so that each category's share of the tier is
    its share of the larger one (largest remainder). In the dataset's order."""
    check_tier(tier, SAMPLED_TIERS)
    check_number("seed", seed, 0, whole=True)
    larger = TIERS[TIERS.index(tier) + 1]
    pool = {q: queries[q] for q in tier_queries(queries, larger)}
    keep = list(dict.fromkeys(q for inner in inner_tiers(tier) for q in _tagged(pool, inner)))
    low = max(len(keep), 1)  # a tier holds the tiers inside it
    if not low <= size <= len(pool):
        raise UsageError(
            f"a {tier} tier of {size} queries",
            f"give a size from {low} to {len(pool)} (the {larger} tier's queries)",
        )
    import numpy as np

    rng = np.random.default_rng(seed)
    chosen = set(keep)
    for category, extra in _extra_per_category(pool, size, keep).items():
        left = sorted(q for q, v in pool.items() if v.category == category and q not in chosen)
        chosen |= {left[i] for i in rng.permutation(len(left))[:extra]}
    return [q for q in queries if q in chosen]


def _tagged(queries: dict[str, Query], tag: str) -> list[str]:
    return [q for q, v in queries.items() if tag in v.tags]


def _extra_per_category(queries: dict[str, Query], size: int, keep: list[str]) -> dict[str, int]:
    """How many queries to draw per category beyond ``keep`` so the tier has ``size`` queries,
    each category as close to its proportional share as the kept queries allow."""
    total = Counter(q.category for q in queries.values())
    kept = Counter(queries[q].category for q in keep)
    exact = {c: size * n / len(queries) for c, n in total.items()}
    target = {c: int(v) for c, v in exact.items()}
    by_remainder = sorted(total, key=lambda c: (-(exact[c] - target[c]), c))
    for c in by_remainder[: size - sum(target.values())]:
        target[c] += 1
    extra = {c: min(max(target[c] - kept[c], 0), total[c] - kept[c]) for c in sorted(total)}
    short = size - len(keep) - sum(extra.values())
    while short > 0:  # a category ran out: draw from the one with the most left
        c = max(extra, key=lambda c: total[c] - kept[c] - extra[c])
        extra[c] += 1
        short -= 1
    while short < 0:  # the kept queries exceed some categories' shares: draw fewer elsewhere
        c = max(extra, key=lambda c: extra[c])
        extra[c] -= 1
        short += 1
    return extra


def write_tier(dataset: Dataset, tier: str, ids: Iterable[str]) -> int:
    """Tag exactly the queries ``ids`` with ``tier`` in the loaded ``dataset``'s
    ``queries.jsonl`` (adding the tag where missing, removing it elsewhere), rewriting only the
    lines that change, in one atomic write. Returns the number of lines changed. The shipped
    datasets are refused: they are rag-bench's own, in the wheel or the checkout's data/."""
    check_tier(tier, SAMPLED_TIERS)
    path = Path(dataset.path) / "queries.jsonl"
    if is_shipped(path):
        raise DataError(path, "a shipped dataset is not edited in place", "copy its folder first")
    wanted = set(ids)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    changed = 0
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        record = json.loads(line.lstrip("\ufeff"))
        tags = list(record.get("tags") or [])
        if (tier in tags) == (record["_id"] in wanted):
            continue
        tags = [*tags, tier] if record["_id"] in wanted else [t for t in tags if t != tier]
        record["tags"] = tags
        ending = line[len(line.rstrip("\r\n")) :]
        lines[number] = json.dumps(record, ensure_ascii=False) + ending
        changed += 1
    try:
        atomic_write(path, "".join(lines).encode("utf-8"))  # whole or not at all
    except OSError as exc:
        raise DataError(
            path,
            f"cannot be rewritten: {exc.strerror or exc}",
            "copy the dataset to a writable folder",
        ) from None
    return changed


def tier_sizes(queries: dict[str, Query]) -> pd.DataFrame:
    """One row per tier: the tag that selects it (``(all)`` for every labelled query), its
    number of queries, and how many of them each category has."""
    import pandas as pd

    categories = sorted({q.category for q in queries.values()})
    rows = []
    for tier in TIERS:
        ids = tier_queries(queries, tier)
        counts = Counter(queries[q].category for q in ids)
        tag = tier_tag(queries, tier)
        rows.append(
            {"tier": tier, "selects": tag or "(all)", "queries": len(ids)}
            | {c: counts[c] for c in categories}
        )
    return pd.DataFrame(rows)
