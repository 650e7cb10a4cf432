"""What the pipeline may ask of a component: one contract per slot.

A component is a class registered under a kind with ``@component(kind, name)`` (see
:mod:`rag_bench.components.registry`); the kinds are the contracts below: ``analyzer``,
``chunker``, ``retriever``, ``encoder``, ``index`` (how the encoder's embeddings are searched),
``fuser`` (the ``fusion`` slot), ``reranker``, ``generator``, ``judge``. Subclass the contract
of your kind (you inherit its defaults, such as an empty ``capabilities``), or write a class
with the same members.

**Parameters** are the keyword parameters of ``__init__``, each with a default and a type
annotation: ``def __init__(self, size: int = 128)`` is parameter ``size``, default 128, set with
``--set chunker.size=64`` (a value of another type is refused). An ``__init__`` that takes
``**kwargs`` and passes them to ``super().__init__`` has its base class's parameters too.

**Capabilities** are what a component can do beyond its slot's minimum. A component declares
them in the class attribute ``capabilities`` and has the methods each one names; the registry
checks the declaration once, when the component registers, and the pipeline asks the
declaration, never the methods. A capability a slot does not list is an error.

====================== =========================================================================
capability             the component ...
====================== =========================================================================
PREPARE                needs the dataset and the chunked corpus before the first query:
                       ``prepare(dataset, chunks, analyzer)`` (:class:`Prepared`)
CACHE                  (with PREPARE) learns from the corpus only, so the pipeline keeps what
                       ``prepare`` learnt in the cache: ``cache_material()``, ``save(folder)``,
                       ``load(folder, analyzer)`` (:class:`Cached`)
INDEX                  (retriever) indexes the chunk texts with ``fit(texts, analyzer)``; the
                       index is cached like a preparation (:class:`Indexed`)
SELECTS_QUERIES        (retriever) can answer only some queries: ``select_queries(ids)``
BATCH                  (generator, judge) takes a block of queries in one call:
                       ``generate_all`` / ``judge_all`` (:class:`BatchGenerator`,
                       :class:`BatchJudge`), e.g. to send requests concurrently
LEARNS_ACROSS_QUERIES  (reranker) reranks all of a run's queries in one call (it learns from
                       the other queries), so the pipeline never splits them into blocks
INDEPENDENT_EMBEDDINGS (encoder) embeds each text on its own, learning nothing from the corpus,
                       so the corpus is embedded in blocks of whole ``batch_size`` batches,
                       checkpointed, and on a Ray cluster on the workers
METERED                calls a paid service and counts what it used: ``usage()``, ``tally()``,
                       ``absorb(counts)`` (:class:`Metered`); usage lands in the manifest
USES_ENCODER           (reranker) reads the pipeline's dense index (the encoder's query–passage
                       similarity as a feature): ``attach_encoder(index)`` after indexing
                       (:class:`UsesEncoder`)
LEARNS_FROM_SPLIT      (reranker) learns from a labelled split of its own before the evaluated
                       queries: ``train_queries`` (set by ``prepare``; empty: none),
                       ``learn(queries, candidates, stages)`` on their first-stage candidates,
                       and ``training`` (JSON-able: where its labels came from, for the
                       manifest) (:class:`LearnsFromSplit`)
READS_DATASET          (chunker) chunks from what the dataset records, not from the text alone
                       (the passages an imported system retrieved): ``read_dataset(dataset)``
                       before the first ``chunk`` (:class:`ReadsDataset`)
RELEVANCE              (judge) also grades whether each answer gives what its question asks:
                       ``grade_relevance(queries, answers)``, whose grades become the
                       ``answer_relevance`` metric instead of the lexical one
                       (:class:`GradesRelevance`)
====================== =========================================================================

Attributes a contract names (``stage``, ``context_k``, ``batch_size``) are visible on the class:
a class attribute, or the contract's default when you subclass it; ``__init__`` may set them
per instance.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from rag_bench.errors import RagBenchError

if TYPE_CHECKING:
    import numpy as np

    from rag_bench.data.dataset import Dataset
    from rag_bench.model import Chunk, Claim, Doc, Generation, Hits, Query, Relevance, Verdict


class Capability(str, Enum):
    """An optional ability a component declares in its ``capabilities`` (see the table above)."""

    PREPARE = "prepare"
    CACHE = "cache"
    INDEX = "index"
    SELECTS_QUERIES = "selects_queries"
    BATCH = "batch"
    LEARNS_ACROSS_QUERIES = "learns_across_queries"
    INDEPENDENT_EMBEDDINGS = "independent_embeddings"
    METERED = "metered"
    READS_DATASET = "reads_dataset"
    USES_ENCODER = "uses_encoder"
    LEARNS_FROM_SPLIT = "learns_from_split"
    RELEVANCE = "relevance"


# --- the slots ---------------------------------------------------------------------------


class Analyzer(Protocol):
    """Turns text into index terms; retrievers, generators, judges and metrics share it."""

    def terms(self, text: str) -> list[str]:
        """The index terms of one text (for English: lower-cased stems without stopwords)."""
        ...

    def terms_many(self, texts: Sequence[str]) -> list[list[str]]:
        """``terms`` of every text, in order."""
        ...


class Chunker(Protocol):
    """Splits a document into passages."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset()

    def chunk(self, doc: Doc) -> list[Chunk]:
        """The document's chunks in reading order, each with its document id and character
        offsets (``Chunk(f"{doc.id}#{i}", doc.id, start, end, doc.text[start:end], doc.title)``)."""
        ...


