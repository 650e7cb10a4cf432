"""Which of a dataset's queries a run answers: a tier (see :mod:`rag_bench.data.tiers`), then
the queries carrying a tag, then a seeded sample of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_bench.data import UNREVIEWED_TAG
from rag_bench.data.dataset import Dataset
from rag_bench.data.perturb import parse_perturbations, with_perturbed
from rag_bench.data.tiers import tier_queries
from rag_bench.errors import ParameterError, UsageError, check_number
from rag_bench.model import Query


@dataclass(frozen=True)
class Selection:
    """Which of a dataset's queries a run answers: a tier (see :mod:`rag_bench.data.tiers`),
    then those carrying ``tag``, then a seeded sample of ``sample`` of them; with ``perturb``,
    each chosen query's perturbed copies too (:mod:`rag_bench.data.perturb`, drawn with
    ``seed``)."""

    tag: str | None = None
    sample: int | None = None
    seed: int = 0
    tier: str | None = None
    perturb: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.perturb:  # a manifest keeps a list; one spelling, checked names
            object.__setattr__(self, "perturb", tuple(parse_perturbations(self.perturb)))

    def select(self, data: Dataset) -> tuple[Dataset, list[str]]:
        """The dataset the run works on (``data``, with the perturbed copies and their qrels
        added when asked) and the ids of its queries to answer, copies after originals."""
        chosen = self.apply(data.queries)
        if not self.perturb:
            return data, chosen
        data, chosen, _ = with_perturbed(data, chosen, self.perturb, self.seed)
        return data, chosen

    def apply(self, queries: dict[str, Query]) -> list[str]:
        ids = list(queries)
        check_number("seed", self.seed, 0, whole=True)
        if self.tag is not None and not self.tag.strip():
            raise ParameterError("tag", self.tag, "a tag the queries carry (e.g. smoke), or none")
        if self.tier:
            ids = tier_queries(queries, self.tier)
            if not ids and all(UNREVIEWED_TAG in q.tags for q in queries.values()):
                raise UsageError(
                    f"no query is in the {self.tier} tier: every query is generated and unreviewed",
                    "accept them (rag-bench generate --accept LABELS), or run them with "
                    f"--tag {UNREVIEWED_TAG}",
                )
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
        record: dict[str, Any] = {
            "tier": self.tier,
            "tag": self.tag,
            "sample": self.sample,
            "seed": self.seed,
        }
        if self.perturb:  # left out otherwise: manifests of plain runs stay as they were
            record["perturb"] = list(self.perturb)
        return record

    def shown(self) -> str:
        """The selection as the options that make it (``--tier smoke --sample 5 --seed 2``)."""
        parts = [f"--tier {self.tier}"] if self.tier else []
        parts += [f"--tag {self.tag}"] if self.tag else []
        if self.sample is not None:
            parts.append(f"--sample {self.sample} --seed {self.seed}")
        if self.perturb:
            parts.append(f"--perturb {','.join(self.perturb)} --seed {self.seed}")
        return " ".join(parts) or "all queries"


EVERY_QUERY = Selection()  # no tier, tag or sample: every query of the dataset
