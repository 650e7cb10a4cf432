"""How good a set of queries is, before anyone spends time reviewing it.

- **answerability**: the extractive generator (the baseline's) reads the query's source
  documents only; the share of answerable queries whose gold answer it finds in what it
  quotes (every key fact of the gold answer, else the gold answer as a phrase).
- **near-duplicates**: pairs of queries whose character 5-gram sets have a Jaccard similarity
  of at least ``near_duplicate``; the count and the closest pairs.
- **spread**: the documents the queries' qrels name over the corpus, the most used document's
  share of the queries, and the entropy of document use (bits; the most it could be is
  log2 of the smaller of references and corpus size).
- **difficulty**: the rank of the best-ranked relevant document under the ``baseline``
  variant's BM25 (rag-bench's own retriever, chunks collapsed to documents, ``depth``
  chunks deep): the median and the shares at rank 1 and in the top 10. A set where nearly
  everything is at rank 1 measures little.
- **power**: the queries a tier needs to detect each of ``effects`` (80 % power, two-sided
  0.05, paired; :func:`~rag_bench.evaluation.stats.queries_needed`). The spread is the observed
  per-query differences of two runs when given; otherwise it is assumed from this set's BM25
  reciprocal ranks: two variants whose per-query values correlate at 0.5 differ with the
  same standard deviation as one variant's values.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag_bench.data.dataset import Dataset
from rag_bench.evaluation.stats import minimum_detectable_effect, queries_needed
from rag_bench.model import Query

NEAR_DUPLICATE = 0.7
SHINGLE = 5
EXAMPLES = 3
TRIVIAL_SHARE = 0.8  # most queries at rank 1: the set is too easy to separate variants
SKEWED_SHARE = 0.2  # one document behind a fifth of the queries
EFFECTS = (0.05, 0.02)
ASSUMED = (
    "no runs given: the spread is this set's BM25 reciprocal ranks, assuming two variants' "
    "per-query values correlate at 0.5 (then their differences vary as one variant's values)"
)


def quality_report(
    data: Dataset,
    *,
    depth: int = 100,
    near_duplicate: float = NEAR_DUPLICATE,
    effects: Sequence[float] = EFFECTS,
    differences: Sequence[float] | None = None,
    differences_source: str = "",
    cache_dir: str | Path | None = None,
) -> dict:
    """The quality report of ``data``'s queries (see the module's docstring) as plain data.
    ``differences``: per-query differences of two runs over these queries (``differences_source``
    says which), for the power rows; without them the spread is assumed and said so."""
    queries = list(data.queries.values())
    grades = data.qrels.to_dict()
    ranks, answered = _retrieval(data, queries, grades, depth, cache_dir)
    report: dict = {
        "dataset": data.name,
        "queries": len(queries),
        "categories": dict(sorted(Counter(q.category for q in queries).items())),
        "answerability": _answerability(queries, answered),
        "near_duplicates": near_duplicates([q.text for q in queries], near_duplicate, queries),
        "spread": spread(grades, len(data.docs), len(queries)),
        "difficulty": difficulty(queries, ranks, depth),
    }
    reciprocal = [1 / r if r else 0.0 for r in ranks.values()]
    if differences is not None:
        values, note = np.asarray(differences, dtype=float), differences_source
    else:
        values, note = np.asarray(reciprocal, dtype=float), ASSUMED
    report["power"] = power(values, effects, note)
    report["flags"] = flags(report)
    return report


def _retrieval(data: Dataset, queries: list[Query], grades: dict, depth: int, cache_dir):
    """Each judged query's best relevant rank under baseline (None: not retrieved), and
    whether the extractive generator finds each gold answer in its source documents."""
    from rag_bench.components.registry import registry, resolve
    from rag_bench.experiment.traces import doc_ranking
    from rag_bench.io.cache import Cache, default_cache_dir
    from rag_bench.pipeline.compose import Pipeline

    resolved = resolve(registry().variant("baseline"))
    pipeline = Pipeline(resolved, Cache(Path(cache_dir) if cache_dir else default_cache_dir()))
    pipeline.index(data)
    # a query judged only non-relevant (an unanswerable one may be) has no document to rank
    judged = [q for q in queries if any(g > 0 for g in grades.get(q.id, {}).values())]
    stages, _ = pipeline.rank(judged, depth) if judged else ([], {})
    ranks: dict[str, int | None] = {}
    answered: dict[str, bool] = {}
    by_doc: dict[str, list[int]] = {}
    for position, chunk in enumerate(pipeline.chunks):
        by_doc.setdefault(chunk.doc_id, []).append(position)
    for query, stage in zip(judged, stages):
        hits = list(stage.values())[-1]
        docs, _ = doc_ranking(hits, pipeline.chunks)
        relevant = {d for d, g in grades[query.id].items() if g > 0}
        found = [i + 1 for i, d in enumerate(docs) if d in relevant]
        ranks[query.id] = min(found) if found else None
        if query.gold_answers and not query.should_refuse:
            order = {int(p): i for i, p in enumerate(hits.index)}
            positions = sorted(
                (p for d in sorted(relevant) for p in by_doc.get(d, [])),
                key=lambda p: (order.get(p, len(order)), p),
            )
            context = [pipeline.chunks[p] for p in positions]
            answer = pipeline.generator.generate(query, context).answer
            answered[query.id] = any(gold_found(g, answer) for g in query.gold_answers)
    return ranks, answered


def gold_found(gold: str, text: str) -> bool:
    """Whether ``text`` gives the gold answer: each of its key facts, or, when it has none,
    the answer as a phrase (case and spacing aside)."""
    from rag_bench.text.facts import key_facts

    facts = key_facts(gold)
    if facts:
        return all(f.found_in(text) for f in facts)
    squash = lambda s: re.sub(r"\W+", " ", s.lower()).strip()  # noqa: E731
    return f" {squash(gold)} " in f" {squash(text)} "


def _answerability(queries: list[Query], answered: dict[str, bool]) -> dict:
    by_category: dict[str, list[bool]] = {}
    for q in queries:
        if q.id in answered:
            by_category.setdefault(q.category, []).append(answered[q.id])
    every = [v for values in by_category.values() for v in values]
    return {
        "checked": len(every),
        "share": _share(sum(every), len(every)),
        "by_category": {c: _share(sum(v), len(v)) for c, v in sorted(by_category.items())},
        "unanswered": sorted(q for q, ok in answered.items() if not ok)[:EXAMPLES],
    }


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def near_duplicates(texts: Sequence[str], threshold: float, queries=None) -> dict:
    """Pairs of texts whose character 5-gram sets overlap (Jaccard) at ``threshold`` or more:
    how many, and the closest few."""
    from scipy.sparse import csr_matrix

    shingles: dict[str, int] = {}
    rows, cols = [], []
    for i, text in enumerate(texts):
        squashed = " ".join(text.lower().split())
        grams = {squashed[j : j + SHINGLE] for j in range(max(len(squashed) - SHINGLE + 1, 1))}
        for gram in grams:
            rows.append(i)
            cols.append(shingles.setdefault(gram, len(shingles)))
    n = len(texts)
    matrix = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, max(len(shingles), 1)))
    sizes = np.asarray(matrix.sum(axis=1)).ravel()
    shared = (matrix @ matrix.T).tocoo()
    pairs = []
    for i, j, common in zip(shared.row, shared.col, shared.data):
        if i < j:
            jaccard = common / (sizes[i] + sizes[j] - common)
            if jaccard >= threshold:
                pairs.append((float(jaccard), int(i), int(j)))
    pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
    ids = [q.id for q in queries] if queries is not None else list(range(n))
    return {
        "threshold": threshold,
        "pairs": len(pairs),
        "queries_in_pairs": len({i for _, a, b in pairs for i in (a, b)}),
        "examples": [
            {
                "jaccard": round(s, 4),
                "a": ids[a],
                "b": ids[b],
                "text_a": texts[a],
                "text_b": texts[b],
            }
            for s, a, b in pairs[:EXAMPLES]
        ],
    }


def spread(grades: dict[str, dict[str, int]], corpus_size: int, n_queries: int) -> dict:
    """How the queries' relevant documents spread over the corpus."""
    uses = Counter(d for judged in grades.values() for d, g in judged.items() if g > 0)
    total = sum(uses.values())
    entropy = -sum(c / total * math.log2(c / total) for c in uses.values()) if total else 0.0
    top = uses.most_common(1)
    with_docs = sum(1 for judged in grades.values() if any(g > 0 for g in judged.values()))
    return {
        "documents_used": len(uses),
        "corpus": corpus_size,
        "share_of_corpus": _share(len(uses), corpus_size),
        "top_document": top[0][0] if top else None,
        "top_document_share": _share(top[0][1], with_docs) if top else None,
        "entropy_bits": round(entropy, 4),
        "max_entropy_bits": round(math.log2(min(total, corpus_size)), 4) if total else 0.0,
    }


