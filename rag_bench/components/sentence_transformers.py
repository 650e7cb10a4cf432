"""Neural components on sentence-transformers (extra: ``rag-bench[sentence-transformers]``).

- encoder ``sentence-transformers``: a bi-encoder embeds chunks and queries (unit length).
- reranker ``cross-encoder``: a cross-encoder scores each (query, passage) pair of the top
  ``top_n`` candidates.
- judge ``nli``: a cross-encoder trained for natural language inference grades a claim by the
  probability that a context passage entails it.

``model`` is a Hugging Face model name or a local folder. Nothing is downloaded by rag-bench
itself; sentence-transformers fetches a named model into the Hugging Face cache unless
``HF_HUB_OFFLINE=1``, and a model that cannot be found is a one-line error.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_bench.components.base import Capability, Encoder, Judge, Reranker
from rag_bench.components.dense import normalise
from rag_bench.components.judges import check_grade
from rag_bench.components.registry import component
from rag_bench.components.rerank import check_top_n, reorder
from rag_bench.data.dataset import Dataset
from rag_bench.errors import RagBenchError, UsageError, first_line, import_backend
from rag_bench.model import Chunk, Claim, Hits, Query, Verdict

INSTALL = "pip install 'rag-bench[sentence-transformers]'"

_models: dict[tuple, Any] = {}  # loaded models, shared by the components of one process
_models_lock = threading.Lock()


def load_model(kind: str, model: str, device: str, where: str, **options) -> Any:
    """A ``SentenceTransformer`` or ``CrossEncoder``, loaded once per process."""
    st = import_backend("sentence_transformers", INSTALL, f"the {where}")
    key = (kind, model, device, tuple(sorted(options.items())))
    with _models_lock:
        if key not in _models:
            try:
                _models[key] = getattr(st, kind)(model, device=device or None, **options)
            except Exception as error:  # the library's many ways of not finding a model
                first = first_line(error)[:200]
                raise RagBenchError(
                    f"{where} cannot load model {model!r}: {first}",
                    f"--set {where}.model=NAME_OR_LOCAL_PATH; offline, use a local folder or "
                    "a model already in the Hugging Face cache with HF_HUB_OFFLINE=1",
                ) from None
        return _models[key]


def on_threads(threads: int) -> None:
    """Run torch on ``threads`` intra-op threads in this process.

    A model's output moves in its last bits with torch's thread count for some batch shapes
    (MiniLM at 16 word pieces: up to 1.5e-7 in an embedding between one and two threads, and
    not monotonically: one and three threads agreed, two and four did not), and torch's
    default is the machine's core count (a Ray worker's: one). So each component runs on a
    fixed count, its ``threads`` parameter, wherever it computes: a run's numbers are then the
    same whatever the executor, the number of workers and the machine's cores. Called once the
    model is loaded, so torch is (sentence-transformers loads it)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _check_threads(where: str, threads: int) -> None:
    if threads < 1:
        raise UsageError(
            f"{where}.threads={threads} is below 1",
            "e.g. 1 (and --workers N to use N cores: the numbers do not depend on it)",
        )