class Retriever(Protocol):
    """Ranks the chunks for a batch of queries. ``Hits`` are positions into the run's chunk
    list (the ``chunks`` that ``prepare`` gets, in that order) with scores, best first."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    stage: ClassVar[str]  # the name of its ranking in the traces, e.g. "bm25"

    def search(self, queries: Sequence[Query], depth: int) -> list[Hits]:
        """The best ``depth`` chunks for every query, in the order of ``queries``."""
        ...


class Encoder(Protocol):
    """Embeds texts for dense retrieval (exact cosine search over the chunk embeddings). What
    ``fit`` learns is cached: ``cache_material`` says what it depends on besides the chunk texts
    and the analyzer (include every parameter that changes an embedding). An encoder that
    computes on this machine's cores may say how many one call keeps busy in a ``threads``
    attribute: the corpus's blocks then go to every core, not only to ``--workers``."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    batch_size: int = 1  # texts per request (blocks of the corpus are whole batches)

    def cache_material(self) -> dict:
        """JSON-able description of everything besides the corpus the embeddings depend on."""
        ...

    def fit(self, texts: list[str], analyzer: Analyzer) -> np.ndarray:
        """Learn from the chunk texts (if anything) and return their embeddings, one row each."""
        ...

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of query texts, one row each, comparable with ``fit``'s."""
        ...

    def save(self, folder: Path) -> None:
        """Keep what ``fit`` learnt in ``folder`` (the embeddings themselves are kept for you)."""
        ...

    def load(self, folder: Path, analyzer: Analyzer) -> None:
        """Restore what ``save`` kept, instead of ``fit``."""
        ...


class Index(Protocol):
    """Searches the chunk embeddings an encoder made (the ``index`` slot; without one, exact
    search). ``approximate`` says whether its top k may differ from exact search's: a run then
    measures by how much. What ``build`` makes is cached by the embeddings it was built from
    and ``cache_material``."""

    approximate: ClassVar[bool] = False

    def cache_material(self) -> dict:
        """JSON-able description of every parameter that changes what ``build`` makes."""
        ...

    def build(self, embeddings: np.ndarray) -> None:
        """Index the chunks' embeddings (rows; float32 or float64, possibly memory-mapped)."""
        ...

    def search(self, queries: np.ndarray, embeddings: np.ndarray, depth: int) -> list[Hits]:
        """The top ``depth`` chunks of each query embedding, scored against ``embeddings``."""
        ...

    def save(self, folder: Path) -> None:
        """Keep what ``build`` made in ``folder``."""
        ...

    def load(self, folder: Path) -> None:
        """Restore what ``save`` kept, instead of ``build``."""
        ...


class Fuser(Protocol):
    """Fuses the rankings of several retrievers (the ``fusion`` slot) into one."""

    def fuse(self, rankings: Sequence[Hits], depth: int) -> Hits:
        """One ranking of at most ``depth`` chunks from one query's rankings (one per retriever,
        sparse first)."""
        ...


class Reranker(Protocol):
    """Reorders the candidates of the first stage."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset()

    def rerank_all(
        self,
        queries: Sequence[Query],
        candidates: Sequence[Hits],
        stages: Sequence[dict[str, Hits]],
    ) -> list[Hits]:
        """Every query's candidates reordered; ``stages`` holds each query's ranking by every
        retriever, by stage name. The pipeline calls it with blocks of queries, or with all of
        them at once for a reranker declaring LEARNS_ACROSS_QUERIES."""
        ...


class Generator(Protocol):
    """Answers a query from its ranked chunks, citing documents as ``[doc_id]``, or refuses."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    context_k: int | None = None  # chunks the answer may use (None: the whole ranking)

    def generate(self, query: Query, context: Sequence[Chunk]) -> Generation:
        """The answer to one query from its chunks, best first. The pipeline passes a
        :class:`~rag_bench.model.Context`: its ``evidence`` is the ranking before any reranker,
        for a generator that decides whether to answer independently of the reranker."""
        ...


