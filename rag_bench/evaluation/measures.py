"""The metric catalogue: every metric rag-bench stores, as values with canonical names.

A metric is a family plus an optional cutoff: ``ndcg@10`` is ``Measure("ndcg", 10)`` and
``str(parse_measure("ndcg@10")) == "ndcg@10"``. The same string is the CLI argument, the
``metric`` column value and the label in every table. For each family the catalogue says what it
measures (one line), which way is better, whether it is defined for an unanswerable
(``should_refuse``) query, and how trec_eval and ir_measures spell it; those spellings are read
too, and always turned into the canonical name.

How a family is computed lives elsewhere: ranking families in
:mod:`rag_bench.evaluation.retrieval` (one kernel each), answer-side families in
:mod:`rag_bench.evaluation.answer`. To add a metric, declare its :class:`Family` below (answer-side
families in the order they are stored) and compute it there; the tests check that every declared
family is computed and that its declared scope matches where it is NULL.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from rag_bench.data.scores import PEERS
from rag_bench.errors import UnknownNameError, UsageError

if TYPE_CHECKING:
    import numpy as np

# one difference or an array of them (numpy stays unimported until a metric is computed)
Delta = TypeVar("Delta", float, "np.ndarray")


class Cutoff(Enum):
    REQUIRED = "required"
    OPTIONAL = "optional"
    NONE = "none"


class Better(Enum):
    HIGHER = "higher"
    LOWER = "lower"  # a rise is a regression


class Scope(Enum):
    """The queries a family is defined on (NULL on the others)."""

    ANSWERABLE = "answerable"
    UNANSWERABLE = "unanswerable"
    ALL = "all"


class Headline(Enum):
    """Where a family is shown when the user names no metric."""

    NO = "no"
    SUMMARY = "summary"  # run summaries, show, compare, report
    BRIEF = "brief"  # also the one-line-per-run listing


RANKING = "ranking"  # computed from qrels by evaluation.retrieval; every other group: answer side


@dataclass(frozen=True)
class Family:
    name: str
    group: str  # ranking, claims, answer, refusal, context
    cutoff: Cutoff
    definition: str
    better: Better = Better.HIGHER
    scope: Scope = Scope.ANSWERABLE
    aliases: tuple[str, ...] = ()  # other tools' spellings, with this family's cutoff rule
    cut_aliases: tuple[str, ...] = ()  # other tools' spellings that always take a cutoff
    headline: Headline = Headline.NO

    @property
    def defined_for_unanswerable(self) -> bool:
        return self.scope is not Scope.ANSWERABLE

    def forms(self) -> list[str]:
        """How the family is written, for help and error messages."""
        if self.cutoff is Cutoff.REQUIRED:
            return [f"{self.name}@k"]
        if self.cutoff is Cutoff.OPTIONAL:
            return [self.name, f"{self.name}@k"]
        return [self.name]


_H, _L = Better.HIGHER, Better.LOWER
_ANS, _UNANS, _ALL = Scope.ANSWERABLE, Scope.UNANSWERABLE, Scope.ALL
_REQ, _OPT, _NONE = Cutoff.REQUIRED, Cutoff.OPTIONAL, Cutoff.NONE

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        # ranking families: NULL for unanswerable queries in pipeline runs (no relevant document)
        Family(
            "precision",
            RANKING,
            _REQ,
            "relevant documents in the top k, divided by k (even if fewer were retrieved)",
            aliases=("P",),
        ),
        Family(
            "recall",
            RANKING,
            _REQ,
            "relevant documents in the top k / all relevant documents",
            aliases=("R",),
            headline=Headline.BRIEF,
        ),
        Family(
            "hit",
            RANKING,
            _REQ,
            "1 if any relevant document is in the top k",
            aliases=("success",),
        ),
        Family(
            "mrr",
            RANKING,
            _OPT,
            "1 / rank of the first relevant document (@k: within the top k)",
            aliases=("recip_rank", "RR"),
            headline=Headline.SUMMARY,
        ),
        Family(
            "ndcg",
            RANKING,
            _OPT,
            "nDCG with linear gain = grade, discount log2(rank + 1)",
            aliases=("nDCG",),
            cut_aliases=("ndcg_cut",),
            headline=Headline.BRIEF,
        ),
        Family("ndcg_exp", RANKING, _OPT, "nDCG with gain 2^grade - 1"),
        Family(
            "map",
            RANKING,
            _OPT,
            "average precision: precision at each relevant rank, over all relevant documents",
            aliases=("AP",),
            cut_aliases=("map_cut",),
        ),
        Family(
            "rprec",
            RANKING,
            _NONE,
            "precision at rank R, R = number of relevant documents",
            aliases=("Rprec",),
        ),
        Family(
            "judged",
            RANKING,
            _REQ,
            "share of the top k documents that the qrels judge at all (any grade, 0 included), "
            "over min(k, documents retrieved): ir_measures' Judged@k; low means holes in the "
            "qrels, not a bad ranking",
            aliases=("Judged",),
        ),
        # answer-side families, in the order they are stored
        Family(
            "faithfulness",
            "claims",
            _NONE,
            "judged claims supported by the context / judged claims (NULL without claims)",
            scope=_ALL,
            headline=Headline.BRIEF,
        ),
        Family(
            "citation_precision",
            "claims",
            _NONE,
            "citation links whose document supports their claim / all links",
            scope=_ALL,
            headline=Headline.SUMMARY,
        ),
        Family(
            "citation_coverage",
            "claims",
            _NONE,
            "claims carrying a citation / claims",
            scope=_ALL,
        ),
        Family(
            "answer_relevance",
            "answer",
            _NONE,
            "share of the query's content terms the answer addresses, 0 without the kind of "
            "fact asked for (phone, address, ...); with the llm_relevance judge its grade / 2 "
            "(NULL for a refusal)",
            scope=_ALL,
        ),
        Family(
            "answer_exact",
            "answer",
            _NONE,
            "SQuAD exact match: answer and gold answer equal after the official SQuAD v1.1 "
            "normalisation (a refusal scores 0)",
        ),
        Family(
            "answer_f1",
            "answer",
            _NONE,
            "SQuAD token F1 between answer and gold answer (the official normalisation)",
        ),
        Family(
            "answer_contains",
            "answer",
            _NONE,
            "1 if the normalised gold answer stands as a whole word sequence in the answer",
        ),
        Family(
            "key_fact_recall",
            "answer",
            _NONE,
            "share of the gold answer's key facts (numbers, dates, amounts, codes, names) the "
            "answer states (NULL when the gold answer has none)",
            headline=Headline.SUMMARY,
        ),
        Family(
            "correct_refusal",
            "refusal",
            _NONE,
            "on unanswerable queries: 1 if refused",
            scope=_UNANS,
            headline=Headline.SUMMARY,
        ),
        Family(
            "over_refusal",
            "refusal",
            _NONE,
            "on answerable queries: 1 if refused",
            better=_L,
            headline=Headline.SUMMARY,
        ),
        Family(
            "answered_unanswerable",
            "refusal",
            _NONE,
            "on unanswerable queries: 1 if answered",
            better=_L,
            scope=_UNANS,
        ),
        Family(
            "answer_length",
            "answer",
            _NONE,
            "words in the answer, citation markers removed: runs of letters and digits, each Han "
            "character one word (NULL for a refusal); lower is better: a longer answer drifts "
            "further from its evidence",
            better=_L,
            scope=_ALL,
        ),
        Family(
            "context_precision",
            "context",
            _REQ,
            "share of the top k chunks that belong to a relevant document",
        ),
        Family(
            "context_recall",
            "context",
            _REQ,
            "share of the gold answer's content terms found in the top k chunks",
        ),
        Family(
            "answer_span_recall",
            "context",
            _REQ,
            "1 if the gold answer stands whole inside one of the top k chunks",
        ),
    )
}


@dataclass(frozen=True, order=True)
class Measure:
    family: str
    k: int | None = None

    def __str__(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"


def known_forms(groups: Iterable[str] | None = None) -> list[str]:
    return [form for family in _families(groups) for form in family.forms()]


def _families(groups: Iterable[str] | None) -> list[Family]:
    wanted = None if groups is None else set(groups)
    return [f for f in FAMILIES.values() if wanted is None or f.group in wanted]


# --- names: canonical, trec_eval (P_10, ndcg_cut.10) and ir_measures (P@10, nDCG@10) ----------

_HEAD_AND_CUTOFF = re.compile(r"^(?P<head>.+?)(?:[@._](?P<k>\d+))?$")


def _spellings() -> dict[str, tuple[Family, bool]]:
    """Every spelling of a family, lower-cased, with whether it must carry a cutoff."""
    out: dict[str, tuple[Family, bool]] = {}
    for family in FAMILIES.values():
        for spelling in (family.name, *family.aliases):
            out[spelling.lower()] = (family, False)
        for spelling in family.cut_aliases:
            out[spelling.lower()] = (family, True)
    return out


# --- scores imported from other tools: ``ragas:faithfulness``, ``deepeval:answer_relevancy`` ---

IMPORTED = "imported"  # the group of scores imported from other tools (data.scores.PEERS)
# the peers' scores where lower is better (DeepEval's hallucination, bias and toxicity)
IMPORTED_LOWER = ("deepeval:hallucination", "deepeval:bias", "deepeval:toxicity")
_IMPORTED_NAME = re.compile(rf"^(?:{'|'.join(PEERS)}):[a-z0-9][a-z0-9_.-]*$")


def imported_family(name: str) -> Family:
    """The catalogue entry of an imported score: no cutoff, higher better unless listed in
    ``IMPORTED_LOWER``, defined wherever the tool gave a number."""
    tool = name.partition(":")[0]
    return Family(
        name,
        IMPORTED,
        Cutoff.NONE,
        f"{tool}'s own score, as its result file gives it",
        better=Better.LOWER if name in IMPORTED_LOWER else Better.HIGHER,
        scope=Scope.ALL,
    )


def parse_measure(name: str, groups: Iterable[str] | None = None) -> Measure:
    """Parse a metric name into its canonical measure: ``ndcg@10``, ``mrr``, but also trec_eval's
    ``ndcg_cut_10`` / ``ndcg_cut.10`` and ir_measures' ``nDCG@10``; an imported score is
    ``<tool>:<metric>``. ``groups`` restricts the families accepted (e.g. ``("ranking",)``
    where only ranking metrics can be computed)."""
    text = str(name).strip()
    if ":" in text and (groups is None or IMPORTED in set(groups)):
        if not _IMPORTED_NAME.match(text):
            raise UsageError(
                f"metric {text!r} is no imported score's name",
                f"write <tool>:<metric> with a tool of {', '.join(PEERS)}, e.g. ragas:faithfulness",
            )
        return Measure(text)
    head, sep, cutoff_text = text.partition("@")
    family = FAMILIES.get(head)
    if family is None:
        family, cutoff_text, sep = _alias(text)
    if groups is not None and family.group not in set(groups):
        raise UsageError(
            f"{family.group} metric {text!r} cannot be computed here",
            f"name one of: {', '.join(known_forms(groups))}",
        )
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


def _alias(text: str) -> tuple[Family, str, str]:
    """The family, cutoff text and separator of a name in another tool's spelling."""
    match = _HEAD_AND_CUTOFF.match(text)
    head, cutoff_text = (match["head"], match["k"] or "") if match else (text, "")
    spellings = _spellings()
    found = spellings.get(head.lower())
    if found is None:
        raise UnknownNameError(
            "metric", text, known_forms(), close=_close(head, cutoff_text, spellings)
        )
    family, needs_cutoff = found
    if needs_cutoff and not cutoff_text:
        raise UsageError(f"metric {text!r} needs a cutoff", f"e.g. {family.name}@10 (or {head}_10)")
    return family, cutoff_text, "@" if cutoff_text else ""


