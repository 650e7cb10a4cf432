"""Rankings: a TREC run file, or the ranked lists a pipeline produced."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.io.tabular import ID, SCORE, TEXT_ID, Field, RecordFormat, read_records

TREC_RUN = RecordFormat(
    what="TREC run",
    n_fields=6,
    fields=(Field("query_id", 0, ID), Field("doc_id", 2, TEXT_ID), Field("score", 4, SCORE)),
    unique=("query_id", "doc_id"),  # trec_eval rejects a document retrieved twice for a query
    layout_hint="query-id Q0 doc-id rank score run-tag",
    trailing=True,  # trec_eval ignores whatever follows the run tag
)


@dataclass(frozen=True)
class Run:
    """Retrieved documents per query: columns query_id (categorical), doc_id and score.

    ``doc_id`` is categorical in runs built in memory and Arrow-backed strings in runs read from
    a file (millions of nearly distinct ids, not worth a dictionary); either kind is accepted.

    ``ordered`` says whether row order within a query is the ranking (a pipeline's own output).
    Otherwise the ranking is trec_eval's: score descending, ties broken by doc id descending;
    the rank column of a run file is ignored.
    """

    frame: pd.DataFrame
    ordered: bool = False
    source: str = "<memory>"

    @classmethod
    def from_rankings(cls, rankings: Mapping[str, Sequence[str]]) -> Run:
        """Build an ordered run from ``{query_id: [doc ids, best first]}``.

        Repeated documents within a query keep their first occurrence only, so a ranking of
        chunks collapsed to documents never counts a document twice.
        """
        query_ids: list[str] = []
        doc_ids: list[str] = []
        for qid, ranking in rankings.items():
            unique = list(dict.fromkeys(str(d) for d in ranking))
            query_ids.extend([str(qid)] * len(unique))
            doc_ids.extend(unique)
        n = len(doc_ids)
        frame = pd.DataFrame(
            {
                "query_id": pd.Categorical(query_ids),
                "doc_id": pd.Categorical(doc_ids),
                "score": np.arange(n, 0, -1, dtype=np.float64),
            }
        )
        return cls(frame, ordered=True)

    @classmethod
    def from_scores(cls, scores: Mapping[str, Mapping[str, float]]) -> Run:
        """Build an unordered run from ``{query_id: {doc_id: score}}`` (the pytrec_eval shape)."""
        rows = [(q, d, float(s)) for q, docs in scores.items() for d, s in docs.items()]
        frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
        frame["query_id"] = pd.Categorical(frame["query_id"].astype(str))
        frame["doc_id"] = pd.Categorical(frame["doc_id"].astype(str))
        return cls(frame, ordered=False)

    def query_ids(self) -> list[str]:
        return sorted(self.frame["query_id"].unique().astype(str))

    def __len__(self) -> int:
        return len(self.frame)


def load_run(path: str | Path) -> Run:
    """Load a TREC run file (``qid Q0 docid rank score tag``)."""
    return Run(read_records(path, TREC_RUN), ordered=False, source=str(path))
