"""Ranking measures as values with canonical names.

A measure is a family plus an optional cutoff: ``ndcg@10`` is ``Measure("ndcg", 10)`` and
``str(parse_measure("ndcg@10")) == "ndcg@10"``. The same string is the CLI argument, the
``metric`` column value and the label in every table. How a family is computed lives in
:mod:`rag_bench.evaluation.retrieval`; this module only says what exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rag_bench.errors import UnknownNameError, UsageError


class Cutoff(Enum):
    REQUIRED = "required"
    OPTIONAL = "optional"
    NONE = "none"


@dataclass(frozen=True)
class Family:
    name: str
    cutoff: Cutoff
    trec_eval: str
    description: str

    def forms(self) -> list[str]:
        """How the family is written, for help and error messages."""
        if self.cutoff is Cutoff.REQUIRED:
            return [f"{self.name}@k"]
        if self.cutoff is Cutoff.OPTIONAL:
            return [self.name, f"{self.name}@k"]
        return [self.name]


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("precision", Cutoff.REQUIRED, "P_k", "relevant in the top k, divided by k"),
        Family("recall", Cutoff.REQUIRED, "recall_k", "relevant in the top k / all relevant"),
        Family("hit", Cutoff.REQUIRED, "success_k", "1 if any relevant document is in the top k"),
        Family("mrr", Cutoff.OPTIONAL, "recip_rank", "1 / rank of the first relevant document"),
        Family("ndcg", Cutoff.OPTIONAL, "ndcg_cut_k / ndcg", "nDCG with linear gain = grade"),
        Family("ndcg_exp", Cutoff.OPTIONAL, "-", "nDCG with exponential gain 2^grade - 1"),
        Family("map", Cutoff.OPTIONAL, "map_cut_k / map", "mean of precision at each relevant"),
        Family("rprec", Cutoff.NONE, "Rprec", "precision at rank R = number of relevant"),
    )
}


@dataclass(frozen=True, order=True)
class Measure:
    family: str
    k: int | None = None

    def __str__(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"


def known_forms() -> list[str]:
    return [form for family in FAMILIES.values() for form in family.forms()]


def parse_measure(name: str) -> Measure:
    """Parse a canonical measure name such as ``ndcg@10`` or ``mrr``."""
    text = name.strip()
    family_name, sep, cutoff_text = text.partition("@")
    family = FAMILIES.get(family_name)
    if family is None:
        raise UnknownNameError("metric", text, known_forms())
    if not sep:
        if family.cutoff is Cutoff.REQUIRED:
            raise UsageError(
                f"metric {text!r} needs a cutoff",
                f"write it as {family.name}@k, e.g. {family.name}@10",
            )
        return Measure(family.name)
    if family.cutoff is Cutoff.NONE:
        raise UsageError(f"metric {family.name!r} takes no cutoff", f"write it as {family.name}")
    if not cutoff_text.isdigit() or int(cutoff_text) < 1:
        raise UsageError(
            f"metric {text!r} has an invalid cutoff", "the cutoff is a whole number ≥ 1, e.g. @10"
        )
    return Measure(family.name, int(cutoff_text))


def parse_measures(spec: str | list[str] | tuple[str, ...]) -> list[Measure]:
    """Parse a comma-separated list (or a list) of names, keeping order, dropping repeats."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    measures: list[Measure] = []
    for name in names:
        if not name.strip():
            continue
        measure = parse_measure(name)
        if measure not in measures:
            measures.append(measure)
    if not measures:
        raise UsageError("no metric given", f"name at least one of: {', '.join(known_forms())}")
    return measures


DEFAULT_EVAL_MEASURES = (
    "precision@10,recall@10,recall@100,hit@10,mrr,mrr@10,ndcg@10,ndcg_exp@10,map,map@100,rprec"
)
