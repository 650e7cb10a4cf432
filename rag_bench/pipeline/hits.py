"""Ranked candidate lists: chunk positions with scores, best first."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Hits:
    """One query's ranked chunks: positions into the chunk list, and their scores."""

    index: np.ndarray  # int64
    score: np.ndarray  # float64

    def __len__(self) -> int:
        return len(self.index)

    @staticmethod
    def ranked(index: np.ndarray, score: np.ndarray, depth: int | None = None) -> Hits:
        """Order by score descending, ties by chunk position ascending (corpus order)."""
        index = np.asarray(index, dtype=np.int64)
        score = np.asarray(score, dtype=np.float64)
        order = np.lexsort((index, -score))
        if depth is not None:
            order = order[:depth]
        return Hits(index[order], score[order])

    def top(self, n: int) -> Hits:
        return Hits(self.index[:n], self.score[:n])


def top_k_rows(scores: np.ndarray, depth: int, positive_only: bool = False) -> list[Hits]:
    """The best ``depth`` columns of each row of a query × chunk score matrix."""
    n_cols = scores.shape[1]
    depth = min(depth, n_cols)
    out = []
    for row in scores:
        if depth < n_cols:
            candidates = np.argpartition(-row, depth - 1)[:depth]
            # include every column tied with the last kept score, so ties break by position
            threshold = row[candidates].min()
            candidates = np.flatnonzero(row >= threshold)
        else:
            candidates = np.arange(n_cols)
        if positive_only:
            candidates = candidates[row[candidates] > 0]
        out.append(Hits.ranked(candidates, row[candidates], depth))
    return out
