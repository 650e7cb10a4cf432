"""Corpus-derived word alternatives for paraphrased questions.

A word's alternative is its nearest neighbour among the corpus's terms in a latent semantic
space (a truncated SVD of the document × term tf-idf matrix): words used in the same documents
as the word, such as ``tariff`` for ``tax`` in a corpus of debates. No synonym table and no
outside resource: what a paraphrase may say instead comes from the corpus itself. The SVD
starts from a fixed vector, so the alternatives are the same from run to run.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

WORD = re.compile(r"(?<![\w-])[A-Za-z][a-z]{2,}(?![\w-])")
DIMENSIONS = 100
MIN_DF = 2  # a term in fewer documents has no usable neighbourhood
MAX_DF_SHARE = 0.2  # a term in more documents says little
MIN_SIMILARITY = 0.3  # below this the neighbour is no stand-in for the word


class Lexicon:
    """Nearest corpus terms of a term, and the surface word each term is most often written
    as. Built from the corpus's texts with the analyzer the pipeline uses."""

    def __init__(self, texts: Sequence[str], analyzer):
        from scipy.sparse import csr_matrix

        self.analyzer = analyzer
        surfaces: dict[str, Counter] = defaultdict(Counter)
        stem_of: dict[str, str | None] = {}
        rows: list[Counter] = []
        for text in texts:
            counts: Counter = Counter()
            for word in WORD.findall(text):
                lower = word.lower()
                if lower not in stem_of:
                    terms = analyzer.terms(lower)
                    stem_of[lower] = terms[0] if len(terms) == 1 else None
                stem = stem_of[lower]
                if stem is not None:
                    counts[stem] += 1
                    surfaces[stem][lower] += 1
            rows.append(counts)
        df = Counter(t for row in rows for t in row)
        n = len(rows)
        kept = sorted(
            t for t, d in df.items() if d >= MIN_DF and d <= max(MIN_DF, MAX_DF_SHARE * n)
        )
        self.terms = kept
        self.index = {t: i for i, t in enumerate(kept)}
        self.surface = {
            t: min(surfaces[t].items(), key=lambda kv: (-kv[1], kv[0]))[0] for t in kept
        }
        data, cols, ptr = [], [], [0]
        for row in rows:
            for term, count in sorted(row.items()):
                if term in self.index:
                    cols.append(self.index[term])
                    data.append((1 + np.log(count)) * np.log(n / df[term]))
            ptr.append(len(cols))
        matrix = csr_matrix((data, cols, ptr), shape=(n, len(kept)), dtype=np.float64)
        self.vectors = self._term_vectors(matrix)

    @staticmethod
    def _term_vectors(matrix) -> np.ndarray:
        rank = min(DIMENSIONS, min(matrix.shape) - 1)
        if rank < 2:
            return np.zeros((matrix.shape[1], 0))
        if min(matrix.shape) <= 2 * DIMENSIONS:
            _, s, vt = np.linalg.svd(matrix.toarray(), full_matrices=False)
            s, vt = s[:rank], vt[:rank]
        else:
            from scipy.sparse.linalg import svds

            start = np.full(min(matrix.shape), 1 / np.sqrt(min(matrix.shape)))
            _, s, vt = svds(matrix, k=rank, v0=start, solver="arpack")
        vectors = (vt.T * s).astype(np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def alternative(self, word: str, avoid: set[str]) -> str | None:
        """The surface word of the corpus term nearest to ``word``'s term, none of whose terms
        is in ``avoid`` (the source passage's and the question's terms); None when there is no
        neighbour close enough."""
        terms = self.analyzer.terms(word.lower())
        if len(terms) != 1 or terms[0] not in self.index or self.vectors.shape[1] == 0:
            return None
        similarity = self.vectors @ self.vectors[self.index[terms[0]]]
        for i in np.argsort(-similarity, kind="stable")[:20]:
            if similarity[i] < MIN_SIMILARITY:
                return None
            term = self.terms[i]
            if term != terms[0] and term not in avoid:
                return self.surface[term]
        return None
