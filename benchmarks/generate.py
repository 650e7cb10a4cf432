"""Generate a large synthetic TREC run and its qrels, deterministically from a seed.

The run has ``--queries`` queries (ids ``1`` .. ``N``) with ``--docs-per-query`` distinct documents
each, drawn from a corpus of ``--corpus-size`` ids (``d0`` .. ``d<size-1>``, unpadded). Scores fall
with rank and are rounded to 4 decimals, so some documents tie. The qrels judge 50-100 documents
per query, mostly from the top 100 of the run (as pooling would), graded 0..3 with relevance more
likely near the top; a few run queries have no judgements and a few judged queries are not in
the run. Files are written with pyarrow's CSV writer from vectorised numpy arrays.

    python benchmarks/generate.py --queries 1000 --out /tmp/small
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

DATA_DIR = Path(__file__).resolve().parent / "data"
RUN_FILE, QRELS_FILE, PARAMS_FILE = "run.trec", "qrels.trec", "params.json"
POOL_DEPTH = 100  # judged documents come mostly from this many top-ranked ones
UNJUDGED_SHARE = 0.03  # run queries without any judgement
MISSING_SHARE = 0.01  # judged queries absent from the run (relative to the run's queries)


@dataclass(frozen=True)
class Params:
    """Everything that determines the generated files."""

    seed: int = 0
    queries: int = 10_000
    docs_per_query: int = 1_000
    corpus_size: int = 1_000_000

    def default_dir(self) -> Path:
        name = f"s{self.seed}-q{self.queries}-d{self.docs_per_query}-c{self.corpus_size}"
        return DATA_DIR / name


def distinct_docs(rng: np.random.Generator, rows: int, per_row: int, corpus: int) -> np.ndarray:
    """A ``rows x per_row`` matrix of corpus ids, distinct within each row, in random order."""
    if per_row > corpus:
        raise ValueError("docs per query exceeds the corpus size")
    extra = max(16, int(4 * per_row * per_row / corpus) + 16)  # covers expected collisions
    while True:
        draw = np.sort(rng.integers(0, corpus, size=(rows, per_row + extra)), axis=1)
        repeat = np.zeros(draw.shape, dtype=bool)
        repeat[:, 1:] = draw[:, 1:] == draw[:, :-1]
        if (draw.shape[1] - repeat.sum(axis=1) >= per_row).all():
            break
        extra *= 2
    draw[repeat] = corpus  # a sentinel that sorts last
    draw = np.sort(draw, axis=1)[:, :per_row]
    return rng.permuted(draw, axis=1)


def ranked_scores(rng: np.random.Generator, rows: int, per_row: int) -> np.ndarray:
    """Descending scores per row, rounded to 4 decimals (small gaps round to ties)."""
    top = rng.uniform(15.0, 30.0, size=(rows, 1))
    gaps = rng.exponential(0.005, size=(rows, per_row))
    gaps[:, 0] = 0.0
    return np.round(top - np.cumsum(gaps, axis=1), 4)


def grades(rng: np.random.Generator, p_relevant: np.ndarray) -> np.ndarray:
    """0 with probability ``1 - p_relevant``, else 1, 2 or 3 (1 most likely)."""
    relevant = rng.random(p_relevant.shape) < p_relevant
    level = rng.choice(np.array([1, 2, 3]), size=p_relevant.shape, p=[0.5, 0.3, 0.2])
    return np.where(relevant, level, 0)


def pooled_judgements(rng, docs: np.ndarray, corpus: int):
    """Judge 50-100 documents per run query: ~80% from the pool, the rest from the corpus.

    Returns flat (query index, doc id, grade) arrays, unique per (query, doc).
    """
    rows, depth = docs.shape[0], min(POOL_DEPTH, docs.shape[1])
    n_judged = rng.integers(50, 101, size=rows)
    n_pool = np.minimum(np.round(n_judged * 0.8).astype(np.int64), depth)
    ranks = np.argsort(rng.random((rows, depth)), axis=1)  # a random subset of the pool per row
    take = np.arange(depth) < n_pool[:, None]
    pool_q = np.broadcast_to(np.arange(rows)[:, None], ranks.shape)[take]
    pool_rank = ranks[take]
    pool_doc = docs[pool_q, pool_rank]
    pool_grade = grades(rng, 0.05 + 0.45 * np.exp(-pool_rank / 25.0))

    n_other = n_judged - n_pool
    other_q = np.repeat(np.arange(rows), n_other)
    other_doc = rng.integers(0, corpus, size=len(other_q))
    other_grade = grades(rng, np.full(len(other_q), 0.05))
    return unique_pairs(
        np.concatenate([pool_q, other_q]),
        np.concatenate([pool_doc, other_doc]),
        np.concatenate([pool_grade, other_grade]),
        corpus,
    )


def unique_pairs(qidx: np.ndarray, doc: np.ndarray, grade: np.ndarray, corpus: int):
    """Keep the first judgement of each (query, doc), grouped by query."""
    _, first = np.unique(qidx.astype(np.int64) * (corpus + 1) + doc, return_index=True)
    return qidx[first], doc[first], grade[first]


def build(params: Params):
    """All arrays of the run and the qrels; query indices are 0-based, ids are index + 1."""
    rng = np.random.default_rng(params.seed)
    n, per, corpus = params.queries, params.docs_per_query, params.corpus_size
    docs = distinct_docs(rng, n, per, corpus)
    scores = ranked_scores(rng, n, per)
    j_q, j_doc, j_grade = pooled_judgements(rng, docs, corpus)

    judged = rng.random(n) >= UNJUDGED_SHARE
    keep = judged[j_q]
    j_q, j_doc, j_grade = j_q[keep], j_doc[keep], j_grade[keep]

    n_missing = int(round(n * MISSING_SHARE))
    m_count = rng.integers(50, 101, size=n_missing)
    m_q = n + np.repeat(np.arange(n_missing), m_count)
    m_doc = rng.integers(0, corpus, size=len(m_q))
    m_q, m_doc, m_grade = unique_pairs(m_q, m_doc, grades(rng, np.full(len(m_q), 0.15)), corpus)

    run = {"qidx": np.repeat(np.arange(n), per), "doc": docs.ravel(), "score": scores.ravel()}
    qrels = {
        "qidx": np.concatenate([j_q, m_q]),
        "doc": np.concatenate([j_doc, m_doc]),
        "grade": np.concatenate([j_grade, m_grade]),
    }
    return run, qrels, n + n_missing


def id_column(prefix: str, codes: np.ndarray, n_ids: int, offset: int = 0) -> pa.Array:
    """Dictionary-encoded string ids ``prefix + str(code + offset)``, built once per id."""
    numbers = pc.cast(pa.array(np.arange(offset, n_ids + offset)), pa.string())
    names = pc.binary_join_element_wise(prefix, numbers, "") if prefix else numbers
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), names)


def constant(value: str, n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value]))


def write_table(path: Path, columns: dict[str, pa.Array]) -> None:
    options = pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    pacsv.write_csv(pa.table(columns), path, options)


def write_files(out: Path, params: Params) -> None:
    """Write ``run.trec`` and ``qrels.trec`` into ``out``."""
    run, qrels, n_query_ids = build(params)
    rows, per = len(run["qidx"]), params.docs_per_query
    write_table(
        out / RUN_FILE,
        {
            "qid": id_column("", run["qidx"], n_query_ids, offset=1),
            "q0": constant("Q0", rows),
            "doc": id_column("d", run["doc"], params.corpus_size),
            "rank": pa.array(np.tile(np.arange(1, per + 1, dtype=np.int32), params.queries)),
            "score": pa.array(run["score"]),
            "tag": constant("synthetic", rows),
        },
    )
    write_table(
        out / QRELS_FILE,
        {
            "qid": id_column("", qrels["qidx"], n_query_ids, offset=1),
            "iter": constant("0", len(qrels["qidx"])),
            "doc": id_column("d", qrels["doc"], params.corpus_size),
            "grade": pa.array(qrels["grade"].astype(np.int8)),
        },
    )


def ensure(params: Params, out: Path | None = None, *, quiet: bool = False) -> Path:
    """The directory holding files for ``params``, generating them unless already there."""
    out = Path(out) if out else params.default_dir()
    stamp = out / PARAMS_FILE
    files_there = (out / RUN_FILE).is_file() and (out / QRELS_FILE).is_file()
    if files_there and stamp.is_file() and json.loads(stamp.read_text()) == asdict(params):
        if not quiet:
            print(f"reusing {out}")
        return out
    out.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    start = time.perf_counter()
    write_files(out, params)
    stamp.write_text(json.dumps(asdict(params), indent=2) + "\n")
    if not quiet:
        print(f"generated {out} in {time.perf_counter() - start:.1f} s")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Params()
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--queries", type=int, default=defaults.queries)
    parser.add_argument("--docs-per-query", type=int, default=defaults.docs_per_query)
    parser.add_argument("--corpus-size", type=int, default=defaults.corpus_size)


def params_from(args: argparse.Namespace) -> Params:
    return Params(args.seed, args.queries, args.docs_per_query, args.corpus_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument(
        "--out", type=Path, help="output folder (default: benchmarks/data/<params>)"
    )
    args = parser.parse_args()
    ensure(params_from(args), args.out)


if __name__ == "__main__":
    main()
