"""A variant's components assembled into one pipeline: chunk, retrieve, fuse, rerank, generate."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rag_bench.components.ann import recall, sample_rows
from rag_bench.components.base import Capability
from rag_bench.components.chunking import chunk_corpus
from rag_bench.components.dense import DenseIndex, ExactIndex, cosine_search
from rag_bench.components.registry import build
from rag_bench.data.dataset import Dataset
from rag_bench.errors import UsageError
from rag_bench.io.cache import Cache, corpus_fingerprint, digest
from rag_bench.io.pause import pause_point
from rag_bench.model import (
    Chunk,
    Context,
    Hits,
    Query,
    QueryResult,
    Relevance,
    Verdict,
    final_ranking,
)
from rag_bench.pipeline.executors import Executor, LocalExecutor
from rag_bench.text.claims import split_claims, strip_markers

BATCH = 32  # queries per task of the executor (and per call of generate_all, judge_all)
# Embedding with an encoder declaring INDEPENDENT_EMBEDDINGS: the corpus is cut into at least
# EMBED_BLOCKS blocks (so a few workers share the work evenly), of at most EMBED_BLOCK texts
# (one executor task, one checkpoint each), in whole batches of the encoder. The size depends
# on the corpus and the batch size only, never on the executor or its workers. A block cannot
# be stopped halfway, so Ctrl-C waits for the blocks being embedded: 256 of kestrel-kb's chunks
# take MiniLM about 13 s on one thread (1,024: 51 s).
EMBED_BLOCK = 256
EMBED_BLOCKS = 32


class AnswerCheckpoint(Protocol):
    """Where :meth:`Pipeline.answer` keeps each block of answered queries as it goes (the
    run's checkpoint): ``lookup`` an earlier answer computed from the same inputs (a result
    without rankings: generation, claims, verdicts, relevance, the answering stages'
    latencies), ``save`` a block of new ones as (query id, key, result)."""

    def lookup(self, query_id: str, key: str) -> QueryResult | None: ...

    def save(self, answers: list[tuple[str, str, QueryResult]]) -> None: ...


@dataclass
class Elapsed:
    """The time a block of work took (set when the block ends)."""

    seconds: float = 0.0

    def ms_each(self, n: int) -> float:
        """Milliseconds per item when the time is shared by ``n`` items (all of it for none)."""
        return 1000 * self.seconds / max(n, 1)


@contextmanager
def stopwatch() -> Iterator[Elapsed]:
    """Time the block: ``with stopwatch() as took: ...`` then ``took.seconds``."""
    took = Elapsed()
    started = time.perf_counter()
    yield took
    took.seconds = time.perf_counter() - started


@dataclass
class IndexReport:
    """What indexing did: chunk count, seconds per step, and which indexes came from the cache."""

    n_chunks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    cached: dict[str, bool] = field(default_factory=dict)


class Pipeline:
    def __init__(self, resolved: dict[str, dict[str, Any]], cache: Cache | None = None):
        self.config = resolved
        self.cache = cache or Cache(None)
        self.analyzer = build("analyzer", resolved.get("analyzer", {"name": "en"}))
        self.chunker = build("chunker", resolved.get("chunker", {"name": "fixed"}))
        self.retriever = self._optional("retriever")
        encoder = self._optional("encoder")
        if encoder is None and "index" in resolved:
            raise UsageError(
                "the variant has an index slot but no encoder to make the embeddings it searches",
                "fill the encoder slot, or leave the index slot out",
            )
        self.dense = DenseIndex(encoder, self._optional("index")) if encoder is not None else None
        self.retrievers = [r for r in (self.retriever, self.dense) if r is not None]
        if not self.retrievers:
            raise UsageError(
                "the variant has no retriever and no encoder", "fill the retriever slot"
            )
        self.fuser = self._optional("fusion")
        if len(self.retrievers) > 1 and self.fuser is None:
            raise UsageError(
                "two retrievers need a fusion component", "fill the fusion slot, e.g. rrf"
            )
        self.reranker = self._optional("reranker")
        self.generator = build("generator", resolved.get("generator", {"name": "extractive"}))
        self.judge = build("judge", resolved.get("judge", {"name": "lexical"}))
        self.chunks: list[Chunk] = []

    def _optional(self, slot: str) -> Any:
        """The component a slot names, or None when the variant leaves the slot empty."""
        return build(slot, self.config[slot]) if slot in self.config else None

    # --- indexing ---------------------------------------------------------------------

    def index(
        self, dataset: Dataset, executor: Executor | None = None, progress=None
    ) -> IndexReport:
        """Chunk the corpus, build (or load) every index, prepare the other components.
        ``progress`` wraps the blocks of a corpus embedded block by block."""
        report = IndexReport()
        executor = executor or LocalExecutor()
        with stopwatch() as took:
            if Capability.READS_DATASET in self.chunker.capabilities:
                self.chunker.read_dataset(dataset)
            self.chunks = chunk_corpus(self.chunker, dataset.docs.values())
        report.n_chunks = len(self.chunks)
        report.seconds["chunk"] = took.seconds
        pause_point("index")
        fingerprint = corpus_fingerprint(self.chunks)
        texts = [c.index_text for c in self.chunks]
        for retriever in self.retrievers:
            with stopwatch() as took:
                if Capability.INDEX in retriever.capabilities:
                    report.cached[retriever.stage] = self._fit_cached(
                        retriever, texts, fingerprint, executor, progress
                    )
                else:
                    if Capability.PREPARE in retriever.capabilities:
                        retriever.prepare(dataset, self.chunks, self.analyzer)  # type: ignore[union-attr]  # PREPARE declares it
                    report.cached[retriever.stage] = False
            report.seconds[f"index_{retriever.stage}"] = took.seconds
        parts = {"reranker": self.reranker, "generator": self.generator, "judge": self.judge}
        for slot, component in parts.items():
            if component is not None and Capability.PREPARE in component.capabilities:
                with stopwatch() as took:
                    if Capability.CACHE in component.capabilities:
                        report.cached[slot] = self._prepare_cached(component, dataset, fingerprint)
                    else:
                        component.prepare(dataset, self.chunks, self.analyzer)
                report.seconds[f"prepare_{type(component).__name__}"] = took.seconds
        dense = [r for r in self.retrievers if isinstance(r, DenseIndex)]
        if dense and self._reranker_can(Capability.USES_ENCODER):
            self.reranker.attach_encoder(dense[0])
        return report

    def _material(self, component, fingerprint: str) -> dict:
        """What a cached index (or preparation) is computed from."""
        return {
            "index": component.cache_material(),
            "analyzer": self.config.get("analyzer", {"name": "en"}),
            "corpus": fingerprint,
        }

    def _prepare_cached(self, component, dataset: Dataset, fingerprint: str) -> bool:
        def prepare():
            component.prepare(dataset, self.chunks, self.analyzer)
            return component

        def load(folder):
            component.load(folder, self.analyzer)
            return component

        material = self._material(component, fingerprint)
        _, hit = self.cache.fetch("prepared", material, prepare, lambda c, f: c.save(f), load)
        return hit

    def _fit_cached(
        self, retriever, texts: list[str], fingerprint: str, executor: Executor, progress=None
    ) -> bool:
        material = self._material(retriever, fingerprint)
        blockwise = (
            retriever is self.dense
            and Capability.INDEPENDENT_EMBEDDINGS in self.dense.encoder.capabilities
        )
        if blockwise:  # how the corpus is cut into requests changes the embeddings' last bits
            size = self._block_size(retriever.encoder, len(texts))
            material["blocks"] = {"size": size, "order": "length"}

        def fit():
            if blockwise:
                self._embed_in_blocks(retriever, texts, material, executor, progress)
            else:
                retriever.fit(texts, self.analyzer)
            return retriever

        def load(folder):
            retriever.load(folder, self.analyzer)
            return retriever

        _, hit = self.cache.fetch(retriever.stage, material, fit, lambda r, f: r.save(f), load)
        if blockwise and not hit:
            self.cache.blocks(retriever.stage, material).discard()
            stored = self.cache.stored(retriever.stage, material)
            if stored is not None:  # search reads the stored copy, mapped, not the one built
                retriever.map_embeddings(stored)
        if retriever is self.dense and not isinstance(self.dense.index, ExactIndex):
            hit = self._build_index(material) and hit
        return hit

    def _build_index(self, material: dict) -> bool:
        """Build (or load) the dense index's search structure from the embeddings just fitted or
        loaded, cached by what they were computed from and the index's own parameters."""
        dense = self.dense
        assert dense is not None  # called for the dense retriever only
        index = dense.index

        def build():
            index.build(dense.embeddings)
            return index

        def load(folder):
            index.load(folder)
            return index

        graph = {**material, "search": index.cache_material()}
        _, hit = self.cache.fetch("graph", graph, build, lambda i, f: i.save(f), load)
        return hit

    def index_recall(self, queries: Sequence[Query], depth: int) -> dict | None:
        """For an approximate dense index: on a seeded sample of ``queries``, the share of exact
        search's top ``depth`` that the index's top ``depth`` holds (None for exact search)."""
        if self.dense is None or not self.dense.index.approximate:
            return None
        index = self.dense.index
        size, seed = int(getattr(index, "recall_sample", 100)), int(getattr(index, "seed", 0))
        chosen = [queries[i] for i in sample_rows(len(queries), size, seed)]
        embedded = self.dense.encoder.encode([q.text for q in chosen])
        approximate = index.search(embedded, self.dense.embeddings, depth)
        exact = cosine_search(embedded, self.dense.embeddings, depth)
        return {
            "recall": recall(approximate, exact),
            "depth": depth,
            "sample": len(chosen),
            "of": len(queries),
            "seed": seed,
        }

    def _embed_in_blocks(
        self, index, texts: list[str], material: dict, executor: Executor, progress=None
    ) -> None:
        """Embed the corpus in blocks (see ``EMBED_BLOCKS``), each block a task of the
        executor (threads here, tasks on the workers of a Ray cluster), keeping each finished
        block in the cache, so an interrupted indexing of a big corpus resumes from the last
        finished block; ``progress`` shows the blocks when there are several. An encoder that
        computes on this machine's cores (``threads`` set) has its blocks spread over all of
        them, whatever the executor's workers: its embeddings do not depend on who computes.

        The texts go into blocks longest first (a stable sort by length in characters), so a
        batch pads its texts to similar lengths, as ``SentenceTransformer.encode`` does for one
        list; each embedding lands in its chunk's row. A block is a whole number of the
        encoder's batches and the blocks do not depend on the executor or its workers: every
        request, and so every embedding, is the same whoever computes it."""
        encoder = index.encoder
        size = self._block_size(encoder, len(texts))
        blocks = self.cache.blocks(index.stage, material)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        spans = [order[start : start + size] for start in range(0, len(texts), size)]
        into = _Rows(len(texts))
        missing = []
        for number, rows in enumerate(spans):
            vectors = blocks.load(number)
            if vectors is None or vectors.shape[0] != len(rows):
                missing.append(number)
            else:
                into.put(rows, vectors)
        work = [[texts[i] for i in spans[number]] for number in missing]
        # an encoder that computes here (``threads`` cores a block) gets every core
        cpus = getattr(encoder, "threads", None)
        found = executor.map(_embed_block, (encoder, self.analyzer), work, cpus=cpus)
        if progress is not None and len(work) > 1:
            found = progress(_Sized(found, len(work), "embedded"))
        for position, (vectors, counted) in enumerate(found):
            number = missing[position]
            if executor.isolated:
                _absorb({"encoder": encoder}, counted)
            blocks.save(number, vectors)
            into.put(spans[number], vectors)
        index.embeddings = into.rows if into.rows is not None else np.zeros((0, 0), np.float32)

    @staticmethod
    def _block_size(encoder, n: int) -> int:
        """Texts per block of a corpus of ``n``: ``n / EMBED_BLOCKS``, at most ``EMBED_BLOCK``,
        rounded up to whole batches of the encoder."""
        size = min(EMBED_BLOCK, math.ceil(n / EMBED_BLOCKS))
        return max(1, math.ceil(size / encoder.batch_size)) * encoder.batch_size

    def _metered(self) -> dict[str, Any]:
        """The components that call paid services (declaring METERED), by slot."""
        return _metered(
            {
                "retriever": self.retriever,
                "encoder": self.dense.encoder if self.dense is not None else None,
                "reranker": self.reranker,
                "generator": self.generator,
                "judge": self.judge,
            }
        )

    def usage(self) -> dict[str, dict]:
        """What the components that call paid services consumed (requests, tokens, cost)."""
        return {slot: c.usage() for slot, c in self._metered().items()}

    def tally(self) -> dict[str, dict]:
        """The raw counts behind :meth:`usage`, which add up across copies of the pipeline."""
        return _tally(self._metered())

    # --- querying ---------------------------------------------------------------------

    def select_queries(self, query_ids: Sequence[str]) -> list[str]:
        for retriever in self.retrievers:
            if Capability.SELECTS_QUERIES in retriever.capabilities:
                query_ids = retriever.select_queries(query_ids)  # type: ignore[union-attr]  # declared
        return list(query_ids)

    def retrieve(
        self, queries: Sequence[Query], depth: int
    ) -> tuple[dict[str, list[Hits]], dict[str, float]]:
        """Every retriever's ranking for every query (batched), and the ms spent per query."""
        stages, latency = {}, {}
        for retriever in self.retrievers:
            with stopwatch() as took:
                stages[retriever.stage] = retriever.search(queries, depth)
            latency[retriever.stage] = took.ms_each(len(queries))
        return stages, latency

    def answer(
        self,
        queries: Sequence[Query],
        depth: int,
        progress=None,
        checkpoint: AnswerCheckpoint | None = None,
        executor: Executor | None = None,
    ) -> list[QueryResult]:
        """Retrieve, fuse, rerank and generate for every query.

        The work goes to the ``executor`` in blocks of ``BATCH`` queries: first ranking
        (retrieval, fusion and a reranker that looks at one query at a time), then answering
        (generation, claims, judging). A reranker that learns across queries
        (LEARNS_ACROSS_QUERIES) reranks all of them here, between the two. A batched
        stage's time is divided evenly over the queries of its block. With a ``checkpoint``,
        each block of generated and judged queries is saved as it completes, and a query
        already answered there from the same ranking is not generated again.
        """
        executor = executor or LocalExecutor()
        queries = list(queries)
        rerank_in_blocks = (
            self.reranker is not None
            and Capability.LEARNS_ACROSS_QUERIES not in self.reranker.capabilities
        )
        stages: list[dict[str, Hits]] = []
        timings: list[dict[str, float]] = []
        blocks = [queries[i : i + BATCH] for i in range(0, len(queries), BATCH)]
        work = [(block, depth, rerank_in_blocks) for block in blocks]
        for number, (ranked, spent, counted) in enumerate(executor.map(_rank_block, self, work)):
            self._absorb(counted, executor)
            stages.extend(ranked)
            timings.extend(dict(spent) for _ in blocks[number])
        if self.reranker is not None and not rerank_in_blocks:
            self._train_reranker(depth, executor)
            spent = self._rerank(queries, stages)
            for t in timings:
                t.update(spent)
        return self._respond(queries, stages, timings, progress, checkpoint, executor)

    def rank(
        self, queries: Sequence[Query], depth: int, rerank: bool = True
    ) -> tuple[list[dict[str, Hits]], dict[str, float]]:
        """Every stage's ranking for every query (batched), and the ms spent per query."""
        retrieved, latency = self.retrieve(queries, depth)
        stages = [{name: hits[i] for name, hits in retrieved.items()} for i in range(len(queries))]
        if self.fuser is not None:
            with stopwatch() as took:
                for s in stages:
                    s["fusion"] = self.fuser.fuse([s[r.stage] for r in self.retrievers], depth)
            latency["fusion"] = took.ms_each(len(queries))
        retrieve_ms = sum(latency.pop(r.stage) for r in self.retrievers)
        timings = {"retrieve": retrieve_ms, **latency}
        if self.reranker is not None and rerank:
            timings.update(self._rerank(queries, stages))
        return stages, timings

    def _train_reranker(self, depth: int, executor: Executor) -> None:
        """A reranker with a labelled split of its own (``train_queries``) learns from those
        queries' first-stage candidates, ranked here like the evaluated ones."""
        if not self._reranker_can(Capability.LEARNS_FROM_SPLIT):
            return
        train = list(self.reranker.train_queries)
        if not train:
            return
        stages: list[dict[str, Hits]] = []
        work = [(train[i : i + BATCH], depth, False) for i in range(0, len(train), BATCH)]
        for ranked, _, counted in executor.map(_rank_block, self, work):
            self._absorb(counted, executor)
            stages.extend(ranked)
        current = [final_ranking(s) for s in stages]
        retrieved = [{r.stage: s[r.stage] for r in self.retrievers} for s in stages]
        self.reranker.learn(train, current, retrieved)

    def reranker_training(self) -> dict | None:
        """Where a learning reranker's labels came from (train split or cross-fitting)."""
        return self.reranker.training if self._reranker_can(Capability.LEARNS_FROM_SPLIT) else None

    def _reranker_can(self, capability: Capability) -> bool:
        return self.reranker is not None and capability in self.reranker.capabilities

    def _rerank(self, queries: Sequence[Query], stages: list[dict[str, Hits]]) -> dict[str, float]:
        """Add the reranker's stage to every query's stages; the ms it spent per query."""
        with stopwatch() as took:
            current = [final_ranking(s) for s in stages]
            retrieved = [{r.stage: s[r.stage] for r in self.retrievers} for s in stages]
            for s, hits in zip(stages, self.reranker.rerank_all(queries, current, retrieved)):
                s["rerank"] = hits
        return {"rerank": took.ms_each(len(queries))}

    def _absorb(self, counted: dict[str, dict], executor: Executor) -> None:
        """Counts made by a task on a copy of this pipeline, added to this one's."""
        if executor.isolated:
            _absorb(self._metered(), counted)

    def _respond(
        self,
        queries: Sequence[Query],
        stages: list[dict[str, Hits]],
        timings: list[dict[str, float]],
        progress=None,
        checkpoint: AnswerCheckpoint | None = None,
        executor: Executor | None = None,
    ) -> list[QueryResult]:
        """Generate answers from the final rankings, split them into claims and judge them, in
        blocks of ``BATCH`` queries, each block a task of the executor. Within a block, a
        generator or judge declaring BATCH gets all its queries in one call of ``generate_all``
        or ``judge_all`` (components that send requests run them concurrently), the others one
        query at a time. With a ``checkpoint``, answers found there are reused and only the rest
        of each block is computed; each block is saved as it completes."""
        executor = executor or LocalExecutor()
        results: list[QueryResult | None] = [None] * len(queries)
        keys: list[str | None] = [None] * len(queries)
        todo: list[list[int]] = []
        for start in range(0, len(queries), BATCH):
            block: Sequence[int] = range(start, min(start + BATCH, len(queries)))
            if checkpoint is not None:
                for i in block:
                    keys[i] = key = self._answer_key(queries[i], stages[i])
                    found = checkpoint.lookup(queries[i].id, key)
                    results[i] = self._restore(found, stages[i], timings[i])
            missing = [i for i in block if results[i] is None]
            if missing:
                todo.append(missing)
        work = [
            ([queries[i] for i in b], [stages[i] for i in b], [timings[i] for i in b]) for b in todo
        ]
        done = _Sized(executor.map(_respond_block, self, work), len(work))
        for number, (fresh, counted) in enumerate(progress(done) if progress else done):
            block = todo[number]
            self._absorb(counted, executor)
            for i, result in zip(block, fresh):
                results[i] = result
            if checkpoint is not None:
                checkpoint.save([(queries[i].id, keys[i], results[i]) for i in block])  # type: ignore[misc]  # all set
                pause_point("answer")
        return results  # type: ignore[return-value]  # every query is answered or restored now

    def _answer_key(self, query: Query, stages: dict[str, Hits]) -> str:
        """What an answer is computed from: the query, its final chunk ranking and, after a
        reranker, the ranking before it (the generator's evidence)."""
        material = {
            "query": [query.id, query.text],
            "ranking": [self.chunks[p].chunk_id for p in final_ranking(stages).index],
        }
        if "rerank" in stages:
            material["evidence"] = [self.chunks[p].chunk_id for p in _evidence(stages).index]
        return digest(material)

    def _ranked(self, final: Hits, stages: dict[str, Hits]) -> Context:
        """The final ranking's chunks, with the ranking before any reranker as evidence."""
        chunks = [self.chunks[p] for p in final.index]
        if "rerank" not in stages:
            return Context(chunks)
        return Context(chunks, [self.chunks[p] for p in _evidence(stages).index])

    def _context(self, final: Hits) -> list[int]:
        return [int(p) for p in final.index[: self.generator.context_k]]

    def _restore(
        self, found: QueryResult | None, stages: dict[str, Hits], timings: dict[str, float]
    ) -> QueryResult | None:
        """A checkpointed answer (None: none usable) with this query's rankings and times."""
        if found is None:
            return None
        return dataclasses.replace(
            found,
            stages=stages,
            context=self._context(final_ranking(stages)),
            latency_ms={**timings, **found.latency_ms},
        )

    def answer_block(
        self,
        queries: Sequence[Query],
        stages: list[dict[str, Hits]],
        timings: list[dict[str, float]],
    ) -> list[QueryResult]:
        """Generate, split into claims and judge one block of ranked queries."""
        finals = [final_ranking(s) for s in stages]
        ranked = [self._ranked(final, s) for final, s in zip(finals, stages)]
        latency = [dict(t) for t in timings]
        if Capability.BATCH in self.generator.capabilities:
            with stopwatch() as took:
                generations = self.generator.generate_all(queries, ranked)
            for t in latency:
                t["generate"] = took.ms_each(len(queries))
        else:
            generations = []
            for query, chunks, t in zip(queries, ranked, latency):
                with stopwatch() as took:
                    generations.append(self.generator.generate(query, chunks))
                t["generate"] = took.ms_each(1)
        contexts = [self._context(final) for final in finals]
        claims = [[] if g.refused else split_claims(g.answer) for g in generations]
        judged = [i for i, c in enumerate(claims) if c]
        verdicts: list[list[Verdict]] = [[] for _ in queries]
        for t in latency:
            t["judge"] = 0.0
        if Capability.BATCH in self.judge.capabilities:
            with stopwatch() as took:
                if judged:
                    found = self.judge.judge_all(
                        [queries[i] for i in judged],
                        [claims[i] for i in judged],
                        [[self.chunks[p] for p in contexts[i]] for i in judged],
                    )
                    for i, v in zip(judged, found):
                        verdicts[i] = v
            for i in judged:
                latency[i]["judge"] = took.ms_each(len(judged))
        else:
            for i in judged:
                with stopwatch() as took:
                    verdicts[i] = self.judge.judge(
                        queries[i], claims[i], [self.chunks[p] for p in contexts[i]]
                    )
                latency[i]["judge"] = took.ms_each(1)
        relevance = self._grade_relevance(queries, generations, latency)
        return [
            QueryResult(s, g, c, v, ctx, t, r)
            for s, g, c, v, ctx, t, r in zip(
                stages, generations, claims, verdicts, contexts, latency, relevance
            )
        ]

    def _grade_relevance(self, queries, generations, latency) -> list[Relevance | None]:
        """The judge's relevance grade of every answer that is not a refusal, when the judge
        declares RELEVANCE (its time is added to each graded query's judge latency)."""
        graded: list[Relevance | None] = [None] * len(queries)
        if Capability.RELEVANCE not in self.judge.capabilities:
            return graded
        answered = [i for i, g in enumerate(generations) if not g.refused]
        if not answered:
            return graded
        with stopwatch() as took:
            found = self.judge.grade_relevance(
                [queries[i] for i in answered],
                [strip_markers(generations[i].answer) for i in answered],
            )
        for i, grade in zip(answered, found):
            graded[i] = grade
            latency[i]["judge"] += took.ms_each(len(answered))
        return graded


