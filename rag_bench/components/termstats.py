"""Term rarity over a chunk collection, shared by the generator and the reranker."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

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

    def write(self, path: Path) -> None:
        """The weights as JSON (floats written so that they read back bit for bit)."""
        data = {"unseen": self.unseen, "idf": self.idf}
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> TermWeights:
        data = json.loads(path.read_text(encoding="utf-8"))
        weights = cls.__new__(cls)
        weights.idf, weights.unseen = data["idf"], data["unseen"]
        return weights