def model_identity(model: str) -> dict:
    """What identifies a model's weights: the name, or for a local folder its absolute path and
    the names, sizes and modification times of its files (a retrained model gets a new index)."""
    path = Path(model).expanduser()
    if not path.is_dir():
        return {"model": model}
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        h.update(f"{file.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return {"model": str(path.resolve()), "files": h.hexdigest()}


def _versions(*packages: str) -> dict[str, str | None]:
    """Installed versions (without importing): a new release may embed slightly differently."""
    from importlib import metadata

    found: dict[str, str | None] = {}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _check_batch(where: str, batch_size: int) -> None:
    if batch_size < 1:
        raise UsageError(f"{where}.batch_size={batch_size} is below 1", "e.g. 32")


@component(
    "encoder",
    "sentence-transformers",
    description="a sentence-transformers bi-encoder (model name or local path)",
    requires=INSTALL,
)
class SentenceTransformerEncoder(Encoder):
    """Unit-length embeddings from ``SentenceTransformer.encode``. ``query_prefix`` and
    ``passage_prefix`` are prepended for models trained with them (e5: ``"query: "`` and
    ``"passage: "``); ``max_seq_length`` > 0 truncates inputs to that many tokens."""

    capabilities = frozenset({Capability.INDEPENDENT_EMBEDDINGS})
    threads: int

    def __init__(
        self,
        model: str = "sentence-transformers/all-MiniLM-L6-v2",
        batch_size: int = 32,
        device: str = "cpu",
        query_prefix: str = "",
        passage_prefix: str = "",
        max_seq_length: int = 0,
        threads: int = 1,
    ):
        _check_batch("encoder", batch_size)
        _check_threads("encoder", threads)
        if max_seq_length < 0:
            raise UsageError(f"encoder.max_seq_length={max_seq_length} is below 0", "0 = model's")
        self.model, self.batch_size, self.device = model, batch_size, device
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.max_seq_length = max_seq_length
        self.threads = threads
        import_backend("sentence_transformers", INSTALL, "the sentence-transformers encoder")

    def _model(self):
        model = load_model("SentenceTransformer", self.model, self.device, "encoder")
        if self.max_seq_length:
            model.max_seq_length = self.max_seq_length
        return model

    def cache_material(self) -> dict:
        return {
            "component": "sentence-transformers",
            **model_identity(self.model),
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            "max_seq_length": self.max_seq_length,
            "threads": self.threads,
            "versions": _versions("sentence-transformers", "transformers", "torch"),
        }

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        model = self._model()
        on_threads(self.threads)
        vectors = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return normalise(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))

    def fit(self, texts: list[str], analyzer) -> np.ndarray:
        return self._encode([self.passage_prefix + t for t in texts])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.query_prefix + t for t in texts])

    def save(self, folder: Path) -> None:
        (folder / "encoder.json").write_text(json.dumps(self.cache_material(), indent=1))

    def load(self, folder: Path, analyzer) -> None:
        pass  # the model is loaded when the first query is encoded


@component(
    "reranker",
    "cross-encoder",
    description="a sentence-transformers cross-encoder scores the top candidates",
    requires=INSTALL,
)
class CrossEncoderReranker(Reranker):
    """Scores (query, title + passage) pairs of each query's top ``top_n`` candidates with
    ``CrossEncoder.predict`` and sorts them by score; the rest keep their order below."""

    capabilities = frozenset({Capability.PREPARE})

    def __init__(
        self,
        model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2",
        top_n: int = 30,
        batch_size: int = 32,
        device: str = "cpu",
        max_length: int = 512,
        threads: int = 1,
    ):
        check_top_n(top_n)
        _check_batch("reranker", batch_size)
        _check_threads("reranker", threads)
        self.model, self.top_n, self.batch_size = model, top_n, batch_size
        self.device, self.max_length, self.threads = device, max_length, threads
        import_backend("sentence_transformers", INSTALL, "the cross-encoder reranker")

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.chunks = chunks

    def rerank_all(
        self, queries: Sequence[Query], candidates: Sequence[Hits], stages: Sequence[dict]
    ) -> list[Hits]:
        heads = [h.top(self.top_n) for h in candidates]
        pairs = [
            (query.text, self.chunks[p].index_text)
            for query, head in zip(queries, heads)
            for p in head.index
        ]
        scores = np.zeros(0)
        if pairs:
            model = load_model(
                "CrossEncoder", self.model, self.device, "reranker", max_length=self.max_length
            )
            on_threads(self.threads)
            raw = np.asarray(
                model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False),
                dtype=np.float64,
            )
            if raw.ndim == 2 and raw.shape[1] == 1:
                raw = raw[:, 0]
            if raw.ndim != 1:
                raise RagBenchError(
                    f"reranker model {self.model!r} gives {raw.shape[1]} scores per pair, not 1",
                    "use a relevance cross-encoder such as cross-encoder/ms-marco-MiniLM-L-6-v2",
                )
            scores = raw
        out, start = [], 0
        for hits, head in zip(candidates, heads):
            out.append(reorder(hits, scores[start : start + len(head)]))
            start += len(head)
        return out


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


