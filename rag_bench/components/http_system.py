"""Your own RAG service as a variant: each query is POSTed to its HTTP endpoint, and the
documents it retrieved and the answer it gave are read from configurable JSON fields.

The ``http`` retriever and the ``http`` generator send the same request for a query; the
on-disk reply cache (shared with the OpenAI components) answers the generator's copy, so each
query costs one request, and re-running the variant costs none. Requests run ``concurrency`` at
a time, with a timeout and bounded retries on HTTP 429 / 5xx / timeouts. The endpoint's URL and
key come from environment variables whose *names* are parameters (``url_env``,
``api_key_env``); the key is sent as ``Authorization: Bearer …`` and stored nowhere.

A request is ``{"<query_field>": "the question", "query_id": "q1"}``. A reply is a JSON object
in which ``answer_field`` and ``documents_field`` are dotted paths (``result.answer``); each
document is an id, or an object holding ``doc_id_field`` (and optionally ``score_field``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rag_bench.components.base import Capability, Generator, Retriever
from rag_bench.components.openai.client import EndpointError, LLMClient, public_url
from rag_bench.components.registry import component
from rag_bench.data.dataset import Dataset
from rag_bench.model import Chunk, Generation, Hits, Query

SPEAKS = "your RAG service's endpoint (the URL that answers a POSTed question)"


class HTTPSystem:
    """One endpoint and the fields of its replies; what the two components share. The client
    is made at the first request, so a component exists (``rag-bench variants``, a contract
    check) without the endpoint's variables set."""

    def __init__(self, fields: dict[str, str], client: dict[str, Any]):
        self.fields, self._options = fields, client
        self._client: LLMClient | None = None

    @property
    def client(self) -> LLMClient:
        if self._client is None:
            self._client = LLMClient(**self._options)
        return self._client

    def replies(self, queries: Sequence[Query]) -> list[dict]:
        body = self.fields["query_field"]
        return self.client.map(
            lambda q: self.client.post("", {body: q.text, "query_id": q.id}), queries
        )

    def field(self, reply: dict, name: str, query: Query) -> Any:
        """The value at the dotted path ``self.fields[name]`` of a reply."""
        value: Any = reply
        for part in self.fields[name].split("."):
            if not isinstance(value, dict) or part not in value:
                raise self.malformed(query, f"has no field {self.fields[name]!r}", name)
            value = value[part]
        return value

    def malformed(self, query: Query, what: str, name: str) -> EndpointError:
        return EndpointError(
            f"the reply of {public_url(self.client.base_url)} to query {query.id!r} {what}",
            f"point --set {self.client.where}.{name}=... at the field that holds it",
        )


class _HTTPSystemComponent:
    """The parameters both components take (they must agree for the reply cache to answer the
    second request), and the request counts, for the run's ``usage``."""

    slot = ""

    def __init__(
        self,
        url_env: str = "RAG_SYSTEM_URL",
        api_key_env: str = "RAG_SYSTEM_API_KEY",
        query_field: str = "query",
        answer_field: str = "answer",
        documents_field: str = "documents",
        doc_id_field: str = "id",
        score_field: str = "score",
        timeout: float = 60.0,
        max_retries: int = 4,
        concurrency: int = 4,
        cache: bool = True,
    ):
        fields = {
            "query_field": query_field,
            "answer_field": answer_field,
            "documents_field": documents_field,
            "doc_id_field": doc_id_field,
            "score_field": score_field,
        }
        client = dict(
            where=self.slot,
            base_url_env=url_env,
            api_key_env=api_key_env,
            timeout=timeout,
            max_retries=max_retries,
            retry_backoff=1.0,
            concurrency=concurrency,
            cache=cache,
            price_per_1k_prompt=0.0,
            price_per_1k_completion=0.0,
            default_base_url=None,
            speaks=SPEAKS,
        )
        self.system = HTTPSystem(fields, client)

    def usage(self) -> dict[str, Any]:
        return self.system.client.usage()

    def tally(self) -> dict[str, int]:
        return self.system.client.tally()

    def absorb(self, counts: dict[str, int]) -> None:
        self.system.client.absorb(counts)


@component(
    "retriever",
    "http",
    description="your RAG service over HTTP: the documents it returned, in its order",
    requires="pip install 'rag-bench[openai]'",
)
class HTTPSystemRetriever(_HTTPSystemComponent, Retriever):
    capabilities = frozenset({Capability.PREPARE, Capability.METERED})
    stage = "http"
    slot = "retriever"

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.position: dict[str, int] = {}
        for i, chunk in enumerate(chunks):
            self.position.setdefault(chunk.doc_id, i)

    def search(self, queries: Sequence[Query], depth: int) -> list[Hits]:
        replies = self.system.replies(queries)
        return [self._hits(q, r, depth) for q, r in zip(queries, replies)]

    def _hits(self, query: Query, reply: dict, depth: int) -> Hits:
        documents = self.system.field(reply, "documents_field", query)
        if not isinstance(documents, list):
            raise self.system.malformed(query, "holds no list of documents", "documents_field")
        ids, scores = [], []
        for item in documents:
            doc_id, score = self._document(query, item)
            if doc_id in self.position and self.position[doc_id] not in ids:
                ids.append(self.position[doc_id])
                scores.append(score)
        ids, scores = ids[:depth], scores[:depth]
        if any(s is None for s in scores):  # no scores given: the service's order, as ranks
            scores = list(range(len(ids), 0, -1))
        return Hits(np.array(ids, dtype=np.int64), np.array(scores, dtype=np.float64))

    def _document(self, query: Query, item: Any) -> tuple[str, float | None]:
        if isinstance(item, (str, int)) and not isinstance(item, bool):
            return str(item), None
        if isinstance(item, dict):
            key, score_key = self.system.fields["doc_id_field"], self.system.fields["score_field"]
            if key in item:
                return str(item[key]), self._score(query, item.get(score_key))
        raise self.system.malformed(query, "lists a document without an id", "doc_id_field")

    def _score(self, query: Query, score: Any) -> float | None:
        """A document's score: None when it gives none; a number beyond float's range (or
        NaN, infinite) is no score, and refused."""
        if not isinstance(score, (int, float)) or isinstance(score, bool):
            return None
        try:
            value = float(score)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            raise self.system.malformed(query, "has a score beyond float range", "score_field")
        return value


@component(
    "generator",
    "http",
    description="your RAG service over HTTP: the answer it gave",
    requires="pip install 'rag-bench[openai]'",
)
class HTTPSystemGenerator(_HTTPSystemComponent, Generator):
    capabilities = frozenset({Capability.BATCH, Capability.METERED})
    slot = "generator"

    def generate(self, query: Query, context: Sequence[Chunk]) -> Generation:
        return self.generate_all([query], [context])[0]

    def generate_all(
        self, queries: Sequence[Query], contexts: Sequence[Sequence[Chunk]]
    ) -> list[Generation]:
        from rag_bench.text.claims import is_refusal

        out = []
        for query, reply in zip(queries, self.system.replies(queries)):
            answer = self.system.field(reply, "answer_field", query)
            if not isinstance(answer, str):
                raise self.system.malformed(query, "has an answer that is not text", "answer_field")
            out.append(Generation(answer, refused=is_refusal(answer)))
        return out
