"""Generator and encoder backed by an OpenAI-compatible HTTP API (extra: ``rag-bench[openai]``).

Any server speaking the OpenAI protocol works (OpenAI, Azure-style proxies, vLLM, llama.cpp,
Ollama, LiteLLM): ``base_url_env`` and ``api_key_env`` name the environment variables holding
its base URL and key. Requests are cached on disk (see
:mod:`rag_bench.components.openai.client`), so re-running a variant makes no request and gives
the same answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag_bench.components.base import Capability, Encoder, Generator
from rag_bench.components.dense import normalise
from rag_bench.components.openai.client import INSTALL, EndpointComponent, public_url
from rag_bench.components.prompting import BUILT_IN, Prompt, read_prompt, reply_generation
from rag_bench.components.registry import component
from rag_bench.errors import UsageError
from rag_bench.model import Chunk, Generation, Query


@component(
    "generator",
    "openai",
    description="chat model of an OpenAI-compatible API: cited short claims or a refusal",
    requires=INSTALL,
)
class OpenAIGenerator(EndpointComponent, Generator):
    """Prompts a chat model with the top ``context_k`` chunks, numbered and fenced as untrusted
    data, at temperature 0, asking for short claims each followed by ``[doc_id]`` citations, or
    a refusal ("I don't know: ...") when the passages do not answer the question."""

    capabilities = frozenset({Capability.BATCH, Capability.METERED})
    where = "generator"

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        context_k: int = 5,
        max_tokens: int = 400,
        prompt: Prompt = BUILT_IN,
        **http,
    ):
        if context_k < 1:
            raise UsageError(f"generator.context_k={context_k} is below 1", "e.g. 5")
        if max_tokens < 1:
            raise UsageError(f"generator.max_tokens={max_tokens} is below 1", "e.g. 400")
        self.model, self.context_k, self.max_tokens = model, context_k, max_tokens
        self.prompt = read_prompt(prompt)
        super().__init__(**http)

    def messages(self, query: Query, context: Sequence[Chunk]) -> list[dict]:
        return self.prompt.messages(query, context)

    def complete(self, messages: list[dict]) -> str:
        """The model's reply to one chat, at temperature 0."""
        return self.client.chat(self.model, messages, temperature=0, max_tokens=self.max_tokens)

    def generate(self, query: Query, context: Sequence[Chunk]) -> Generation:
        context = list(context[: self.context_k])
        return reply_generation(self.complete(self.messages(query, context)), context)

    def generate_all(
        self, queries: Sequence[Query], contexts: Sequence[Sequence[Chunk]]
    ) -> list[Generation]:
        """Every query's answer, ``concurrency`` requests at a time."""
        return self.client.map(lambda pair: self.generate(*pair), list(zip(queries, contexts)))


@component(
    "encoder",
    "openai",
    description="embeddings endpoint of an OpenAI-compatible API (/v1/embeddings)",
    requires=INSTALL,
)
class OpenAIEncoder(EndpointComponent, Encoder):
    """Embeds chunks and queries in batches of ``batch_size`` through ``/embeddings``;
    ``dimensions`` > 0 asks the model for shorter vectors (where supported). Embeddings are
    scaled to unit length, so search is by cosine similarity."""

    capabilities = frozenset({Capability.INDEPENDENT_EMBEDDINGS, Capability.METERED})
    where = "encoder"

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        batch_size: int = 64,
        dimensions: int = 0,
        **http,
    ):
        if batch_size < 1:
            raise UsageError(f"encoder.batch_size={batch_size} is below 1", "e.g. 64")
        if dimensions < 0:
            raise UsageError(f"encoder.dimensions={dimensions} is below 0", "0 = the model's own")
        self.model, self.batch_size, self.dimensions = model, batch_size, dimensions
        super().__init__(**http)

    def cache_material(self) -> dict:
        # Which server and model made the embeddings; never the key.
        return {
            "component": "openai",
            "endpoint": public_url(self.client.base_url),
            "model": self.model,
            "dimensions": self.dimensions,
        }

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = [t if t.strip() else " " for t in texts]  # the API rejects empty input
        if not texts:
            return np.zeros((0, max(self.dimensions, 1)))
        batches = [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        parts = self.client.map(
            lambda batch: self.client.embed(self.model, batch, self.dimensions or None), batches
        )
        return normalise(np.vstack(parts))

    def fit(self, texts: list[str], analyzer) -> np.ndarray:
        return self.encode(texts)

    def save(self, folder: Path) -> None:
        pass  # queries are embedded by the same endpoint; nothing to keep

    def load(self, folder: Path, analyzer) -> None:
        pass
