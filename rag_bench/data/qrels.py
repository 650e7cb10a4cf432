"""Relevance judgements (qrels): which documents are relevant to which query, and how much."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.errors import DataError
from rag_bench.io.tabular import COMMENT, GRADE, ID, Field, RecordFormat, read_records

TREC_QRELS = RecordFormat(
    what="TREC qrels",
    n_fields=4,
    fields=(Field("query_id", 0, ID), Field("doc_id", 2, ID), Field("grade", 3, GRADE)),
    unique=("query_id", "doc_id"),
    layout_hint="query-id 0 doc-id grade",
)
BEIR_QRELS = RecordFormat(
    what="BEIR qrels",
    n_fields=3,
    fields=(Field("query_id", 0, ID), Field("doc_id", 1, ID), Field("grade", 2, GRADE)),
    unique=("query_id", "doc_id"),
    layout_hint="query-id<TAB>corpus-id<TAB>score, after a header line",
    header=True,
)
PLAIN_QRELS = RecordFormat(
    what="qrels",
    n_fields=3,
    fields=BEIR_QRELS.fields,
    unique=BEIR_QRELS.unique,
    layout_hint="query-id corpus-id grade",
)


@dataclass(frozen=True)
class Qrels:
    """Graded judgements: a frame with columns query_id, doc_id (categorical) and grade (int)."""

    frame: pd.DataFrame
    source: str = "<memory>"

    @classmethod
    def from_records(cls, records: Iterable[tuple[str, str, int]]) -> Qrels:
        rows = list(records)
        frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"])
        return cls._from_frame(frame)

    @classmethod
    def from_dict(cls, judgements: Mapping[str, Mapping[str, int]]) -> Qrels:
        """Build from ``{query_id: {doc_id: grade}}`` (the pytrec_eval shape)."""
        return cls.from_records(
            (qid, did, int(grade))
            for qid, docs in judgements.items()
            for did, grade in docs.items()
        )

    @classmethod
    def _from_frame(cls, frame: pd.DataFrame, source: str = "<memory>") -> Qrels:
        frame = pd.DataFrame(
            {
                "query_id": pd.Categorical(frame["query_id"].astype(str)),
                "doc_id": pd.Categorical(frame["doc_id"].astype(str)),
                "grade": frame["grade"].to_numpy(dtype=np.int64),
            }
        )
        return cls(frame, source)

    def query_ids(self) -> list[str]:
        return sorted(self.frame["query_id"].unique().astype(str))

    def subset(self, query_ids) -> Qrels:
        """The judgements of the given queries only."""
        keep = self.frame["query_id"].astype(str).isin(set(query_ids)).to_numpy()
        return Qrels._from_frame(self.frame[keep], self.source)

    def relevant(self, query_id: str, rel_level: int = 1) -> dict[str, int]:
        """The documents graded at least ``rel_level`` for one query, with their grades."""
        rows = self.frame[(self.frame["query_id"] == query_id) & (self.frame["grade"] >= rel_level)]
        return dict(zip(rows["doc_id"].astype(str), rows["grade"].astype(int)))

    def to_dict(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for qid, did, grade in self.frame.itertuples(index=False):
            out.setdefault(str(qid), {})[str(did)] = int(grade)
        return out

    def __len__(self) -> int:
        return len(self.frame)


def _qrels_format(path: Path) -> RecordFormat:
    """TREC qrels have four fields; BEIR TSV qrels three, after a ``query-id`` header. Comment
    lines (``#``) say nothing about the format."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            fields = raw.removeprefix(b"\xef\xbb\xbf").split(maxsplit=4)
            if not fields or fields[0].startswith(COMMENT.encode()):
                continue
            if fields[0].lower() in (b"query-id", b"query_id", b"qid"):
                return BEIR_QRELS  # a header line: BEIR TSV, whatever else the line holds
            if len(fields) == 4:
                return TREC_QRELS
            if len(fields) == 3:
                try:
                    int(fields[2])
                except ValueError:
                    return BEIR_QRELS
                return PLAIN_QRELS
            raise DataError(
                path,
                f"a qrels line has 3 fields (BEIR) or 4 (TREC), this one has "
                f"{len(fields) if len(fields) < 4 else 'more than 4'}",
                f"write each line as '{TREC_QRELS.layout_hint}' or '{PLAIN_QRELS.layout_hint}'",
                number,
            )
    raise DataError(
        path, "the qrels file has no records", f"each line is: {TREC_QRELS.layout_hint}"
    )


def load_qrels(path: str | Path, allow_empty: bool = False) -> Qrels:
    """Load TREC qrels (``qid iter docid grade``) or BEIR TSV qrels (with header); with
    ``allow_empty``, a BEIR file of its header line alone judges nothing."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "no such qrels file", "check the path")
    frame = read_records(path, _qrels_format(path), allow_empty)
    return Qrels(frame, str(path))
