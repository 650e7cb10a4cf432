"""Rerankers reorder the top candidates of the first stage.

Both built-in rerankers need no model download. They describe each (query, passage) pair by
the signals a cross-encoder learns implicitly: how much of the query's rarity-weighted
vocabulary the passage covers, how close together the matched terms stand, whether the query's
word pairs occur as pairs, whether the title matches, and what each first-stage retriever
thought of it.

- ``proximity`` blends those features with fixed weights; it needs no labels.
- ``ltr`` learns the blend from relevance labels (pairwise logistic regression). It learns from
  a labelled split of its own (``train_split``: the dataset's ``qrels/train.tsv`` and the
  queries it names) when there is one; otherwise it cross-fits: the evaluated queries are split
  into folds and each fold is scored by a model trained on the other folds only, so no query is
  ever scored by a model that saw its own labels. :attr:`LearnedReranker.training` says which.

When the pipeline has an encoder, ``ltr`` also sees the encoder's query–passage cosine
similarity for every candidate (``similarity``), not only for those the dense retriever found.

Every score is a sum of feature × weight computed without BLAS (a fixed summation order), and
the model is fitted on one BLAS thread, so the scores are the same bit for bit whatever the
executor or other threads do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag_bench.components.base import Capability, Reranker
from rag_bench.components.blas import one_blas_thread
from rag_bench.components.registry import component
from rag_bench.components.termstats import TermWeights
from rag_bench.data.dataset import Dataset, load_queries
from rag_bench.data.qrels import load_qrels
from rag_bench.data.qrels_versions import use_qrels
from rag_bench.errors import DataError, UsageError
from rag_bench.model import Chunk, Hits, Query

FEATURES = (
    "prior",
    "coverage",
    "proximity",
    "pairs",
    "title",
    "sparse",
    "dense",
    "fuzzy",
    "document",
    "similarity",
)


def deletions(term: str) -> set[str]:
    """The term and every string one deletion away from it: two terms share one of these
    exactly when they are within one insertion, deletion or substitution (symmetric delete)."""
    return {term} | {term[:i] + term[i + 1 :] for i in range(len(term))}


def fuzzy_coverage(query_terms: set[str], passage_terms: set[str]) -> float:
    """Share of query terms the passage contains exactly or, for terms of 4+ letters, with one
    typo (a misspelt query word still finds its passage)."""
    if not query_terms:
        return 0.0
    near: set[str] = set()
    for term in passage_terms:
        if len(term) >= 4:
            near |= deletions(term)
    hits = sum(
        1 for t in query_terms if t in passage_terms or (len(t) >= 4 and deletions(t) & near)
    )
    return hits / len(query_terms)


def min_window(positions: dict[str, list[int]]) -> int:
    """Length of the shortest stretch of the passage holding every matched term at least once."""
    events = sorted((p, t) for t, ps in positions.items() for p in ps)
    need = len(positions)
    count: dict[str, int] = {}
    best = events[-1][0] - events[0][0] + 1
    left = 0
    for pos, term in events:
        count[term] = count.get(term, 0) + 1
        while len(count) == need:
            best = min(best, pos - events[left][0] + 1)
            first = events[left][1]
            count[first] -= 1
            if count[first] == 0:
                del count[first]
            left += 1
    return best


class PassageFeatures:
    """Feature vectors of (query, candidate passage) pairs, in the order of ``FEATURES``."""

    def __init__(self, chunks: Sequence[Chunk], analyzer):
        self.analyzer = analyzer
        self.terms = analyzer.terms_many([c.text for c in chunks])
        self.title_terms = [set(t) for t in analyzer.terms_many([c.title for c in chunks])]
        self.weights = TermWeights([a + list(b) for a, b in zip(self.terms, self.title_terms)])
        # the vocabulary of each chunk's whole document (title and every chunk)
        by_doc: dict[str, set[str]] = {}
        for chunk, terms, title in zip(chunks, self.terms, self.title_terms):
            by_doc.setdefault(chunk.doc_id, set(title)).update(terms)
        self.doc_terms = [by_doc[c.doc_id] for c in chunks]

    def _proximity(self, passage: list[str], present: set[str], n_wanted: int) -> float:
        if len(present) < 2:
            return len(present) / max(n_wanted, 1)
        positions: dict[str, list[int]] = {}
        for i, term in enumerate(passage):
            if term in present:
                positions.setdefault(term, []).append(i)
        return len(present) / min_window(positions)

    def matrix(
        self,
        query: Query,
        hits: Hits,
        stages: dict[str, Hits],
        similarity: np.ndarray | None = None,
    ) -> np.ndarray:
        """One row per candidate; ``similarity`` is the encoder's cosine per candidate (0 when
        the pipeline has no encoder)."""
        if similarity is None:
            similarity = np.zeros(len(hits))
        query_terms = self.analyzer.terms(query.text)
        wanted = set(query_terms)
        total = self.weights.total(wanted) or 1.0
        query_pairs = set(zip(query_terms, query_terms[1:]))
        stage_scores = {name: _normalised_scores(h) for name, h in stages.items()}
        rows = []
        for rank, position in enumerate(hits.index):
            passage = self.terms[position]
            present = wanted & set(passage)
            pairs = set(zip(passage, passage[1:]))
            rows.append(
                [
                    1.0 / (1.0 + rank),
                    self.weights.total(present) / total,
                    self._proximity(passage, present, len(wanted)),
                    len(query_pairs & pairs) / len(query_pairs) if query_pairs else 0.0,
                    self.weights.total(wanted & self.title_terms[position]) / total,
                    stage_scores.get("bm25", {}).get(int(position), 0.0),
                    stage_scores.get("dense", {}).get(int(position), 0.0),
                    fuzzy_coverage(wanted, set(passage) | self.title_terms[position]),
                    self.weights.total(wanted & self.doc_terms[position]) / total,
                    float(similarity[rank]),
                ]
            )
        return np.array(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))


def _normalised_scores(hits: Hits) -> dict[int, float]:
    """A retriever's scores scaled to [0, 1] within one query's candidates."""
    if len(hits) == 0:
        return {}
    low, high = hits.score.min(), hits.score.max()
    scaled = (hits.score - low) / (high - low) if high > low else np.ones(len(hits))
    return dict(zip(hits.index.tolist(), scaled.tolist()))


def linear(matrix: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``matrix @ weights`` without BLAS: numpy's own row sums, in a fixed order."""
    return (matrix * weights[None, :]).sum(axis=1)


