"""Ranked candidate lists: chunk positions with scores, best first."""

from __future__ import annotations

import numpy as np

from rag_bench.model import Hits


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
