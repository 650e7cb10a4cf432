"""Fusing the rankings of several retrievers into one.

- ``rrf``: reciprocal rank fusion, each retriever's ``1 / (k + rank)`` times its weight.
- ``weighted``: a weighted sum of each retriever's scores brought to one scale, by min-max
  (``normalisation=minmax``) or by standard deviations (``zscore``). Both scales start at the
  list's lowest score, so a candidate a retriever did not return counts as its worst.

The defaults (equal weights, min-max) and why: docs/components.md, "Fusion".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag_bench.components.base import Fuser
from rag_bench.components.registry import component
from rag_bench.errors import UsageError
from rag_bench.model import Hits

NORMALISATIONS = ("minmax", "zscore")


def _accumulate(contributions: Sequence[tuple[np.ndarray, np.ndarray]], depth: int) -> Hits:
    if not contributions:
        return Hits(np.zeros(0, np.int64), np.zeros(0))
    index = np.concatenate([i for i, _ in contributions])
    values = np.concatenate([v for _, v in contributions])
    unique, inverse = np.unique(index, return_inverse=True)
    return Hits.ranked(unique, np.bincount(inverse, weights=values), depth)


def _weights(weights: Sequence[float]) -> tuple[float, ...]:
    out = tuple(float(w) for w in weights)
    if any(w < 0 for w in out):
        raise UsageError(
            f"fusion.weights={','.join(map(str, out))} has a negative weight",
            "use weights >= 0, e.g. --set fusion.weights=0.6,0.4",
        )
    return out


def _check_count(weights: tuple[float, ...], rankings: Sequence[Hits]) -> None:
    if len(rankings) != len(weights):
        raise UsageError(
            f"fusion.weights has {len(weights)} weights for {len(rankings)} retrievers",
            "give one weight per retriever (sparse first), e.g. --set fusion.weights=0.6,0.4",
        )


@component("fuser", "rrf", description="reciprocal rank fusion: weighted sum of 1 / (k + rank)")
class ReciprocalRankFusion(Fuser):
    """``weights``: one per retriever, in the variant's order (sparse, then dense); none
    given = 1 each."""

    def __init__(self, k: int = 60, weights: Sequence[float] = ()):
        if k < 0:
            raise UsageError(f"fusion.k={k} is negative", "use the usual k = 60")
        self.k, self.weights = k, _weights(weights)

    def fuse(self, rankings: Sequence[Hits], depth: int) -> Hits:
        weights = self.weights or (1.0,) * len(rankings)
        _check_count(weights, rankings)
        parts = [
            (h.index, w / (self.k + np.arange(1, len(h) + 1))) for h, w in zip(rankings, weights)
        ]
        return _accumulate(parts, depth)


def rescale(scores: np.ndarray, normalisation: str) -> np.ndarray:
    """Scores on a common scale starting at 0 for the list's lowest: divided by their range
    (``minmax``, top = 1) or by their standard deviation (``zscore``); all 1 when all equal."""
    spread = scores.max() - scores.min() if normalisation == "minmax" else scores.std()
    if not spread > 0:
        return np.ones(len(scores))
    return (scores - scores.min()) / spread


@component(
    "fuser",
    "weighted",
    description="weighted sum of scores brought to one scale (min-max or z-score)",
)
class WeightedScoreFusion(Fuser):
    """``weights``: one per retriever, in the variant's order (sparse, then dense)."""

    def __init__(self, weights: Sequence[float] = (0.5, 0.5), normalisation: str = "minmax"):
        if normalisation not in NORMALISATIONS:
            raise UsageError(
                f"fusion.normalisation={normalisation!r} is unknown",
                f"use one of: {', '.join(NORMALISATIONS)}",
            )
        self.weights, self.normalisation = _weights(weights), normalisation

    def fuse(self, rankings: Sequence[Hits], depth: int) -> Hits:
        _check_count(self.weights, rankings)
        parts = [
            (hits.index, weight * rescale(hits.score, self.normalisation))
            for hits, weight in zip(rankings, self.weights)
            if len(hits)
        ]
        return _accumulate(parts, depth)
