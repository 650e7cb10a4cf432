"""Which of a dataset's queries a run answers: a tier (see :mod:`rag_bench.data.tiers`), then
the queries carrying a tag, then a seeded sample of them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag_bench.data.tiers import tier_queries
from rag_bench.errors import ParameterError, UsageError, check_number
from rag_bench.model import Query


@dataclass(frozen=True)
class Selection:
    """Which of a dataset's queries a run answers: a tier (see :mod:`rag_bench.data.tiers`),
    then those carrying ``tag``, then a seeded sample of ``sample`` of them."""

    tag: str | None = None
    sample: int | None = None
    seed: int = 0
    tier: str | None = None

    def apply(self, queries: dict[str, Query]) -> list[str]:
        ids = list(queries)
        check_number("seed", self.seed, 0, whole=True)
        if self.tag is not None and not self.tag.strip():
            raise ParameterError("tag", self.tag, "a tag the queries carry (e.g. smoke), or none")
        if self.tier:
            ids = tier_queries(queries, self.tier)
            if not ids:
                raise UsageError(
                    f"no query is in the {self.tier} tier (none carries the tag {self.tier!r})",
                    f"tag a stratified sample of the dataset's queries as {self.tier} "
                    "(rag-bench tiers --sample, or rag_bench.data.tiers.sample_tier)",
                )
        if self.tag:
            ids = [q for q in ids if self.tag in queries[q].tags]
            if not ids:
                known = sorted({t for q in queries.values() for t in q.tags})
                raise UsageError(
                    f"no query carries the tag {self.tag!r}",
                    f"use one of: {', '.join(known) or '(none)'}",
                )
        if self.sample is not None:
            # a sample larger than the queries would run them all under a label that says
            # otherwise ("sample=1000" on 275 queries): the user meant another dataset or tag
            check_number(
                "sample", self.sample, 1, len(ids), whole=True, range_note="the queries selected"
            )
            if self.sample < len(ids):
                rng = np.random.default_rng(self.seed)
                keep = set(rng.choice(len(ids), size=self.sample, replace=False).tolist())
                ids = [q for i, q in enumerate(ids) if i in keep]
        return ids

    def record(self) -> dict:
        """The selection as the manifest keeps it (``Selection(**record)`` rebuilds it)."""
        return {"tier": self.tier, "tag": self.tag, "sample": self.sample, "seed": self.seed}

    def shown(self) -> str:
        """The selection as the options that make it (``--tier smoke --sample 5 --seed 2``)."""
        parts = [f"--tier {self.tier}"] if self.tier else []
        parts += [f"--tag {self.tag}"] if self.tag else []
        if self.sample is not None:
            parts.append(f"--sample {self.sample} --seed {self.seed}")
        return " ".join(parts) or "all queries"


EVERY_QUERY = Selection()  # no tier, tag or sample: every query of the dataset
