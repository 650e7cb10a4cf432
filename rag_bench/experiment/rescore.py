"""Re-scoring a stored run on other qrels (or other gold answers) without running its pipeline.

The stored traces hold what the pipeline did: every stage's chunk ranking (``retrieved``), the
answer and refusal (``queries``), the claims and the judge's verdicts (``claims``). They are
turned back into the per-query results the pipeline returned, against the dataset's chunks
(the run's chunker, rerun: chunking is deterministic and cheap; nothing is retrieved,
generated or judged again), and evaluated by the same :func:`build_traces` a fresh run uses,
so every number equals that of a fresh run on the new qrels. The result is a new run whose
manifest names its source (``rescored_from``) and the qrels it was scored on (``qrels``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.components.base import Capability
from rag_bench.components.chunking import chunk_corpus
from rag_bench.components.registry import build, registry
from rag_bench.data.dataset import Dataset, load_dataset, load_queries
from rag_bench.data.qrels_versions import qrels_record, use_qrels
from rag_bench.data.selection import Selection
from rag_bench.data.user_queries import unlabelled_record, with_user_queries
from rag_bench.errors import DataError, UsageError
from rag_bench.experiment.runner import RunResult
from rag_bench.experiment.traces import build_traces
from rag_bench.model import Chunk, Claim, Generation, Hits, Query, QueryResult, Relevance, Verdict
from rag_bench.pipeline import DOCUMENTS_STAGE, LATENCY_STAGES
from rag_bench.runs import RunStore, open_runs
from rag_bench.runs.layout import REPEATED


def rescore_run(
    ref: str,
    *,
    qrels: str | Path | None = None,
    answers: str | Path | None = None,
    dataset: Dataset | str | Path | None = None,
    queries: str | Path | None = None,
    runs_dir: str | Path | RunStore | None = None,
    drop_unknown: bool = False,
    name: str | None = None,
    note: str | None = None,
) -> RunResult:
    """Score the stored run ``ref`` again, on the qrels ``qrels`` names (a version of the
    dataset's: ``latest``, ``base``, a number or a sha256 prefix; or a qrels file; None: the
    dataset's own) and, with ``answers`` (JSONL of ``_id`` with ``answer`` and/or ``answers``),
    against new gold answers; store it as a new run of the same variant. ``dataset`` is where
    the data is (default: where the run recorded it; its content must be the run's);
    ``queries`` the queries file of a run made with one."""
    started, created = time.perf_counter(), datetime.now(timezone.utc)
    store = open_runs(runs_dir)
    source = store.get(ref)
    manifest = source.manifest
    params = manifest.get("params") or {}
    if "chunker" not in params or (params["chunker"] or {}).get("name") == "recorded":
        raise UsageError(
            f"run {source.run_id} replays a system's outputs: its passages are not stored",
            "import the outputs again (rag-bench import) on a dataset with the new qrels",
        )
    data = _dataset(source.run_id, manifest, dataset, queries, drop_unknown)
    # a run stored before manifests named their qrels was scored on the dataset's own (its
    # content hash, checked above, covers them)
    manifest = {**manifest, "qrels": manifest.get("qrels") or qrels_record(data)}
    if qrels is not None:
        data = use_qrels(data, qrels, data.split, drop_unknown)
    if answers is not None:
        data = with_gold_answers(data, answers)
    data, query_list = _queries(data, manifest)
    tables = _tables(store, source.run_id)
    chunks = _chunks(params, data)
    analyzer = build("analyzer", params.get("analyzer", {"name": "en"}))
    judge = params.get("judge", {"name": "lexical"})
    relevance = Capability.RELEVANCE in _capabilities("judge", judge["name"])
    context_k = _context_k(params)
    position = {c.chunk_id: i for i, c in enumerate(chunks)}
    ks = manifest["ks"]
    variant = manifest["variant"]
    run_id = store.reserve_run_id(variant, created)
    try:
        built: dict[str, pd.DataFrame] | None = None
        for repeat in sorted(tables["queries"]["repeat"].unique()):
            results = _results(query_list, tables, int(repeat), position, context_k, relevance)
            more = build_traces(
                run_id, data, query_list, results, chunks, ks, analyzer, judge["name"], int(repeat)
            )
            built = more if built is None else _joined(built, more)
        assert built is not None
        record = {
            **{k: v for k, v in manifest.items() if k not in ("name", "note", "resumed")},
            "run_id": run_id,
            "dataset": {
                **{k: v for k, v in manifest["dataset"].items() if k != "unlabelled"},
                **unlabelled_record(query_list, data),
            },
            "qrels": qrels_record(data),
            "rescored_from": {
                "run_id": source.run_id,
                "qrels": manifest.get("qrels"),
                **({"answers_file": Path(answers).name} if answers is not None else {}),
            },
            "created_at": created.isoformat(timespec="microseconds"),
            **{k: v for k, v in (("name", name), ("note", note)) if v is not None},
        }
        record["params"] = kept_model(params, manifest, record["qrels"])
        record["duration_s"] = round(time.perf_counter() - started, 3)
        stored = store.write_run(run_id, record, built)
    finally:
        store.release_run_id(run_id)
    return RunResult(store, stored, built)


def kept_model(params: dict, manifest: dict, qrels: dict) -> dict:
    """The source run's parameters, saying what a learning reranker learnt from: one that
    learnt from the qrels it was scored on (``train_qrels=evaluated``) keeps that model when
    re-scored on other qrels, so the new run's ``train_qrels`` names the source's qrels (a run
    with these parameters on the new qrels is this run again)."""
    reranker = params.get("reranker") or {}
    before = (manifest.get("qrels") or {}).get("sha256")
    learns = reranker and Capability.LEARNS_FROM_SPLIT in _capabilities(
        "reranker", reranker["name"]
    )
    if not learns or reranker.get("train_qrels", "evaluated") != "evaluated":
        return params
    if before is None or before == qrels["sha256"]:
        return params
    return {**params, "reranker": {**reranker, "train_qrels": before}}


def _dataset(run_id: str, manifest: dict, dataset, queries, drop_unknown: bool) -> Dataset:
    recorded = manifest.get("dataset") or {}
    if isinstance(dataset, Dataset):
        data = dataset
    else:
        path = Path(dataset) if dataset is not None else Path(str(recorded.get("path")))
        if dataset is None and not path.is_dir():
            raise DataError(
                path,
                f"the dataset run {run_id} was made on is no longer here",
                "pass --dataset with the same data",
            )
        split = recorded.get("split") or "test"
        data = load_dataset(path, split=split, drop_unknown=drop_unknown or "dropped" in recorded)
    if "queries_file" in recorded:
        if queries is None:
            raise UsageError(
                f"run {run_id} ran the queries of {recorded['queries_file']['file']}",
                "give that file with --queries",
            )
        data = with_user_queries(data, queries)
    if data.sha256 != recorded.get("sha256"):
        raise UsageError(
            f"dataset {data.path} is not the data run {run_id} was made on "
            f"(sha256 {data.sha256[:12]}…, the run's {str(recorded.get('sha256'))[:12]}…)",
            "give --dataset the run's data (a copy is fine); new judgements go in --qrels",
        )
    return data


def with_gold_answers(data: Dataset, path: str | Path) -> Dataset:
    """``data`` with the gold answers of ``path`` (JSONL in the queries' form: ``_id`` and
    ``answer`` and/or ``answers``) in place of those its queries carry."""
    path = Path(path)
    given, _ = load_queries(path) if _has_text(path) else (_answers_only(path), None)
    unknown = [q for q in given if q not in data.queries]
    if unknown:
        raise DataError(
            path,
            f"query id {unknown[0]!r} is not a query of {data.name}",
            "correct the id (the file gives new gold answers of the dataset's queries)",
        )
    queries = dict(data.queries)
    for query_id, gold in given.items():
        queries[query_id] = dataclasses.replace(
            queries[query_id], answer=gold.answer, answers=gold.answers
        )
    return dataclasses.replace(data, queries=queries)


def _has_text(path: Path) -> bool:
    from rag_bench.io.jsonl import read_jsonl

    return all("text" in record for _, record in read_jsonl(path, "gold answers"))


def _answers_only(path: Path) -> dict[str, Query]:
    """Gold answers given without the query text: ``{"_id": ..., "answer": ...}`` lines."""
    from rag_bench.io.jsonl import field, read_jsonl

    out: dict[str, Query] = {}
    for line, record in read_jsonl(path, "gold answers"):
        query_id = field(record, "_id", str, path, line, required=True)
        answer = field(record, "answer", str, path, line)
        more = field(record, "answers", list, path, line, default=[])
        if not all(isinstance(a, str) and a.strip() for a in more) or not (answer or more):
            raise DataError(
                path,
                "a gold answer line needs a non-empty answer",
                'write {"_id": "q1", "answer": "..."} (or "answers": ["...", ...])',
                line,
            )
        out[query_id] = Query(query_id, "", answer=answer or more[0], answers=tuple(more))
    return out


def _queries(data: Dataset, manifest: dict) -> tuple[Dataset, list[Query]]:
    """The run's queries, in its order, as its selection made them (perturbed copies too); a
    query the new qrels no longer judge stays, without labels."""
    selection = {k: v for k, v in (manifest.get("selection") or {}).items() if k != "query_ids"}
    if "perturb" in selection:
        selection["perturb"] = tuple(selection["perturb"])
    chosen, _ = Selection(**selection).select(data) if selection else (data, [])
    ids = (manifest.get("selection") or {}).get("query_ids") or list(chosen.queries)
    every = load_queries(Path(data.path) / "queries.jsonl")[0] if data.provenance == {} else {}
    missing = [q for q in ids if q not in chosen.queries and q not in every]
    if missing:
        raise DataError(
            Path(data.path) / "queries.jsonl",
            f"query {missing[0]!r} of the run is not in the dataset",
            "give --dataset the run's data",
        )
    return chosen, [chosen.queries.get(q) or every[q] for q in ids]


def _tables(store: RunStore, run_id: str) -> dict[str, pd.DataFrame]:
    tables = {name: store.table(name, run_id) for name in ("queries", "retrieved", "claims")}
    tables["metrics"] = store.table("metrics", run_id)
    for name in REPEATED:
        if "repeat" not in tables[name]:
            tables[name]["repeat"] = 0
    if tables["retrieved"].empty:
        raise UsageError(
            f"run {run_id} stored no rankings (scores imported from another tool)",
            "only runs with rankings can be re-scored",
        )
    return tables


def _capabilities(kind: str, name: str) -> frozenset:
    spec = registry().component(kind, name)
    return getattr(spec.factory, "capabilities", frozenset())


def _chunks(params: dict, data: Dataset) -> list[Chunk]:
    chunker = build("chunker", params["chunker"])
    if Capability.READS_DATASET in getattr(chunker, "capabilities", frozenset()):
        chunker.read_dataset(data)
    return chunk_corpus(chunker, data.docs.values())


def _context_k(params: dict) -> int:
    generator = params.get("generator") or {"name": "extractive"}
    if "context_k" in generator:
        return int(generator["context_k"])
    return int(build("generator", generator).context_k)


def _none(value):
    return (
        None
        if value is None or (not isinstance(value, (list, np.ndarray)) and pd.isna(value))
        else value
    )


def _results(
    queries: Sequence[Query],
    tables: dict[str, pd.DataFrame],
    repeat: int,
    position: dict[str, int],
    context_k: int,
    relevance: bool,
) -> list[QueryResult]:
    """The per-query results of one repeat, as the pipeline returned them."""
    retrieved = tables["retrieved"]
    retrieved = retrieved[retrieved["stage"] != DOCUMENTS_STAGE]
    rows = tables["queries"][tables["queries"]["repeat"] == repeat].set_index("query_id")
    claims = tables["claims"][tables["claims"]["repeat"] == repeat]
    claims_of = {q: frame.sort_values("claim_id") for q, frame in claims.groupby("query_id")}
    metrics = tables["metrics"]
    relevance_of = (
        metrics[(metrics["repeat"] == repeat) & (metrics["metric"] == "answer_relevance")]
        .set_index("query_id")["value"]
        .to_dict()
    )
    stages_of = {q: frame for q, frame in retrieved.groupby("query_id", sort=False)}
    results = []
    for query in queries:
        stages = _stages(stages_of.get(query.id), position)
        row = rows.loc[query.id]
        generation = Generation(str(row["answer"]), bool(row["refused"]))
        found = claims_of.get(query.id)
        said = [] if found is None else list(found.itertuples(index=False))
        latency = {
            s: float(row[f"latency_ms_{s}"])
            for s in LATENCY_STAGES
            if _none(row.get(f"latency_ms_{s}")) is not None
        }
        graded = None
        if relevance and not generation.refused:
            value = _none(relevance_of.get(query.id))
            graded = Relevance(None if value is None else int(round(value * 2)), "")
        final = list(stages.values())[-1]
        results.append(
            QueryResult(
                stages,
                generation,
                [Claim(c.text, tuple(c.citations)) for c in said],
                [
                    Verdict(
                        None if _none(c.support_grade) is None else int(c.support_grade),
                        None if _none(c.supported) is None else bool(c.supported),
                        tuple(c.supported_by),
                        c.reason,
                    )
                    for c in said
                ],
                [int(p) for p in final.index[:context_k]],
                latency,
                graded,
            )
        )
    return results


def _stages(ranked: pd.DataFrame | None, position: dict[str, int]) -> dict[str, Hits]:
    """One query's chunk rankings per stage, in the order the pipeline made them (an empty
    ranking stores no rows: it comes back as an empty first stage)."""
    stages: dict[str, Hits] = {}
    if ranked is None:
        empty = Hits(np.array([], dtype=np.int64), np.array([], dtype=np.float64))
        return {"retrieve": empty}
    for stage in dict.fromkeys(ranked["stage"]):
        hits = ranked[ranked["stage"] == stage].sort_values("rank")
        unknown = [c for c in hits["chunk_id"] if c not in position]
        if unknown:
            raise UsageError(
                f"chunk {unknown[0]!r} the run ranked is not a chunk of the dataset now",
                "give --dataset the data the run was made on",
            )
        stages[stage] = Hits(
            np.array([position[c] for c in hits["chunk_id"]], dtype=np.int64),
            hits["score"].to_numpy(dtype=np.float64),
        )
    return stages


def _joined(tables: dict[str, pd.DataFrame], more: dict[str, pd.DataFrame]) -> dict:
    return {
        name: pd.concat([t, more[name]], ignore_index=True) if name in REPEATED else t
        for name, t in tables.items()
    }