def encoder_similarity(index, queries: Sequence[Query], heads: Sequence[Hits]) -> list[np.ndarray]:
    """The cosine between each query's embedding and each of its candidates' embeddings
    (unit-length vectors, so a dot product), from a dense ``index``'s encoder and embeddings."""
    vectors = np.asarray(index.encoder.encode([q.text for q in queries]), dtype=np.float64)
    chunks = index.embeddings
    return [linear(chunks[head.index].astype(np.float64), v) for v, head in zip(vectors, heads)]


def reorder(hits: Hits, head_scores: np.ndarray) -> Hits:
    """Sort the first ``len(head_scores)`` candidates by score; the rest keep their order below."""
    n = len(head_scores)
    order = np.lexsort((np.arange(n), -head_scores))
    tail = hits.index[n:]
    floor = (head_scores.min() if n else 0.0) - 1.0 - np.arange(len(tail))
    return Hits(np.r_[hits.index[:n][order], tail], np.r_[head_scores[order], floor])


def check_top_n(top_n: int) -> None:
    if top_n < 1:
        raise UsageError(f"reranker.top_n={top_n} is below 1", "rerank at least the top 1, e.g. 30")


@component(
    "reranker",
    "proximity",
    description="fixed blend of coverage, proximity, word pairs, title and first-stage rank",
)
class ProximityReranker(Reranker):
    capabilities = frozenset({Capability.PREPARE})

    def __init__(
        self,
        top_n: int = 30,
        prior: float = 0.35,
        coverage: float = 1.0,
        proximity: float = 0.3,
        pairs: float = 0.3,
        title: float = 0.2,
    ):
        check_top_n(top_n)
        self.top_n = top_n
        self.weights = np.array([prior, coverage, proximity, pairs, title, 0, 0, 0, 0, 0], float)

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.features = PassageFeatures(chunks, analyzer)

    def rerank_all(
        self, queries: Sequence[Query], candidates: Sequence[Hits], stages: Sequence[dict]
    ) -> list[Hits]:
        out = []
        for query, hits, retrieved in zip(queries, candidates, stages):
            head = hits.top(self.top_n)
            matrix = self.features.matrix(query, head, retrieved)
            out.append(reorder(hits, linear(matrix, self.weights)))
        return out