def difficulty(queries: list[Query], ranks: dict[str, int | None], depth: int) -> dict:
    """The best relevant rank under BM25: overall and per category."""

    def summary(ids: list[str]) -> dict:
        found = [r for r in (ranks[q] for q in ids) if r is not None]
        return {
            "queries": len(ids),
            "median_rank": float(np.median(found)) if found else None,
            "share_rank_1": _share(sum(r == 1 for r in found), len(ids)),
            "share_top_10": _share(sum(r <= 10 for r in found), len(ids)),
            "share_not_retrieved": _share(len(ids) - len(found), len(ids)),
        }

    judged = [q for q in queries if q.id in ranks]
    by_category: dict[str, list[str]] = {}
    for q in judged:
        by_category.setdefault(q.category, []).append(q.id)
    return {
        "retriever": "baseline (BM25)",
        "depth_chunks": depth,
        **summary([q.id for q in judged]),
        "by_category": {c: summary(ids) for c, ids in sorted(by_category.items())},
    }


def power(values: np.ndarray, effects: Sequence[float], source: str) -> dict:
    """The detectable effect at this set's size, and the queries needed per effect."""
    sd = float(values.std(ddof=1)) if len(values) > 1 else None
    return {
        "spread_from": source,
        "n": len(values),
        "sd": round(sd, 4) if sd is not None else None,
        "detectable_effect": _round(minimum_detectable_effect(values)),
        "queries_needed": {f"{e:g}": queries_needed(values, e) for e in effects},
    }


