"""Replaying a production system's logged rankings (``answers.jsonl``) as a retriever."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag_bench.components.base import Capability, Retriever
from rag_bench.components.registry import component
from rag_bench.data.dataset import Dataset
from rag_bench.errors import RagBenchError
from rag_bench.model import Chunk, Hits, Query


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
        for i, chunk in enumerate(chunks):
            self.position.setdefault(chunk.doc_id, i)

    def select_queries(self, query_ids: Sequence[str]) -> list[str]:
        """Only queries with a recorded answer can be replayed."""
        return [q for q in query_ids if q in self.answers]

    def search(self, queries: Sequence[Query], depth: int) -> list[Hits]:
        out = []
        for query in queries:
            ranking = list(dict.fromkeys(self.answers[query.id].ranking))[:depth]
            index = np.array([self.position[d] for d in ranking], dtype=np.int64)
            out.append(Hits(index, np.arange(len(index), 0, -1, dtype=np.float64)))
        return out
