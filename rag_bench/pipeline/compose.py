"""A variant's components assembled into one pipeline: chunk, retrieve, fuse, rerank, generate."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rag_bench.cache import Cache, corpus_fingerprint, digest
from rag_bench.dataset import Dataset, Query
from rag_bench.errors import UsageError
from rag_bench.evaluation.claims import SplitClaim, split_claims
from rag_bench.evaluation.judges import Verdict
from rag_bench.pipeline.chunking import Chunk, chunk_corpus
from rag_bench.pipeline.dense import DenseIndex
from rag_bench.pipeline.generate import Generation
from rag_bench.pipeline.hits import Hits
from rag_bench.plugins import build
from rag_bench.store import pause_point

BATCH = 32  # queries per call of a generator's generate_all / a judge's judge_all
EMBED_BLOCK = 4096  # corpus texts per checkpointed block when embedding with a stateless encoder
# Built-in encoders that learn nothing from the corpus: each text's embedding depends on that
# text alone, so a corpus can be embedded block by block. A plugin encoder says so by setting
# ``independent_embeddings = True``.
STATELESS_ENCODERS = ("openai", "sentence-transformers")
CHECKPOINTED_LATENCY = ("generate", "judge")


class AnswerCheckpoint(Protocol):
    """Where :meth:`Pipeline.answer` keeps each block of answered queries as it goes (the
    run's checkpoint): ``lookup`` an earlier answer computed from the same inputs, ``save`` a
    block of new ones."""

    def lookup(self, query_id: str, key: str) -> dict | None: ...

    def save(self, records: list[dict]) -> None: ...


@dataclass
class IndexReport:
    """What indexing did: chunk count, seconds per step, and which indexes came from the cache."""

    n_chunks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    cached: dict[str, bool] = field(default_factory=dict)


@dataclass
class QueryResult:
    """One query's trip through the pipeline: chunk rankings per stage, the answer, its claims
    with the judge's verdicts, the generator's context (chunk positions) and timings."""

    stages: dict[str, Hits]
    generation: Generation
    claims: list[SplitClaim]
    verdicts: list[Verdict]
    context: list[int]
    latency_ms: dict[str, float]

    @property
    def final(self) -> Hits:
        return list(self.stages.values())[-1]


class Pipeline:
    def __init__(self, resolved: dict[str, dict[str, Any]], cache: Cache | None = None):
        self.config = resolved
        self.cache = cache or Cache(None)
        self.analyzer = build("analyzer", resolved.get("analyzer", {"name": "en"}))
        self.chunker = build("chunker", resolved.get("chunker", {"name": "fixed"}))
        self.retrievers = []
        if "retriever" in resolved:
            self.retrievers.append(build("retriever", resolved["retriever"]))
        if "encoder" in resolved:
            self.retrievers.append(DenseIndex(build("encoder", resolved["encoder"])))
        if not self.retrievers:
            raise UsageError(
                "the variant has no retriever and no encoder", "fill the retriever slot"
            )
        self.fuser = build("fusion", resolved["fusion"]) if "fusion" in resolved else None
        if len(self.retrievers) > 1 and self.fuser is None:
            raise UsageError(
                "two retrievers need a fusion component", "fill the fusion slot, e.g. rrf"
            )
        self.reranker = build("reranker", resolved["reranker"]) if "reranker" in resolved else None
        self.generator = build("generator", resolved.get("generator", {"name": "extractive"}))
        self.judge = build("judge", resolved.get("judge", {"name": "lexical"}))
        self.chunks: list[Chunk] = []

    # --- indexing ---------------------------------------------------------------------

    def index(self, dataset: Dataset) -> IndexReport:
        report = IndexReport()
        started = time.perf_counter()
        self.chunks = chunk_corpus(self.chunker, dataset.docs.values())
        report.n_chunks = len(self.chunks)
        report.seconds["chunk"] = time.perf_counter() - started
        pause_point("index")
        fingerprint = corpus_fingerprint(self.chunks)
        texts = [c.index_text for c in self.chunks]
        for retriever in self.retrievers:
            started = time.perf_counter()
            if hasattr(retriever, "bind"):
                retriever.bind(dataset, self.chunks)
                report.cached[retriever.stage] = False
            else:
                report.cached[retriever.stage] = self._fit_cached(retriever, texts, fingerprint)
            report.seconds[f"index_{retriever.stage}"] = time.perf_counter() - started
        for component in (self.reranker, self.generator, self.judge):
            if component is not None and hasattr(component, "prepare"):
                started = time.perf_counter()
                component.prepare(dataset, self.chunks, self.analyzer)
                report.seconds[f"prepare_{type(component).__name__}"] = (
                    time.perf_counter() - started
                )
        return report

    def _fit_cached(self, retriever, texts: list[str], fingerprint: str) -> bool:
        material = {
            "index": retriever.cache_material(),
            "analyzer": self.config.get("analyzer", {"name": "en"}),
            "corpus": fingerprint,
        }
        blockwise = _embeds_independently(retriever)

        def fit():
            if blockwise:
                self._embed_in_blocks(retriever, texts, material)
            else:
                retriever.fit(texts, self.analyzer)
            return retriever

        def load(folder):
            retriever.load(folder, self.analyzer)
            return retriever

        _, hit = self.cache.fetch(retriever.stage, material, fit, lambda r, f: r.save(f), load)
        if blockwise and not hit:
            self.cache.blocks(retriever.stage, material).discard()
        return hit

    def _embed_in_blocks(self, index, texts: list[str], material: dict) -> None:
        """Embed the corpus ``EMBED_BLOCK`` texts at a time, keeping each finished block in the
        cache, so an interrupted indexing of a big corpus resumes from the last finished block.
        Blocks are a whole number of the encoder's batches: the requests, and so the
        embeddings, are the same as in one pass."""
        encoder = index.encoder
        batch = max(int(getattr(encoder, "batch_size", 1) or 1), 1)
        size = math.ceil(EMBED_BLOCK / batch) * batch
        blocks = self.cache.blocks(index.stage, material)
        parts = []
        for number, start in enumerate(range(0, len(texts), size)):
            part = texts[start : start + size]
            vectors = blocks.load(number)
            if vectors is None or vectors.shape[0] != len(part):
                vectors = np.asarray(encoder.fit(part, self.analyzer))
                blocks.save(number, vectors)
            parts.append(vectors)
        index.embeddings = np.vstack(parts)

    def usage(self) -> dict[str, dict]:
        """What the components that call paid services consumed (requests, tokens, cost)."""
        parts = {
            "retriever": self.retrievers[0] if self.retrievers else None,
            "encoder": getattr(self.retrievers[-1], "encoder", None),
            "reranker": self.reranker,
            "generator": self.generator,
            "judge": self.judge,
        }
        return {
            slot: c.usage() for slot, c in parts.items() if c is not None and hasattr(c, "usage")
        }

    # --- querying ---------------------------------------------------------------------

    def select_queries(self, query_ids: Sequence[str]) -> list[str]:
        for retriever in self.retrievers:
            if hasattr(retriever, "select_queries"):
                query_ids = retriever.select_queries(query_ids)
        return list(query_ids)

    def retrieve(
        self, queries: Sequence[Query], depth: int
    ) -> tuple[dict[str, list[Hits]], dict[str, float]]:
        """Every retriever's ranking for every query (batched), and the ms spent per query."""
        stages, latency = {}, {}
        for retriever in self.retrievers:
            started = time.perf_counter()
            stages[retriever.stage] = retriever.search(queries, depth)
            latency[retriever.stage] = 1000 * (time.perf_counter() - started) / max(len(queries), 1)
        return stages, latency

    def answer(
        self,
        queries: Sequence[Query],
        depth: int,
        progress=None,
        checkpoint: AnswerCheckpoint | None = None,
    ) -> list[QueryResult]:
        """Retrieve, fuse, rerank and generate for every query.

        Batched stages report their time divided evenly over the queries. With a
        ``checkpoint``, each block of generated and judged queries is saved as it completes,
        and a query already answered there from the same ranking is not generated again.
        """
        n = max(len(queries), 1)
        retrieved, latency = self.retrieve(queries, depth)
        per_query = [
            {name: hits[i] for name, hits in retrieved.items()} for i in range(len(queries))
        ]
        stages = [dict(r) for r in per_query]
        if self.fuser is not None:
            started = time.perf_counter()
            for s in stages:
                s["fusion"] = self.fuser.fuse([s[r.stage] for r in self.retrievers], depth)
            latency["fusion"] = 1000 * (time.perf_counter() - started) / n
        if self.reranker is not None:
            started = time.perf_counter()
            current = [list(s.values())[-1] for s in stages]
            for s, hits in zip(stages, self.reranker.rerank_all(queries, current, per_query)):
                s["rerank"] = hits
            latency["rerank"] = 1000 * (time.perf_counter() - started) / n
        retrieve_ms = sum(latency.pop(r.stage) for r in self.retrievers)
        timings = {"retrieve": retrieve_ms, **latency}
        return self._respond(queries, stages, timings, progress, checkpoint)

    def _respond(
        self,
        queries: Sequence[Query],
        stages: list[dict[str, Hits]],
        timings: dict[str, float],
        progress=None,
        checkpoint: AnswerCheckpoint | None = None,
    ) -> list[QueryResult]:
        """Generate answers from the final rankings, split them into claims and judge them, in
        blocks of ``BATCH`` queries: through the generator's ``generate_all`` and the judge's
        ``judge_all`` where they have them (components that send requests run them
        concurrently), one query at a time otherwise. A batched call's time is divided evenly
        over its queries (for the judge: over the queries with claims to judge)."""
        results: list[QueryResult] = []
        items = range(len(queries))
        for i in progress(items) if progress else items:
            if i % BATCH == 0:
                block = slice(i, i + BATCH)
                if checkpoint is None:
                    results.extend(self._respond_block(queries[block], stages[block], timings))
                else:
                    results.extend(
                        self._respond_checkpointed(
                            queries[block], stages[block], timings, checkpoint
                        )
                    )
        return results

    def _respond_checkpointed(
        self,
        queries: Sequence[Query],
        stages: list[dict[str, Hits]],
        timings: dict[str, float],
        checkpoint: AnswerCheckpoint,
    ) -> list[QueryResult]:
        """One block: answers found in the checkpoint are reused, the rest computed and saved."""
        keys = [self._answer_key(q, s) for q, s in zip(queries, stages)]
        found = [
            self._restore(checkpoint.lookup(q.id, key), s, timings)
            for q, s, key in zip(queries, stages, keys)
        ]
        todo = [i for i, result in enumerate(found) if result is None]
        if todo:
            fresh = self._respond_block(
                [queries[i] for i in todo], [stages[i] for i in todo], timings
            )
            for i, result in zip(todo, fresh):
                found[i] = result
            records = [_record(queries[i].id, keys[i], found[i]) for i in todo]
            checkpoint.save([r for r in records if r is not None])
            pause_point("answer")
        return found

    def _answer_key(self, query: Query, stages: dict[str, Hits]) -> str:
        """What an answer is computed from: the query and its final chunk ranking."""
        final = list(stages.values())[-1]
        ranking = [self.chunks[p].chunk_id for p in final.index]
        return digest({"query": [query.id, query.text], "ranking": ranking})

    def _context(self, final: Hits) -> list[int]:
        context_k = getattr(self.generator, "context_k", None)
        return [int(p) for p in final.index[:context_k]]

    def _restore(
        self, record: dict | None, stages: dict[str, Hits], timings: dict[str, float]
    ) -> QueryResult | None:
        """A checkpointed answer as a result (None when the record is not usable)."""
        if record is None:
            return None
        try:
            generation = _rebuild(Generation, record["generation"])
            claims = [_rebuild(SplitClaim, c) for c in record["claims"]]
            verdicts = [_rebuild(Verdict, v) for v in record["verdicts"]]
            latency = {**timings, **record["latency_ms"]}
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if len(verdicts) != len(claims):
            return None
        final = list(stages.values())[-1]
        return QueryResult(stages, generation, claims, verdicts, self._context(final), latency)

    def _respond_block(
        self, queries: Sequence[Query], stages: list[dict[str, Hits]], timings: dict[str, float]
    ) -> list[QueryResult]:
        finals = [list(s.values())[-1] for s in stages]
        ranked = [[self.chunks[p] for p in final.index] for final in finals]
        latency = [dict(timings) for _ in queries]
        if hasattr(self.generator, "generate_all"):
            started = time.perf_counter()
            generations = self.generator.generate_all(queries, ranked)
            each = 1000 * (time.perf_counter() - started) / max(len(queries), 1)
            for t in latency:
                t["generate"] = each
        else:
            generations = []
            for query, chunks, t in zip(queries, ranked, latency):
                started = time.perf_counter()
                generations.append(self.generator.generate(query, chunks))
                t["generate"] = 1000 * (time.perf_counter() - started)
        contexts = [self._context(final) for final in finals]
        claims = [[] if g.refused else split_claims(g.answer) for g in generations]
        judged = [i for i, c in enumerate(claims) if c]
        verdicts: list[list[Verdict]] = [[] for _ in queries]
        for t in latency:
            t["judge"] = 0.0
        if hasattr(self.judge, "judge_all"):
            started = time.perf_counter()
            if judged:
                found = self.judge.judge_all(
                    [queries[i] for i in judged],
                    [claims[i] for i in judged],
                    [[self.chunks[p] for p in contexts[i]] for i in judged],
                )
                for i, v in zip(judged, found):
                    verdicts[i] = v
            each = 1000 * (time.perf_counter() - started) / max(len(judged), 1)
            for i in judged:
                latency[i]["judge"] = each
        else:
            for i in judged:
                started = time.perf_counter()
                verdicts[i] = self.judge.judge(
                    queries[i], claims[i], [self.chunks[p] for p in contexts[i]]
                )
                latency[i]["judge"] = 1000 * (time.perf_counter() - started)
        return [
            QueryResult(s, g, c, v, ctx, t)
            for s, g, c, v, ctx, t in zip(stages, generations, claims, verdicts, contexts, latency)
        ]


def _embeds_independently(retriever) -> bool:
    """A dense index whose encoder embeds each text on its own (no fitting to the corpus)."""
    encoder = getattr(retriever, "encoder", None)
    if encoder is None or not hasattr(retriever, "embeddings"):
        return False
    declared = getattr(encoder, "independent_embeddings", None)
    if declared is not None:
        return bool(declared)
    spec = getattr(type(encoder), "spec", None)
    return (
        spec is not None
        and type(encoder).__module__.startswith("rag_bench.")
        and spec.name in STATELESS_ENCODERS
    )


def _plain(value: Any) -> Any:
    return dataclasses.asdict(value)


def _rebuild(cls, data: dict) -> Any:
    """A frozen dataclass from its JSON form (lists back to tuples where the field is one)."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            value = data[f.name]
            if isinstance(value, list) and str(f.type).startswith("tuple"):
                value = tuple(value)
            kwargs[f.name] = value
    return cls(**kwargs)


def _record(query_id: str, key: str, result: QueryResult) -> dict | None:
    """A result's generation, claims and verdicts as a JSON-able checkpoint record, or None
    when they would not come back equal from JSON (then the query is recomputed on resume)."""
    record = {
        "query_id": query_id,
        "key": key,
        "generation": _plain(result.generation),
        "claims": [_plain(c) for c in result.claims],
        "verdicts": [_plain(v) for v in result.verdicts],
        "latency_ms": {s: result.latency_ms.get(s) for s in CHECKPOINTED_LATENCY},
    }
    try:
        back = json.loads(json.dumps(record, ensure_ascii=False, allow_nan=False))
        same = (
            _rebuild(Generation, back["generation"]) == result.generation
            and [_rebuild(SplitClaim, c) for c in back["claims"]] == list(result.claims)
            and [_rebuild(Verdict, v) for v in back["verdicts"]] == list(result.verdicts)
        )
    except (TypeError, ValueError):
        return None
    return back if same else None