@component(
    "judge",
    "nli",
    description="an NLI cross-encoder: P(passage entails claim) graded by thresholds",
    requires=INSTALL,
)
class NLIJudge(Judge):
    """Grade 2 when some context passage entails the claim with probability ≥ ``full``, 1 when
    ≥ ``partial``, else 0; the claim is supported by the documents of the passages reaching
    grade ``supported_at``. The label order is read from the model's config."""

    def __init__(
        self,
        model: str = "cross-encoder/nli-deberta-v3-xsmall",
        full: float = 0.9,
        partial: float = 0.5,
        supported_at: int = 1,
        batch_size: int = 32,
        device: str = "cpu",
        threads: int = 1,
    ):
        if not 0 < partial <= full <= 1:
            raise UsageError(
                f"judge thresholds partial={partial}, full={full}", "use 0 < partial ≤ full ≤ 1"
            )
        check_grade(supported_at)
        _check_batch("judge", batch_size)
        _check_threads("judge", threads)
        self.model, self.full, self.partial, self.threads = model, full, partial, threads
        self.supported_at, self.batch_size, self.device = supported_at, batch_size, device
        import_backend("sentence_transformers", INSTALL, "the NLI judge")

    def _entailment_column(self, model) -> int:
        inner = getattr(model, "model", None)
        config = getattr(inner, "config", None) or getattr(model, "config", None)
        labels = getattr(config, "id2label", None) or {}
        for index, label in labels.items():
            if str(label).lower().startswith("entail"):
                return int(index)
        raise RagBenchError(
            f"judge model {self.model!r} has no 'entailment' label "
            f"(labels: {', '.join(map(str, labels.values())) or 'none'})",
            "use an NLI cross-encoder such as cross-encoder/nli-deberta-v3-xsmall",
        )

    def _grade(self, probability: float) -> int:
        return 2 if probability >= self.full else 1 if probability >= self.partial else 0

    def judge(
        self, query: Query, claims: Sequence[Claim], context: Sequence[Chunk]
    ) -> list[Verdict]:
        if not claims:
            return []
        if not context:
            return [Verdict(0, False, (), "no context") for _ in claims]
        model = load_model("CrossEncoder", self.model, self.device, "judge")
        on_threads(self.threads)
        column = self._entailment_column(model)
        pairs = [(chunk.text, claim.text) for claim in claims for chunk in context]
        logits = np.asarray(
            model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False),
            dtype=np.float64,
        )
        if logits.ndim != 2:
            raise RagBenchError(
                f"judge model {self.model!r} gives one score per pair, not NLI labels",
                "use an NLI cross-encoder such as cross-encoder/nli-deberta-v3-xsmall",
            )
        if np.all((logits >= 0) & (logits <= 1)) and np.allclose(logits.sum(axis=1), 1.0):
            probabilities = logits  # already probabilities
        else:
            probabilities = _softmax(logits)
        entail = probabilities[:, column].reshape(len(claims), len(context))
        verdicts = []
        for row in entail:
            best = int(np.argmax(row))
            grade = self._grade(float(row[best]))
            by = tuple(
                dict.fromkeys(
                    c.doc_id
                    for c, p in zip(context, row)
                    if self._grade(float(p)) >= self.supported_at
                )
            )
            verdicts.append(
                Verdict(
                    grade,
                    grade >= self.supported_at,
                    by,
                    f"entailment {row[best]:.2f} by {context[best].doc_id}",
                    float(row[best]),
                )
            )
        return verdicts