class Judge(Protocol):
    """Decides, claim by claim, which context documents support an answer."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset()

    def judge(
        self, query: Query, claims: Sequence[Claim], context: Sequence[Chunk]
    ) -> list[Verdict]:
        """One verdict per claim, in order (``Verdict(None, None, (), why)`` when it cannot
        tell); ``context`` is what the generator was shown."""
        ...


# --- what a capability adds ----------------------------------------------------------------


class Prepared(Protocol):
    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer: Analyzer) -> None:
        """Read what the component needs from the dataset (qrels, recorded answers) and the
        chunked corpus, before the first query."""
        ...


class Cached(Protocol):
    def cache_material(self) -> dict:
        """JSON-able description of everything besides the corpus and the analyzer that what
        it learnt depends on; a change gives a new cache entry."""
        ...

    def save(self, folder: Path) -> None:
        """Keep what it learnt in ``folder``."""
        ...

    def load(self, folder: Path, analyzer: Analyzer) -> None:
        """Restore what ``save`` kept, instead of learning it again."""
        ...


class Indexed(Cached, Protocol):
    def fit(self, texts: list[str], analyzer: Analyzer) -> None:
        """Index the chunk texts (title and passage), in chunk order."""
        ...


class SelectsQueries(Protocol):
    def select_queries(self, query_ids: Sequence[str]) -> list[str]:
        """The queries it can answer, in the given order."""
        ...


class BatchGenerator(Protocol):
    def generate_all(
        self, queries: Sequence[Query], contexts: Sequence[Sequence[Chunk]]
    ) -> list[Generation]:
        """``generate`` for a block of queries, in order."""
        ...


class BatchJudge(Protocol):
    def judge_all(
        self,
        queries: Sequence[Query],
        claims: Sequence[Sequence[Claim]],
        contexts: Sequence[Sequence[Chunk]],
    ) -> list[list[Verdict]]:
        """``judge`` for a block of answers, in order."""
        ...


class GradesRelevance(Protocol):
    def grade_relevance(self, queries: Sequence[Query], answers: Sequence[str]) -> list[Relevance]:
        """Whether each answer (citation markers removed; never a refusal) gives what its
        question asks for, in order."""
        ...


class Metered(Protocol):
    def usage(self) -> dict:
        """What it consumed (requests, tokens, cost): JSON-able, for the manifest."""
        ...

    def tally(self) -> dict:
        """The raw counts behind ``usage``, numbers or nested dicts of numbers that add up."""
        ...

    def absorb(self, counts: dict) -> None:
        """Add the counts a copy of it made (the difference of two ``tally`` calls in a Ray
        task)."""
        ...


class UsesEncoder(Protocol):
    def attach_encoder(self, index: Any) -> None:
        """Keep the pipeline's dense index (its ``encoder`` and chunk embeddings)."""
        ...


class LearnsFromSplit(Protocol):
    train_queries: list[Query]
    training: dict

    def learn(
        self,
        queries: Sequence[Query],
        candidates: Sequence[Hits],
        stages: Sequence[dict[str, Hits]],
    ) -> None:
        """Learn from the train queries' first-stage candidates (their labels are the
        component's own business, read in ``prepare``)."""
        ...


class ReadsDataset(Protocol):
    def read_dataset(self, dataset: Dataset) -> None:
        """Read what the chunks come from, before the first ``chunk``."""
        ...


class NoMembers(Protocol):
    """A capability that is a promise about behaviour, with no method of its own."""


