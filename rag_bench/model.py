"""The plain data passed between stages: documents and queries in, chunks and ranked hits,
the generation, its claims and the judge's verdicts, and one query's result out.

Every stage of a pipeline is a function over these values; none of them knows where it came
from or where it goes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

UNCATEGORIZED = "uncategorized"


@dataclass(frozen=True)
class Doc:
    id: str
    title: str
    text: str
    metadata: dict = field(default_factory=dict, compare=False, hash=False)

    def full_text(self) -> str:
        """Title and body as one text, the way retrievers see the document."""
        return with_title(self.title, self.text)


def with_title(title: str, text: str) -> str:
    """A title and a body joined by a blank line (either may be empty)."""
    return "\n\n".join(part for part in (title, text) if part)


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    category: str = UNCATEGORIZED
    tags: tuple[str, ...] = ()
    answer: str | None = None
    should_refuse: bool = False
    answers: tuple[str, ...] = ()  # further gold answers, each as good as ``answer`` (SQuAD)

    @property
    def gold_answers(self) -> tuple[str, ...]:
        """Every acceptable gold answer: ``answer`` first, then ``answers``, each once."""
        golds = ((self.answer,) if self.answer else ()) + self.answers
        return tuple(dict.fromkeys(g for g in golds if g.strip()))


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    start: int  # character offsets into the document's text
    end: int
    text: str
    title: str = ""

    @property
    def index_text(self) -> str:
        """What retrievers index: the document title, then the passage."""
        return with_title(self.title, self.text)


class Context(list):
    """A query's final chunk ranking, best first, as the generator gets it: a list of
    :class:`Chunk` with ``evidence``, the ranking before any reranker (the fusion stage's, else
    the retriever's; the list itself without a reranker). A generator that decides whether to
    answer on ``evidence`` cannot have that decision changed by a reranker's order or scale."""

    def __init__(self, chunks: Iterable[Chunk] = (), evidence: Iterable[Chunk] | None = None):
        super().__init__(chunks)
        self.evidence: list[Chunk] = self if evidence is None else list(evidence)


@dataclass(frozen=True)
class Hits:
    """One query's ranked chunks: positions into the chunk list, and their scores."""

    index: np.ndarray  # int64
    score: np.ndarray  # float64

    def __len__(self) -> int:
        return len(self.index)

    @staticmethod
    def ranked(index: np.ndarray, score: np.ndarray, depth: int | None = None) -> Hits:
        """Order by score descending, ties by chunk position ascending (corpus order)."""
        index = np.asarray(index, dtype=np.int64)
        score = np.asarray(score, dtype=np.float64)
        order = np.lexsort((index, -score))
        if depth is not None:
            order = order[:depth]
        return Hits(index[order], score[order])

    def top(self, n: int) -> Hits:
        return Hits(self.index[:n], self.score[:n])


@dataclass(frozen=True)
class Generation:
    answer: str
    refused: bool


@dataclass(frozen=True)
class Claim:
    text: str
    citations: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    grade: int | None  # 0 unsupported, 1 partly, 2 fully; None when the claim cannot be judged
    supported: bool | None
    supported_by: tuple[str, ...]
    reason: str
    # the judge's degree of support in [0, 1], ranking claims finer than the grade (for ROC-AUC
    # in judge-agreement); None when it gives none (the grade / 2 stands in)
    score: float | None = None


@dataclass(frozen=True)
class Relevance:
    """A judge's grade of whether an answer gives what its question asked for."""

    grade: int | None  # 0 not, 1 in part, 2 fully; None when the judge's reply was unusable
    reason: str

    @property
    def value(self) -> float | None:
        """The grade as the ``answer_relevance`` metric: 0, 0.5 or 1 (None: unjudged)."""
        return None if self.grade is None else self.grade / 2


@dataclass
class QueryResult:
    """One query's trip through the pipeline: chunk rankings per stage, the answer, its claims
    with the judge's verdicts, the generator's context (chunk positions), timings, and the
    judge's relevance grade of the answer when the judge gives one."""

    stages: dict[str, Hits]
    generation: Generation
    claims: list[Claim]
    verdicts: list[Verdict]
    context: list[int]
    latency_ms: dict[str, float]
    relevance: Relevance | None = None  # from a judge declaring RELEVANCE; None: not asked

    @property
    def final(self) -> Hits:
        return final_ranking(self.stages)


def final_ranking(stages: dict[str, Hits]) -> Hits:
    """The last stage's chunk ranking: what the generator reads."""
    return list(stages.values())[-1]
