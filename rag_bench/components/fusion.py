"""Fusing the rankings of several retrievers into one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag_bench.components.base import Fuser
from rag_bench.components.registry import component
from rag_bench.errors import UsageError
from rag_bench.model import Hits


def _accumulate(contributions: Sequence[tuple[np.ndarray, np.ndarray]], depth: int) -> Hits:
    if not contributions:
        return Hits(np.zeros(0, np.int64), np.zeros(0))
    index = np.concatenate([i for i, _ in contributions])
    values = np.concatenate([v for _, v in contributions])
    unique, inverse = np.unique(index, return_inverse=True)
    return Hits.ranked(unique, np.bincount(inverse, weights=values), depth)


@component("fuser", "rrf", description="reciprocal rank fusion: sum of 1 / (k + rank)")
class ReciprocalRankFusion(Fuser):
    def __init__(self, k: int = 60):
        if k < 0:
            raise UsageError(f"fusion.k={k} is negative", "use the usual k = 60")
        self.k = k

    def fuse(self, rankings: Sequence[Hits], depth: int) -> Hits:
        parts = [(h.index, 1.0 / (self.k + np.arange(1, len(h) + 1))) for h in rankings]
        return _accumulate(parts, depth)


@component(
    "fuser",
    "weighted",
    description="weighted sum of min-max normalised scores",
)
class WeightedScoreFusion(Fuser):
    def __init__(self, weights: Sequence[float] = (0.5, 0.5)):
        self.weights = tuple(float(w) for w in weights)

    def fuse(self, rankings: Sequence[Hits], depth: int) -> Hits:
        if len(rankings) != len(self.weights):
            raise UsageError(
                f"fusion.weights has {len(self.weights)} weights for {len(rankings)} retrievers",
                "give one weight per retriever, e.g. --set fusion.weights=0.7,0.3",
            )
        parts = []
        for hits, weight in zip(rankings, self.weights):
            if len(hits) == 0:
                continue
            low, high = hits.score.min(), hits.score.max()
            span = high - low
            normalised = (hits.score - low) / span if span > 0 else np.ones(len(hits))
            parts.append((hits.index, weight * normalised))
        return _accumulate(parts, depth)
