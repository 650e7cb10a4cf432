"""Rerankers reorder the top candidates of the first stage.

Both built-in rerankers need no model download. They describe each (query, passage) pair by
the signals a cross-encoder learns implicitly: how much of the query's rarity-weighted
vocabulary the passage covers, how close together the matched terms stand, whether the query's
word pairs occur as pairs, whether the title matches, and what each first-stage retriever
thought of it.

- ``proximity`` blends those features with fixed weights; it needs no labels.
- ``ltr`` learns the blend from relevance labels (pairwise logistic regression) with
  cross-fitting: the queries are split into folds and each fold is scored by a model trained on
  the other folds only, so no query is ever scored by a model that saw its own labels.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from rag_bench.components.base import Capability, Reranker
from rag_bench.components.registry import component
from rag_bench.components.termstats import TermWeights
from rag_bench.data.dataset import Dataset
from rag_bench.errors import UsageError
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

    def matrix(self, query: Query, hits: Hits, stages: dict[str, Hits]) -> np.ndarray:
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
        self.weights = np.array([prior, coverage, proximity, pairs, title, 0.0, 0.0, 0.0, 0.0])

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.features = PassageFeatures(chunks, analyzer)

    def rerank_all(
        self, queries: Sequence[Query], candidates: Sequence[Hits], stages: Sequence[dict]
    ) -> list[Hits]:
        out = []
        for query, hits, retrieved in zip(queries, candidates, stages):
            head = hits.top(self.top_n)
            out.append(reorder(hits, self.features.matrix(query, head, retrieved) @ self.weights))
        return out


@component(
    "reranker",
    "ltr",
    description="pairwise logistic regression on passage features, cross-fitted over query folds",
)
class LearnedReranker(Reranker):
    # the fold models are trained on the run's other queries: reranking needs them all at once
    capabilities = frozenset({Capability.PREPARE, Capability.LEARNS_ACROSS_QUERIES})

    def __init__(self, top_n: int = 30, folds: int = 5, seed: int = 0, c: float = 1.0):
        check_top_n(top_n)
        if folds < 2:
            raise UsageError(
                f"reranker.folds={folds} is below 2", "cross-fitting needs at least 2 folds"
            )
        self.top_n, self.folds, self.seed, self.c = top_n, folds, seed, c

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.features = PassageFeatures(chunks, analyzer)
        self.chunks = chunks
        self.grades = dataset.qrels.to_dict()

    def fold(self, query_id: str) -> int:
        """A query's fold, from a hash of its id: stable whatever else is in the run."""
        digest = hashlib.sha256(f"{self.seed}:{query_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.folds

    def rerank_all(
        self, queries: Sequence[Query], candidates: Sequence[Hits], stages: Sequence[dict]
    ) -> list[Hits]:
        heads = [h.top(self.top_n) for h in candidates]
        matrices = [self.features.matrix(q, h, s) for q, h, s in zip(queries, heads, stages)]
        labels = [self._labels(q, h) for q, h in zip(queries, heads)]
        folds = np.array([self.fold(q.id) for q in queries])
        scores: list[np.ndarray | None] = [None] * len(queries)
        for f in range(self.folds):
            model = self._fit([i for i in range(len(queries)) if folds[i] != f], matrices, labels)
            for i in np.flatnonzero(folds == f):
                if len(matrices[i]) == 0:
                    scores[i] = np.zeros(0)
                elif model is None:  # nothing to learn from: keep the first-stage order
                    scores[i] = matrices[i][:, 0]
                else:
                    scores[i] = model.decision_function(matrices[i])
        return [reorder(h, s) for h, s in zip(candidates, scores)]

    def _labels(self, query: Query, head: Hits) -> np.ndarray:
        judged = self.grades.get(query.id, {})
        return np.array([judged.get(self.chunks[p].doc_id, 0) >= 1 for p in head.index], dtype=int)

    def _fit(self, train: list[int], matrices, labels):
        """Pairwise logistic regression (RankSVM-style): learn w so that w·(relevant − other)
        > 0 for every pair of candidates of one query; order, not calibration, is what counts."""
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
        return LogisticRegression(C=self.c, max_iter=2000, fit_intercept=False).fit(x, y)