@component(
    "reranker",
    "ltr",
    description="pairwise logistic regression on passage features, learnt from a train split "
    "or cross-fitted over query folds",
)
class LearnedReranker(Reranker):
    """``train_split``: ``auto`` learns from ``qrels/train.tsv`` when the dataset has one and
    cross-fits otherwise; a split name must exist; ``none`` always cross-fits.
    ``train_qrels``: the judgements it learns from: ``evaluated`` (those the run is scored on)
    or a qrels version of the dataset's (``base``, a number, a sha256 prefix; see
    docs/qrels.md), so that a run on a new version can keep the model an earlier run learnt."""

    # the fold models are trained on the run's other queries: reranking needs them all at once
    capabilities = frozenset(
        {
            Capability.PREPARE,
            Capability.LEARNS_ACROSS_QUERIES,
            Capability.USES_ENCODER,
            Capability.LEARNS_FROM_SPLIT,
        }
    )
    train_queries: list[Query] = []  # noqa: RUF012 (set per instance by prepare)

    def __init__(
        self,
        top_n: int = 30,
        folds: int = 5,
        seed: int = 0,
        c: float = 1.0,
        train_split: str = "auto",
        train_qrels: str = "evaluated",
    ):
        check_top_n(top_n)
        if folds < 2:
            raise UsageError(
                f"reranker.folds={folds} is below 2", "cross-fitting needs at least 2 folds"
            )
        self.top_n, self.folds, self.seed, self.c = top_n, folds, seed, c
        self.train_split = str(train_split)
        self.train_qrels = str(train_qrels)
        self.index = None  # the pipeline's dense index, when it has one
        self.model: np.ndarray | None = None  # weights learnt from the train split
        self.train_queries: list[Query] = []

    def attach_encoder(self, index) -> None:
        self.index = index

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.features = PassageFeatures(chunks, analyzer)
        self.chunks = chunks
        self.grades = self._judgements(dataset)
        self.train_queries = self._training_split(dataset)

    def _judgements(self, dataset: Dataset) -> dict[str, dict[str, int]]:
        """The judgements the model learns from (``train_qrels``)."""
        if self.train_qrels == "evaluated":
            return dataset.qrels.to_dict()
        return use_qrels(dataset, self.train_qrels).qrels.to_dict()

    def _training_split(self, dataset: Dataset) -> list[Query]:
        """The queries of the train split (none when cross-fitting); their grades join
        ``self.grades``. Evaluated queries never train: they are left out of the split."""
        split = "train" if self.train_split == "auto" else self.train_split
        path = dataset.path / "qrels" / f"{split}.tsv"
        evaluated = Path(str(dataset.qrels.source)).resolve()
        if self.train_split == "auto" and (not path.is_file() or path.resolve() == evaluated):
            return []  # no split of its own: cross-fit
        if self.train_split == "none":
            return []
        if not path.is_file():
            raise DataError(
                path,
                f"no qrels for reranker.train_split={split!r}",
                "use a split the dataset has, or reranker.train_split=none to cross-fit",
            )
        grades = load_qrels(path).to_dict()
        everything, _ = load_queries(dataset.path / "queries.jsonl")
        chosen = [
            everything[q] for q in sorted(grades) if q in everything and q not in dataset.queries
        ]
        if not chosen:
            raise UsageError(
                f"reranker.train_split={split!r} has no query apart from the evaluated ones",
                "train on another split, or reranker.train_split=none to cross-fit",
            )
        for query in chosen:
            self.grades[query.id] = grades[query.id]
        self.split = split
        return chosen

    @property
    def training(self) -> dict:
        """Where the model's labels came from (for the manifest and ``show``)."""
        if self.train_queries:
            return {
                "labels": "train split",
                "split": self.split,
                "queries": len(self.train_queries),
            }
        cross = {"labels": "cross-fitted on the evaluated queries", "folds": self.folds}
        if self.train_qrels != "evaluated":
            cross["qrels"] = self.train_qrels
        return cross

    def fold(self, query_id: str) -> int:
        """A query's fold, from a hash of its id: stable whatever else is in the run."""
        digest = hashlib.sha256(f"{self.seed}:{query_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.folds

    def _matrices(
        self, queries: Sequence[Query], candidates: Sequence[Hits], stages: Sequence[dict]
    ) -> list[np.ndarray]:
        heads = [h.top(self.top_n) for h in candidates]
        similarity = (
            encoder_similarity(self.index, queries, heads)
            if self.index is not None
            else [None] * len(heads)
        )
        return [
            self.features.matrix(q, h, s, sim)
            for q, h, s, sim in zip(queries, heads, stages, similarity)
        ]

    def learn(
        self, queries: Sequence[Query], candidates: Sequence[Hits], stages: Sequence[dict]
    ) -> None:
        """Fit the model on the train split's queries and their first-stage candidates."""
        matrices = self._matrices(queries, candidates, stages)
        labels = [self._labels(q, h) for q, h in zip(queries, candidates)]
        self.model = self._fit(list(range(len(queries))), matrices, labels)

    def rerank_all(
        self, queries: Sequence[Query], candidates: Sequence[Hits], stages: Sequence[dict]
    ) -> list[Hits]:
        matrices = self._matrices(queries, candidates, stages)
        if self.train_queries:
            learnt = [self._score(self.model, m) for m in matrices]
            return [reorder(h, s) for h, s in zip(candidates, learnt)]
        labels = [self._labels(q, h) for q, h in zip(queries, candidates)]
        folds = np.array([self.fold(q.id) for q in queries])
        scores: list[np.ndarray | None] = [None] * len(queries)
        for f in range(self.folds):
            model = self._fit([i for i in range(len(queries)) if folds[i] != f], matrices, labels)
            for i in np.flatnonzero(folds == f):
                scores[i] = self._score(model, matrices[i])
        done = [s for s in scores if s is not None]
        assert len(done) == len(scores)  # every query is in one fold
        return [reorder(h, s) for h, s in zip(candidates, done)]

    @staticmethod
    def _score(weights: np.ndarray | None, matrix: np.ndarray) -> np.ndarray:
        if len(matrix) == 0:
            return np.zeros(0)
        if weights is None:  # nothing to learn from: keep the first-stage order
            return matrix[:, 0]
        return linear(matrix, weights)

    def _labels(self, query: Query, candidates: Hits) -> np.ndarray:
        judged = self.grades.get(query.id, {})
        head = candidates.index[: self.top_n]
        return np.array([judged.get(self.chunks[p].doc_id, 0) >= 1 for p in head], dtype=int)

    def _fit(self, train: list[int], matrices, labels) -> np.ndarray | None:
        """Pairwise logistic regression (RankSVM-style): learn w so that w·(relevant − other)
        > 0 for every pair of candidates of one query; order, not calibration, is what counts.
        Returns w (None when no query has both relevant and other candidates)."""
        from sklearn.linear_model import LogisticRegression

        pairs = []
        for i in train:
            relevant = labels[i] == 1
            if not 0 < relevant.sum() < len(relevant):
                continue  # nothing to order within this query
            good, bad = matrices[i][relevant], matrices[i][~relevant]
            pairs.append((good[:, None, :] - bad[None, :, :]).reshape(-1, good.shape[1]))
        if not pairs:
            return None
        x = np.vstack(pairs)
        x, y = np.vstack([x, -x]), np.r_[np.ones(len(x)), np.zeros(len(x))]
        with one_blas_thread():
            model = LogisticRegression(C=self.c, max_iter=2000, fit_intercept=False).fit(x, y)
        return model.coef_[0].astype(np.float64)
