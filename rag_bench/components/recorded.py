"""Replaying what a system logged: its rankings (``answers.jsonl``, or an imported outputs
file) as a retriever, and the passages it retrieved as the chunks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag_bench.components.base import Capability, Chunker, Retriever
from rag_bench.components.chunking import WholeDocument
from rag_bench.components.registry import component
from rag_bench.data.dataset import Dataset
from rag_bench.errors import RagBenchError
from rag_bench.model import Chunk, Doc, Hits, Query


@component(
    "chunker",
    "recorded",
    description="the passages a system recorded for each document; whole documents otherwise",
)
class RecordedChunker(Chunker):
    """The chunks are the passages the recorded system retrieved (in the order first met), so
    claims are judged against the text the system saw; a document it never returned, or one
    recorded by id only, is one whole chunk."""

    capabilities = frozenset({Capability.READS_DATASET})

    def read_dataset(self, dataset: Dataset) -> None:
        self.passages: dict[str, list[Chunk]] = {}
        seen: set[str] = set()
        for answer in dataset.answers.values():
            for chunk in answer.passages:
                if chunk.chunk_id not in seen:
                    seen.add(chunk.chunk_id)
                    self.passages.setdefault(chunk.doc_id, []).append(chunk)

    def chunk(self, doc: Doc) -> list[Chunk]:
        return list(self.passages.get(doc.id, ())) or WholeDocument().chunk(doc)


@component("retriever", "recorded", description="replays the rankings recorded in answers.jsonl")
class RecordedRetriever(Retriever):
    capabilities = frozenset({Capability.PREPARE, Capability.SELECTS_QUERIES})
    stage = "recorded"

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        if not dataset.answers:
            raise RagBenchError(
                f"dataset {dataset.name!r} has no answers.jsonl to replay",
                "record answers in answers.jsonl or pick another variant",
            )
        self.answers = dataset.answers
        self.position: dict[str, int] = {}
        self.chunk_position: dict[str, int] = {}
        for i, chunk in enumerate(chunks):
            self.position.setdefault(chunk.doc_id, i)
            self.chunk_position.setdefault(chunk.chunk_id, i)

    def select_queries(self, query_ids: Sequence[str]) -> list[str]:
        """Only queries with a recorded answer can be replayed."""
        return [q for q in query_ids if q in self.answers]

    def search(self, queries: Sequence[Query], depth: int) -> list[Hits]:
        return [self._replay(self.answers[query.id], depth) for query in queries]

    def _replay(self, answer, depth: int) -> Hits:
        """The recorded order, kept as given (a passage or document met twice counts once),
        with the recorded scores where there are, otherwise descending ranks."""
        if answer.passages:
            keys = [self.chunk_position[c.chunk_id] for c in answer.passages]
        else:
            keys = [self.position[d] for d in answer.ranking]
        seen: set[int] = set()
        kept = []
        for i, key in enumerate(keys):
            if key not in seen:
                seen.add(key)
                kept.append(i)
        kept = kept[:depth]
        if answer.scores is None:
            scores = np.arange(len(kept), 0, -1, dtype=np.float64)
        else:
            scores = np.array([answer.scores[i] for i in kept], dtype=np.float64)
        return Hits(np.array([keys[i] for i in kept], dtype=np.int64), scores)
