"""Term rarity over a chunk collection, shared by the generator and the reranker."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


class TermWeights:
    """BM25-style inverse document frequency of each analyzed term across the chunks."""

    def __init__(self, chunk_terms: Sequence[Sequence[str]]):
        df: dict[str, int] = {}
        for terms in chunk_terms:
            for term in set(terms):
                df[term] = df.get(term, 0) + 1
        n = len(chunk_terms)
        self.idf = {t: float(np.log(1 + (n - d + 0.5) / (d + 0.5))) for t, d in df.items()}
        self.unseen = float(np.log(1 + (n + 0.5) / 0.5))

    def __getitem__(self, term: str) -> float:
        return self.idf.get(term, self.unseen)

    def total(self, terms) -> float:
        """The weights' sum, exactly rounded: the same whatever order a set of terms iterates
        in (which changes with Python's hash seed from one process to the next)."""
        return math.fsum(self[t] for t in terms)