def _close(head: str, cutoff_text: str, spellings: dict[str, tuple[Family, bool]]) -> list[str]:
    """Canonical names close to a misspelt one, with its cutoff kept where the family takes one."""
    out = []
    for spelling in difflib.get_close_matches(head.lower(), list(spellings), n=3, cutoff=0.6):
        family = spellings[spelling][0]
        if family.cutoff is Cutoff.NONE:
            name = family.name
        else:
            name = f"{family.name}@{cutoff_text or 'k'}"
        if name not in out:
            out.append(name)
    return out


def parse_measures(spec: str | Sequence[str], groups: Iterable[str] | None = None) -> list[Measure]:
    """Parse a comma-separated list (or a list) of names, keeping order, dropping repeats."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    measures: list[Measure] = []
    for name in names:
        if not str(name).strip():
            continue
        measure = parse_measure(name, groups)
        if measure not in measures:
            measures.append(measure)
    if not measures:
        raise UsageError("no metric given", f"name at least one of: {', '.join(known_forms())}")
    return measures


def canonical(name: str) -> str:
    """The canonical name of a metric given in any accepted spelling."""
    return str(parse_measure(name))


def canonical_names(names: Sequence[str]) -> list[str]:
    return [str(m) for m in parse_measures(names)]


def not_stored(kind: str, metric: str, stored: Sequence[str]) -> UnknownNameError:
    """The error for a valid metric that the runs at hand do not hold: the close names offered
    are the same family at the nearest stored cutoffs, else the closest spellings."""
    measure = parse_measure(metric)
    same = [parse_measure(name) for name in stored if name.partition("@")[0] == measure.family]
    nearest = sorted(same, key=lambda m: (abs((m.k or 0) - (measure.k or 0)), m.k or 0))
    close = [str(m) for m in nearest[:3]] or None
    return UnknownNameError(kind, metric, list(stored), close=close)


# --- what the catalogue answers about a metric ------------------------------------------------


def family_of(metric: str) -> Family:
    family = parse_measure(metric).family
    return FAMILIES[family] if family in FAMILIES else imported_family(family)


def lower_is_better(metric: str) -> bool:
    return family_of(metric).better is Better.LOWER


def improvement(metric: str, delta: Delta) -> Delta:
    """``delta`` (new − old) turned so that a positive value is an improvement."""
    return -delta if lower_is_better(metric) else delta


def headline_metrics(ks: Sequence[int] = (10,), brief: bool = False) -> list[str]:
    """The metrics shown when none is named: ranking ones at k = 10 (or the largest cutoff
    below it), then the answer-side essentials; ``brief`` keeps the few of a one-line listing."""
    below = [k for k in ks if k <= 10]
    k = max(below) if below else min(ks)
    shown = (Headline.BRIEF,) if brief else (Headline.BRIEF, Headline.SUMMARY)
    return [
        f.name if f.cutoff is Cutoff.NONE else f"{f.name}@{k}"
        for f in FAMILIES.values()
        if f.headline in shown
    ]


def answer_metric_names(ks: Sequence[int]) -> list[str]:
    """Every answer-side metric a run stores, in storage order: the uncut families, then each
    cutoff's families."""
    answer = [f for f in FAMILIES.values() if f.group != RANKING]
    uncut = [f.name for f in answer if f.cutoff is Cutoff.NONE]
    return uncut + [f"{f.name}@{k}" for k in ks for f in answer if f.cutoff is not Cutoff.NONE]


def catalogue_rows() -> list[dict[str, str]]:
    """The catalogue as plain rows, for listings and documentation."""
    return [
        {
            "metric": ", ".join(f.forms()),
            "group": f.group,
            "better": f.better.value,
            "unanswerable": "yes" if f.defined_for_unanswerable else "no",
            "also": ", ".join((*f.aliases, *(f"{a}_k" for a in f.cut_aliases))),
            "definition": f.definition,
        }
        for f in FAMILIES.values()
    ]


DEFAULT_EVAL_MEASURES = (
    "precision@10,recall@10,recall@100,hit@10,mrr,mrr@10,ndcg@10,ndcg_exp@10,map,map@100,rprec,"
    "judged@10"
)
