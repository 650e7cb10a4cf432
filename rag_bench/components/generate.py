"""Generators turn the top chunks into an answer with citation markers, or a refusal."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_bench.components.base import Capability, Generator
from rag_bench.components.registry import component
from rag_bench.components.termstats import TermWeights
from rag_bench.data.dataset import Dataset
from rag_bench.errors import ParameterError, UsageError, check_number
from rag_bench.model import Chunk, Generation, Query
from rag_bench.text.facts import key_facts
from rag_bench.text.scripts import HAN, has_han, is_chinese
from rag_bench.text.sentences import split_sentences

REFUSAL_TEXT = "I don't know: the retrieved documents do not answer this question."
REFUSAL_TEXT_ZH = "无法回答：检索到的资料不足以回答这个问题。"
# A sentence's final punctuation and the closing quotes after it: the marker goes before it.
FINAL = re.compile(r"[.!?。．！？；…]+[”’」』）)]*$")
YEAR = re.compile(r"(?:19|20)\d\d")
CJK_FINAL = re.compile(r"[。．！？；…]+[”’」』）)]*$")
# what the refusal is decided on: the ranking before any reranker, or the one quoted from
REFUSE_ON = ("retrieval", "context")
EXTRACTIVE_NOTE = (
    "generator extractive quotes its context, so it cannot fabricate: its faithfulness and "
    "citation precision are no evidence of anything; for a real model: make llm, "
    "--set generator.name=llama_cpp (or generator.name=openai for your own server)"
)


@dataclass(frozen=True)
class _Candidate:
    text: str
    doc_id: str
    terms: frozenset[str]
    rank: int


@component(
    "generator",
    "extractive",
    description="the best-matching sentences of the top chunks, each citing its document",
)
class ExtractiveGenerator(Generator):
    """Greedy set cover of the query's terms by context sentences, weighted by term rarity.

    Each step takes the sentence adding the most not-yet-covered query weight (ties go to the
    higher-ranked chunk); it refuses when the chosen sentences cover less than ``min_coverage``
    of the query's weight, i.e. when the evidence is too weak, and when a code the question names
    (a product, error, incident or version code: KS-660R, E-7070, INC-2025-0307) stands in none
    of its context chunks: an answer about the KS-660 is no answer about the KS-660R.

    With ``refuse_on=retrieval`` (the default) that decision is made on the top ``context_k``
    chunks of the ranking before any reranker (the fusion stage, else the retriever's), and the
    sentences are quoted from the final ranking's: a reranker, whatever its scores, changes what
    is quoted, never whether the generator answers (it still refuses when its top chunks hold no
    sentence sharing a term with the query). ``refuse_on=context`` decides on the final ranking.

    Chinese works through a Chinese analyzer (``zh`` or ``auto``): sentences end at 。！？ etc.,
    a Chinese sentence cites as ``签收7天内可退货【d1】。``, sentences are joined without spaces,
    and a mainly Chinese query is refused in Chinese (``REFUSAL_TEXT_ZH``).
    """

    # what prepare learns depends on the chunks and the analyzer only: it is cached like an index
    capabilities = frozenset({Capability.PREPARE, Capability.CACHE})

    def __init__(
        self,
        context_k: int = 5,
        max_sentences: int = 2,
        min_coverage: float = 0.2,
        refuse_on: str = "retrieval",
    ):
        check_number("generator.context_k", context_k, 1, whole=True)
        check_number("generator.max_sentences", max_sentences, 1, whole=True)
        check_number("generator.min_coverage", min_coverage, 0, 1)
        if refuse_on not in REFUSE_ON:
            raise ParameterError("generator.refuse_on", refuse_on, " or ".join(REFUSE_ON))
        self.context_k = context_k
        self.max_sentences = max_sentences
        self.min_coverage = min_coverage
        self.refuse_on = refuse_on
        self.analyzer: Any = None  # the pipeline's analyzer, given by fit, prepare or load
        self.weights: Any = None  # a TermWeights, learnt by prepare or read by load

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        """Learn term rarity over the chunk collection."""
        self.analyzer = analyzer
        self.weights = TermWeights(analyzer.terms_many([c.index_text for c in chunks]))

    def cache_material(self) -> dict:
        return {"learned": "extractive generator's term weights", "format": 1}

    def save(self, folder: Path) -> None:
        self.weights.write(folder / "term_weights.json")

    def load(self, folder: Path, analyzer) -> None:
        self.analyzer = analyzer
        self.weights = TermWeights.read(folder / "term_weights.json")

    def _candidates(self, context: Sequence[Chunk]) -> list[_Candidate]:
        out = []
        for rank, chunk in enumerate(context[: self.context_k]):
            for start, end in split_sentences(chunk.text):
                text = _squash(chunk.text[start:end])
                terms = frozenset(self.analyzer.terms(text))
                if terms:
                    out.append(_Candidate(text, chunk.doc_id, terms, rank))
        return out

    def generate(self, query: Query, context: Sequence[Chunk]) -> Generation:
        """The answer from ``context``, its refusal decided on ``context.evidence`` (a
        :class:`~rag_bench.model.Context`; a plain list is its own evidence)."""
        return self.generate_with_evidence(query, context, getattr(context, "evidence", context))

    def generate_with_evidence(
        self, query: Query, context: Sequence[Chunk], evidence: Sequence[Chunk]
    ) -> Generation:
        """Refuse when ``evidence`` (with ``refuse_on=retrieval``; else ``context``) is too
        weak, otherwise quote the covering sentences of ``context``."""
        wanted = set(self.analyzer.terms(query.text))
        chosen = self._cover(wanted, context)
        judged = evidence if self.refuse_on == "retrieval" else context
        if _ids(judged[: self.context_k]) == _ids(context[: self.context_k]):
            weak = self._too_weak(query, wanted, context, chosen)
        else:  # and the context must hold a sentence to quote, whatever the evidence says
            weak = self._too_weak(query, wanted, judged, self._cover(wanted, judged)) or not chosen
        if weak:
            return self._refusal(query)
        chosen.sort(key=lambda c: c.rank)
        answer = ""
        for cand in chosen:
            cited = _cite(cand.text, cand.doc_id)
            glue = "" if not answer or CJK_FINAL.search(answer) else " "
            answer += glue + cited
        return Generation(answer, refused=False)

    def _cover(self, wanted: set[str], chunks: Sequence[Chunk]) -> list[_Candidate]:
        """The greedy cover of ``wanted`` by the sentences of the top ``context_k`` chunks."""
        candidates = self._candidates(chunks)
        chosen: list[_Candidate] = []
        covered: set[str] = set()
        while len(chosen) < self.max_sentences:
            best, gain = None, 0.0
            for cand in candidates:
                g = self.weights.total((cand.terms & wanted) - covered)
                if g > gain + 1e-12:
                    best, gain = cand, g
            if best is None:
                break
            chosen.append(best)
            covered |= best.terms & wanted
        return chosen

    def _too_weak(self, query: Query, wanted, chunks, chosen: list[_Candidate]) -> bool:
        """Whether the sentences ``chosen`` from ``chunks`` cover too little of the query's
        weight, or a specific of the question stands in none of the top chunks."""
        total = self.weights.total(wanted)
        covered = set().union(*(c.terms & wanted for c in chosen)) if chosen else set()
        coverage = self.weights.total(covered) / total if total else 0.0
        return (
            not chosen
            or coverage < self.min_coverage
            or _unmatched(query, chunks[: self.context_k])
        )

    @staticmethod
    def _refusal(query: Query) -> Generation:
        return Generation(REFUSAL_TEXT_ZH if is_chinese(query.text) else REFUSAL_TEXT, True)


def _ids(chunks: Sequence[Chunk]) -> list[str]:
    return [c.chunk_id for c in chunks]


def _unmatched(query: Query, context: Sequence[Chunk]) -> bool:
    """Whether a specific of the question (a code, name, date or year; not a bare count such
    as "4-bay" or "3 times", which a passage states in its own way) is in no context chunk."""
    texts = [chunk.index_text for chunk in context]
    wanted = [f for f in key_facts(query.text) if f.words or YEAR.fullmatch(f.text)]
    return any(not any(f.found_in(t) for t in texts) for f in wanted)


def _squash(text: str) -> str:
    """Whitespace collapsed to single spaces, and removed between Han characters (a line break
    inside a Chinese sentence is no word break)."""
    text = " ".join(text.split())
    return re.sub(f"(?<=[{HAN}]) (?=[{HAN}])", "", text)


def _cite(sentence: str, doc_id: str) -> str:
    """Put the marker before the sentence's final punctuation: ``Text [d1].``, and in a Chinese
    sentence ``文本【d1】。`` (before the closing quotes too: ``他说：“可以【d1】。”``)."""
    stripped = sentence.rstrip()
    final = FINAL.search(stripped)
    if has_han(stripped):
        if final is None:
            return f"{stripped}【{doc_id}】。"
        return f"{stripped[: final.start()]}【{doc_id}】{final.group()}"
    if stripped and stripped[-1] in ".!?。！？":
        return f"{stripped[:-1]} [{doc_id}]{stripped[-1]}"
    return f"{stripped} [{doc_id}]."


@component(
    "generator",
    "delayed",
    description="the extractive answer after a fixed wait per call: a stand-in for a model "
    "behind an endpoint, for measuring throughput",
)
class DelayedGenerator(ExtractiveGenerator):
    def __init__(self, delay_ms: float = 200.0, **extractive):
        if delay_ms < 0:
            raise UsageError(f"generator.delay_ms={delay_ms} is below 0", "e.g. 200")
        super().__init__(**extractive)
        self.delay_ms = delay_ms

    def generate(self, query: Query, context: Sequence[Chunk]) -> Generation:
        time.sleep(self.delay_ms / 1000)
        return super().generate(query, context)


@component("generator", "recorded", description="replays the answers recorded in answers.jsonl")
class RecordedGenerator(Generator):
    """The recorded answer; ``context_k`` is how many of the recorded passages the system's
    generator saw (None: all of them), which decides what its claims are judged against."""

    capabilities = frozenset({Capability.PREPARE})

    def __init__(self, context_k: int | None = None):
        self.context_k = context_k

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.answers = dataset.answers

    def generate(self, query: Query, context: Sequence[Chunk]) -> Generation:
        from rag_bench.text.claims import is_refusal

        answer = self.answers[query.id].answer
        return Generation(answer, refused=is_refusal(answer))