class _Rows:
    """The corpus embeddings, filled block by block into one array allocated at the first
    block (its width and dtype are the encoder's), so they are never held twice (a list of
    blocks, then their concatenation)."""

    def __init__(self, n: int):
        self.n = n
        self.rows: np.ndarray | None = None

    def put(self, rows: list[int], vectors: np.ndarray) -> None:
        """``vectors[j]`` is the embedding of chunk ``rows[j]``."""
        vectors = np.asarray(vectors)
        if self.rows is None:
            self.rows = np.empty((self.n, *vectors.shape[1:]), dtype=vectors.dtype)
        self.rows[rows] = vectors


class _Sized:
    """An iterator that knows its length and what its blocks are (for a progress bar)."""

    def __init__(self, items, length: int, what: str = "answered"):
        self.items, self.length, self.what = items, length, what

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return self.length


# --- the executor's tasks: module-level functions, so that they pickle by reference ----------


def _evidence(stages: dict[str, Hits]) -> Hits:
    """The ranking before any reranker: the fusion stage's, else the (single) retriever's."""
    return [hits for name, hits in stages.items() if name != "rerank"][-1]


def _rank_block(pipeline: Pipeline, work) -> tuple[list[dict[str, Hits]], dict, dict]:
    queries, depth, rerank = work
    before = pipeline.tally()
    stages, timings = pipeline.rank(queries, depth, rerank)
    return stages, timings, _difference(pipeline.tally(), before)