def _round(value: float) -> float | None:
    return round(value, 4) if np.isfinite(value) else None


def flags(report: dict) -> list[str]:
    """What a reviewer should know before trusting the set."""
    out = []
    first = report["difficulty"].get("share_rank_1")
    if first is not None and first >= TRIVIAL_SHARE:
        out.append(f"trivial: {first:.0%} of the queries find their document at rank 1")
    top = report["spread"].get("top_document_share")
    if top is not None and top >= SKEWED_SHARE:
        out.append(f"skewed: one document is behind {top:.0%} of the queries")
    if report["near_duplicates"]["pairs"]:
        out.append(f"near-duplicates: {report['near_duplicates']['pairs']} pairs")
    share = report["answerability"].get("share")
    if share is not None and share < 0.5:
        out.append(f"hard to answer: the source documents answer {share:.0%} of the queries")
    return out


def run_differences(
    store, ref_a: str, ref_b: str, metric: str = "ndcg@10"
) -> tuple[list[float], str]:
    """The per-query differences b − a of ``metric`` between two stored runs (queries both
    define it), and a line saying where they come from."""
    from rag_bench.errors import UsageError

    a, b = store.resolve(ref_a), store.resolve(ref_b)
    values = store.metrics([a, b])
    values = values[values["metric"] == metric]
    wide = values.pivot_table(index="query_id", columns="run_id", values="value", aggfunc="mean")
    if a not in wide or b not in wide:
        raise UsageError(f"the runs have no values of {metric}", "name a metric both runs have")
    d = (wide[b] - wide[a]).dropna()
    return [float(x) for x in d], f"observed: {metric} of {b} minus {a} over {len(d)} queries"
