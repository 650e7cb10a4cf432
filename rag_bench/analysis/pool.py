"""Review items from stored runs: the unjudged pairs of their top k (a pooled review), and a
stratified sample of a run's claim verdicts (a person checks the judge).

Pool priority. A pair (query, document) that the qrels do not judge is scored by how much it
could move a comparison if a person judged it relevant (grade 1): for every two runs A and B,
the change it would make to nDCG@k(A) − nDCG@k(B) on its query, with the document added to the
query's ideal ranking too; the pair's priority is the largest such change over the pairs of
runs (one run: the change to its own nDCG@k). A document one run ranks high and the other does
not ranks first; one both runs rank alike changes nothing and comes last. A query without any
judgement (a production query) counts its nDCG as 0 before. Ties are broken by the best rank
any run gives the document, then query id, then document id, so the order is the same on every
machine.

Claim sample. A run's claims with a verdict are grouped into strata by verdict and the query's
failure class (``supported/ok``, ``unsupported/grounded_but_wrong``, ...). Every stratum gets
one claim, and the rest of the sample is shared in proportion to the strata's remaining sizes
by largest remainder (Hamilton's method; equal remainders go to the stratum first by name).
Within a stratum the claims are drawn without replacement by ``numpy.random.default_rng(seed)``
in stratum-name order, and the sample is then shuffled by the same generator, so that a person
does not label one stratum after another.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_bench.analysis.reads import claim_verdicts, top_documents
from rag_bench.data.dataset import SHIPPED, Dataset, load_dataset
from rag_bench.errors import RagBenchError, UsageError, check_number

POOL_GRADE = 1  # the grade a pair's priority supposes a person would give it
NO_CLASS = "none"  # the stratum name of a query without a failure class


def _discount(rank: int) -> float:
    return 1.0 / math.log2(rank + 1)


def _dcg(grades: Sequence[int], k: int) -> float:
    """The ideal DCG@k of these grades (trec_eval's ndcg_cut: the gain is the grade)."""
    best = sorted((g for g in grades if g > 0), reverse=True)[:k]
    return sum(g * _discount(i) for i, g in enumerate(best, start=1))


def pair_priorities(
    rankings: dict[str, dict[str, int]], judged: dict[str, int], k: int
) -> dict[str, float]:
    """For one query: each unjudged document of the runs' top ``k`` -> the largest change to
    a pair of runs' nDCG@k difference (one run: to its nDCG@k) if it were judged relevant.
    ``rankings`` maps run -> {document: rank} (the top k), ``judged`` document -> grade."""
    runs = list(rankings)
    ideal = _dcg(list(judged.values()), k)
    ideal_after = _dcg([*judged.values(), POOL_GRADE], k)
    dcg = {
        run: sum(judged.get(d, 0) * _discount(r) for d, r in ranked.items() if r <= k)
        for run, ranked in rankings.items()
    }
    before = {run: dcg[run] / ideal if ideal > 0 else 0.0 for run in runs}
    out: dict[str, float] = {}
    unjudged = {d for ranked in rankings.values() for d, r in ranked.items() if r <= k}
    for doc in sorted(unjudged - set(judged)):
        change = {}
        for run in runs:
            rank = rankings[run].get(doc)
            added = POOL_GRADE * _discount(rank) if rank is not None and rank <= k else 0.0
            change[run] = (dcg[run] + added) / ideal_after - before[run]
        if len(runs) == 1:
            out[doc] = abs(change[runs[0]])
        else:
            out[doc] = max(
                abs(change[a] - change[b]) for i, a in enumerate(runs) for b in runs[i + 1 :]
            )
    return out


def _runs_dataset(store, run_refs: Sequence[str], dataset: str | Path | None) -> tuple:
    """The stored runs and the dataset they ran on (``dataset`` names its folder; default:
    the runs' shipped dataset). The runs must share one dataset name."""
    runs = [store.get(ref) for ref in run_refs]
    names = sorted({r.dataset_name or "?" for r in runs})
    if len(names) != 1:
        raise UsageError(
            f"the runs are on different datasets ({', '.join(names)})",
            "pool runs of one dataset",
        )
    if dataset is None:
        if names[0] not in SHIPPED:
            raise UsageError(
                f"the runs are on dataset {names[0]!r}, which is not shipped",
                "give its folder with --dataset",
            )
        dataset = names[0]
    data = load_dataset(dataset)
    if data.name != names[0]:
        raise UsageError(
            f"the runs are on dataset {names[0]!r}, not {data.name!r}",
            "give the folder of the dataset the runs were scored on",
        )
    return runs, data


def _doc(data: Dataset, doc_id: str, run_id: str):
    doc = data.docs.get(doc_id)
    if doc is None:
        raise RagBenchError(
            f"run {run_id} retrieved document {doc_id!r}, which {data.path}/corpus.jsonl lacks",
            "give the dataset folder the run was made on with --dataset",
        )
    return doc


def pool_pairs(
    store, run_refs: Sequence[str], depth: int = 10, dataset: str | Path | None = None
) -> list[dict]:
    """The unjudged (query, document) pairs of the runs' top ``depth``, each once, as review
    items of kind ``pair``, highest priority first (see the module docstring). A pair is
    unjudged when the dataset's qrels (as they are now) hold no grade for it; every pair of a
    query the qrels do not know (a production query) is. Queries the dataset marks unanswerable
    (``should_refuse``) are left out: no document is relevant to them by definition, and
    their ranking metrics are not scored."""
    check_number("depth", depth, 1, whole=True)
    if not run_refs:
        raise UsageError("no runs to pool", "name one or more runs")
    runs, data = _runs_dataset(store, run_refs, dataset)
    ids = list(dict.fromkeys(r.run_id for r in runs))
    top = top_documents(store.connect(ids), ids, depth)
    top = top[top["should_refuse"].isna() | ~top["should_refuse"].astype("boolean").fillna(False)]
    grades = data.qrels.to_dict()
    items = []
    for query_id, rows in top.groupby("query_id", sort=True):
        rankings: dict[str, dict[str, int]] = {run: {} for run in ids}
        answers: dict[str, object] = {}
        for run_id, rank, doc_id, answer in rows[["run_id", "rank", "doc_id", "answer"]].itertuples(
            index=False
        ):
            rankings[run_id].setdefault(doc_id, int(rank))
            answers[run_id] = answer
        query = str(rows["query"].iloc[0])
        judged = grades.get(str(query_id), {})
        for doc_id, priority in pair_priorities(rankings, judged, depth).items():
            ranks = {run: ranked[doc_id] for run, ranked in rankings.items() if doc_id in ranked}
            best = min(ranks, key=lambda run: (ranks[run], ids.index(run)))
            doc = _doc(data, doc_id, best)
            answer = answers.get(best)
            items.append(
                {
                    "kind": "pair",
                    "dataset": data.name,
                    "query_id": str(query_id),
                    "query": query,
                    "doc_id": doc_id,
                    "doc_title": doc.title,
                    "doc_text": doc.text,
                    "answer": None if answer is None or pd.isna(answer) else str(answer),
                    "priority": round(priority, 12),
                    "runs": list(ranks),
                    "ranks": ranks,
                }
            )
    items.sort(key=lambda i: (-i["priority"], min(i["ranks"].values()), i["query_id"], i["doc_id"]))
    return items


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """How many of ``n`` to draw from each stratum of ``sizes``: one each, the rest in
    proportion to the sizes left (largest remainder, ties to the first name); all of every
    stratum when ``n`` covers them."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    names = sorted(sizes)
    if n < len(names):
        raise UsageError(
            f"a sample of {n} cannot hold one claim of each of the {len(names)} strata",
            f"sample at least {len(names)}",
        )
    rest, room = n - len(names), {s: sizes[s] - 1 for s in names}
    whole = sum(room.values())
    shares = {s: rest * room[s] / whole for s in names} if whole else dict.fromkeys(names, 0.0)
    counts = {s: 1 + math.floor(shares[s]) for s in names}
    left = n - sum(counts.values())
    by_remainder = sorted(names, key=lambda s: (-(shares[s] - math.floor(shares[s])), s))
    for s in by_remainder[:left]:
        counts[s] += 1
    return counts


def stratum(supported: bool, failure_class: object) -> str:
    """``supported/<failure class>`` or ``unsupported/<failure class>``."""
    verdict = "supported" if supported else "unsupported"
    failure = NO_CLASS if failure_class is None or pd.isna(failure_class) else str(failure_class)
    return f"{verdict}/{failure}"


def sample_verdicts(verdicts: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """A seeded sample of ``n`` of a run's claim verdicts (the frame of
    :func:`rag_bench.analysis.reads.claim_verdicts`), stratified by verdict and failure class
    (see the module docstring), with a ``stratum`` column; claims without a verdict are left
    out."""
    check_number("sample", n, 1, whole=True)
    judged = verdicts[verdicts["supported"].notna()].reset_index(drop=True)
    if judged.empty:
        raise UsageError("the run has no judged claims to sample", "run it with a judge")
    judged = judged.assign(
        stratum=[stratum(bool(s), f) for s, f in zip(judged["supported"], judged["failure_class"])]
    )
    groups = {name: rows.index.to_numpy() for name, rows in judged.groupby("stratum", sort=True)}
    counts = allocate({name: len(rows) for name, rows in groups.items()}, n)
    rng = np.random.default_rng(seed)
    chosen = []
    for name in sorted(groups):
        picked = rng.choice(len(groups[name]), size=counts[name], replace=False)
        chosen.extend(groups[name][np.sort(picked)])
    order = rng.permutation(len(chosen))
    return judged.loc[[chosen[i] for i in order]].reset_index(drop=True)


def sample_claims(
    store,
    run_ref: str,
    n: int,
    seed: int = 0,
    dataset: str | Path | None = None,
    context_docs: int = 3,
) -> list[dict]:
    """Review items of kind ``claim``: a stratified, seeded sample of ``n`` of a run's claim
    verdicts (:func:`sample_verdicts`). Each shows the documents the claim cites or the judge
    said support it, or else the top ``context_docs`` of the run's ranking."""
    check_number("context_docs", context_docs, 1, whole=True)
    (run,), data = _runs_dataset(store, [run_ref], dataset)
    con = store.connect([run.run_id])
    sample = sample_verdicts(claim_verdicts(con, run.run_id), n, seed)
    top = top_documents(con, [run.run_id], context_docs)
    ranked = top.groupby("query_id")["doc_id"].apply(list).to_dict()
    items = []
    for row in sample.itertuples(index=False):
        named = [*_ids(row.citations), *_ids(row.supported_by)]
        shown = list(dict.fromkeys(named)) or ranked.get(row.query_id, [])
        items.append(
            {
                "kind": "claim",
                "run_id": run.run_id,
                "query_id": str(row.query_id),
                "query": str(row.query),
                "claim_index": int(row.claim_id),
                "claim": str(row.text),
                "answer": "" if row.answer is None or pd.isna(row.answer) else str(row.answer),
                "context": [{"doc_id": d, "text": _doc(data, d, run.run_id).text} for d in shown],
                "judge_verdict": "supported" if row.supported else "unsupported",
                "stratum": row.stratum,
            }
        )
    return items


def _ids(values: Any) -> list[str]:
    """A stored list of document ids (an array, or None/NaN when absent) as strings."""
    if values is None or isinstance(values, float):
        return []
    return [str(v) for v in values]