def _respond_block(pipeline: Pipeline, work) -> tuple[list[QueryResult], dict]:
    before = pipeline.tally()
    results = pipeline.answer_block(*work)
    return results, _difference(pipeline.tally(), before)


def _embed_block(shared, texts: list[str]) -> tuple[np.ndarray, dict]:
    encoder, analyzer = shared
    metered = _metered({"encoder": encoder})
    before = _tally(metered)
    vectors = np.asarray(encoder.fit(texts, analyzer))
    return vectors, _difference(_tally(metered), before)


def _metered(components: dict[str, Any]) -> dict[str, Any]:
    """The components declaring METERED (they count what they use), by slot."""
    return {
        slot: c
        for slot, c in components.items()
        if c is not None and Capability.METERED in c.capabilities
    }


def _tally(metered: dict[str, Any]) -> dict[str, dict]:
    return {slot: c.tally() for slot, c in metered.items()}


def _absorb(components: dict[str, Any], counted: dict[str, dict]) -> None:
    for slot, counts in counted.items():
        if slot in components:
            components[slot].absorb(counts)


def _difference(after: Any, before: Any) -> Any:
    """``after - before`` for numbers and (nested) dicts of them."""
    if isinstance(after, dict):
        return {
            k: _difference(v, before.get(k, 0) if isinstance(before, dict) else 0)
            for k, v in after.items()
        }
    return after - (before or 0)