SLOT_CAPABILITIES: dict[str, dict[Capability, type]] = {
    "chunker": {Capability.READS_DATASET: ReadsDataset},
    "retriever": {
        Capability.INDEX: Indexed,
        Capability.PREPARE: Prepared,
        Capability.SELECTS_QUERIES: SelectsQueries,
        Capability.METERED: Metered,
    },
    "encoder": {
        Capability.INDEPENDENT_EMBEDDINGS: NoMembers,
        Capability.METERED: Metered,
    },
    "reranker": {
        Capability.PREPARE: Prepared,
        Capability.CACHE: Cached,
        Capability.LEARNS_ACROSS_QUERIES: NoMembers,
        Capability.USES_ENCODER: UsesEncoder,
        Capability.LEARNS_FROM_SPLIT: LearnsFromSplit,
        Capability.METERED: Metered,
    },
    "generator": {
        Capability.PREPARE: Prepared,
        Capability.CACHE: Cached,
        Capability.BATCH: BatchGenerator,
        Capability.METERED: Metered,
    },
    "judge": {
        Capability.PREPARE: Prepared,
        Capability.CACHE: Cached,
        Capability.BATCH: BatchJudge,
        Capability.METERED: Metered,
        Capability.RELEVANCE: GradesRelevance,
    },
}
CONTRACTS: dict[str, type] = {
    "analyzer": Analyzer,
    "chunker": Chunker,
    "retriever": Retriever,
    "encoder": Encoder,
    "index": Index,
    "fuser": Fuser,
    "reranker": Reranker,
    "generator": Generator,
    "judge": Judge,
}


# --- the check, once per registered component ------------------------------------------------


def _members(protocol: type) -> list[str]:
    """The public attributes and methods a contract names (its own and its bases' in here)."""
    names: dict[str, None] = {}
    for cls in reversed(protocol.__mro__):
        if cls.__module__ == __name__:
            names.update(dict.fromkeys(n for n in cls.__dict__ if not n.startswith("_")))
            names.update(dict.fromkeys(getattr(cls, "__annotations__", {})))
    return list(names)


_ABSENT = object()


def _problems(cls: type, protocol: type) -> list[str]:
    """What ``cls`` lacks of ``protocol``: a missing member, a method that cannot take the
    arguments the pipeline passes, or the contract's own method stub (inherited by subclassing,
    never written)."""
    problems = []
    for name in _members(protocol):
        found, stub = getattr(cls, name, _ABSENT), getattr(protocol, name, None)
        if found is _ABSENT or (callable(stub) and found is stub):
            problems.append(f"no {name}")
        elif callable(stub) and not _takes(found, stub):
            arguments = ", ".join(list(inspect.signature(stub).parameters)[1:])
            problems.append(f"{name} does not take ({arguments})")
    return problems


def _takes(method: Any, stub: Any) -> bool:
    """Whether ``method`` (read from the class) takes the positional arguments of ``stub``."""
    arguments = list(inspect.signature(stub).parameters)[1:]
    try:
        inspect.signature(method).bind(None, *arguments)
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): trust it
        return True
    return True


def declared(kind: str, cls: object) -> frozenset[Capability]:
    """The capabilities a component class of ``kind`` declares, checked against its contract:
    every member of the slot's contract and of each declared capability is there. Raises a
    :class:`RagBenchError` naming everything that is wrong, in one line."""
    if kind not in CONTRACTS:
        raise RagBenchError(f"unknown component kind {kind!r}", f"kinds are {', '.join(CONTRACTS)}")
    where = f"{kind} {getattr(cls, '__qualname__', cls)!r}"
    if not isinstance(cls, type):
        raise RagBenchError(f"{where} is not a class", "register a class with @component")
    capabilities: object = getattr(cls, "capabilities", frozenset())
    if not isinstance(capabilities, frozenset) or not all(
        isinstance(c, Capability) for c in capabilities
    ):
        raise RagBenchError(
            f"{where} declares capabilities {capabilities!r}",
            "declare a frozenset of Capability members, e.g. frozenset({Capability.BATCH})",
        )
    contract = CONTRACTS[kind]
    problems = _problems(cls, contract) + _capability_problems(kind, cls, capabilities)
    if problems:
        raise RagBenchError(
            f"{where} breaks the {contract.__name__} contract: {'; '.join(problems)}",
            f"see rag_bench.components.base.{contract.__name__}",
        )
    return capabilities


def _capability_problems(kind: str, cls: type, capabilities: frozenset[Capability]) -> list[str]:
    """What is wrong with the capabilities a class declares: one its slot does not know, or
    one without its members."""
    allowed = SLOT_CAPABILITIES.get(kind, {})
    problems = []
    for capability in sorted(capabilities, key=list(Capability).index):
        if capability not in allowed:
            usable = ", ".join(c.name for c in allowed) or "none"
            problems.append(f"{capability.name} is not a {kind} capability ({usable})")
        else:
            problems += [f"{capability.name}: {p}" for p in _problems(cls, allowed[capability])]
    if Capability.CACHE in capabilities and Capability.PREPARE not in capabilities:
        problems.append("CACHE without PREPARE (the cache keeps what prepare learnt)")
    return problems
