"""Scoring a system that already exists: its outputs (what it retrieved and answered, per query)
are replayed through the ``recorded`` components and stored as an ordinary run on the dataset's
own hash, so ``compare`` pairs it with any variant run on the same dataset."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd

from rag_bench.components.registry import VariantSpec, registry
from rag_bench.data.dataset import Dataset, load_dataset
from rag_bench.data.outputs import Outputs, load_outputs, outputs_from
from rag_bench.errors import UsageError
from rag_bench.experiment.runner import (
    DEFAULT_KS,
    RunResult,
    dropped_record,
    evaluate_variant,
    run_variant,
)

IMPORT_VARIANT = "import"


def check_name(name: str) -> None:
    """Refuse a name that cannot name an imported system's variant: empty, a list, ``all``, or
    a variant rag-bench runs (``latest:<that variant>`` would then find the import)."""
    if not name or name == "all" or "," in name:
        raise UsageError(f"the name {name!r} cannot name a variant", "give a name like my-system")
    if name != IMPORT_VARIANT and name in registry().variants:
        raise UsageError(
            f"the name {name!r} is taken by a variant rag-bench runs",
            f"give the imported system a name of its own, e.g. {name}-import",
        )


def replay_spec(name: str, outputs: Outputs, judge: str, judge_params: dict | None) -> VariantSpec:
    """The variant that replays ``outputs``: the recorded chunker, retriever and generator,
    judged by ``judge``."""
    check_name(name)
    generator: dict[str, Any] = {"name": "recorded"}
    if outputs.context_k is not None:
        generator["context_k"] = outputs.context_k
    return VariantSpec(
        name,
        {
            "chunker": {"name": "recorded"},
            "retriever": {"name": "recorded"},
            "generator": generator,
            "judge": {"name": judge, **(judge_params or {})},
        },
        f"outputs imported from {outputs.path.name}",
        origin="import",
    )


def _spent(outputs: Outputs) -> dict[str, float]:
    """What the system reported spending: mean and 95th-percentile latency and the total cost,
    over the records that give them (none when no record does)."""
    import numpy as np

    latency = [a.latency_ms for a in outputs.answers.values() if a.latency_ms is not None]
    cost = [a.cost_usd for a in outputs.answers.values() if a.cost_usd is not None]
    spent: dict[str, float] = {}
    if latency:
        spent["latency_ms_mean"] = round(float(np.mean(latency)), 3)
        spent["latency_ms_p95"] = round(float(np.percentile(latency, 95)), 3)
    if cost:
        spent["cost_usd_total"] = round(float(np.sum(cost)), 6)
    return spent


DROPPED_IDS_KEPT = 100  # the manifest names this many of the dropped documents


def dropped_retrieved(outputs: Outputs) -> dict:
    """What the manifest says of retrieved documents left out as outside the corpus."""
    if not outputs.dropped:
        return {}
    return {
        "dropped": {
            "retrieved": sum(outputs.dropped.values()),
            "documents": len(outputs.dropped),
            "ids": sorted(outputs.dropped)[:DROPPED_IDS_KEPT],
        }
    }


def _depth(outputs: Outputs, ks) -> int:
    """Deep enough to keep every recorded ranking whole."""
    return max(max(len(a.ranking) for a in outputs.answers.values()), max(ks), 1)


def import_outputs(
    outputs: str | Path,
    dataset: Dataset | str | Path | None = None,
    *,
    name: str = IMPORT_VARIANT,
    judge: str = "lexical",
    judge_params: dict[str, Any] | None = None,
    note: str | None = None,
    ks=DEFAULT_KS,
    runs_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    drop_unknown: bool = False,
) -> tuple[RunResult, Outputs]:
    """Score an outputs file (see :mod:`rag_bench.data.outputs`) like a pipeline run and store
    it as the variant ``name``: ranking metrics on the dataset's qrels, the answers split into
    claims and judged by ``judge`` against the recorded passages (or the retrieved documents),
    failure classes. Evaluated queries without a record are left out and listed in the
    manifest (``outputs.missing``). With ``drop_unknown``, judgements naming documents the
    corpus lacks and retrieved documents outside the corpus are left out and counted (see
    :func:`~rag_bench.data.dataset.load_dataset`, :func:`~rag_bench.data.outputs.load_outputs`).
    Returns the stored run and the outputs read."""
    check_name(name)
    if isinstance(dataset, Dataset):
        data = dataset
    else:
        data = load_dataset(dataset, drop_unknown=drop_unknown)
    read = load_outputs(outputs, data.docs, data.queries, drop_unknown)
    annotations = {
        "outputs": {
            "file": read.path.name,
            "sha256": read.sha256,
            "n_records": len(read.answers),
            "missing": list(read.missing),
            **dropped_retrieved(read),
            **_spent(read),
        },
        "name": name,
        "note": note,
    }
    result = run_variant(
        replay_spec(name, read, judge, judge_params),
        dataclasses.replace(data, answers=read.answers),
        ks=ks,
        depth=_depth(read, ks),
        runs_dir=runs_dir,
        cache_dir=cache_dir,
        annotations=annotations,
    )
    return result, read


def evaluate_outputs(
    dataset: Dataset | str | Path | None,
    records,
    *,
    judge: str = "lexical",
    judge_params: dict[str, Any] | None = None,
    ks=DEFAULT_KS,
    drop_unknown: bool = False,
) -> dict[str, pd.DataFrame]:
    """Score outputs given in memory (a list of record dicts, or a DataFrame with one row per
    query, as in the outputs file format) exactly as an import would, and store nothing: the
    trace tables ``queries``, ``metrics``, ``retrieved`` and ``claims`` as DataFrames."""
    if isinstance(dataset, Dataset):
        data = dataset
    else:
        data = load_dataset(dataset, drop_unknown=drop_unknown)
    read = outputs_from(records, data.docs, data.queries, drop_unknown)
    return evaluate_variant(
        replay_spec(IMPORT_VARIANT, read, judge, judge_params),
        dataclasses.replace(data, answers=read.answers),
        ks=ks,
        depth=_depth(read, ks),
    )


def import_scores(
    path,
    dataset: Dataset | str | Path | None = None,
    *,
    name: str,
    tool: str | None = None,
    system: str | None = None,
    note: str | None = None,
    runs_dir: str | Path | None = None,
    drop_unknown: bool = False,
) -> RunResult:
    """Store the scores another tool already computed (a ragas result table, a DeepEval test
    run, a promptfoo output; see :mod:`rag_bench.data.scores`) as a run of the variant
    ``name``, one metric per score (``ragas:faithfulness``), so that compare, diff, gate and
    report pair it with another import of the same queries. ``path`` is the result file, or
    a ragas result as a DataFrame (``EvaluationResult.to_pandas()``). ``dataset`` names the queries
    (matched by id or question text); None: the file's own questions are the queries, and a
    second file over the same questions pairs with it. ``system`` picks one provider and prompt
    of a promptfoo file that holds several."""
    from rag_bench.data.scores import frame_scores, load_scores

    data = _scores_dataset(dataset, drop_unknown)
    queries = data.queries if data else None
    if hasattr(path, "columns"):  # a ragas result as a DataFrame (EvaluationResult.to_pandas())
        read = frame_scores(path, queries, drop_unknown)
    else:
        read = load_scores(path, queries, tool, system, drop_unknown)
    return store_scores(read, data, name=name, note=note, runs_dir=runs_dir)


def _scores_dataset(dataset, drop_unknown: bool) -> Dataset | None:
    if dataset is None or isinstance(dataset, Dataset):
        return dataset
    return load_dataset(dataset, drop_unknown=drop_unknown)


def store_scores(read, data: Dataset | None, *, name: str, note=None, runs_dir=None) -> RunResult:
    """Write :class:`~rag_bench.data.scores.PeerScores` as a run (see :func:`import_scores`)."""
    import time
    from datetime import datetime, timezone

    from rag_bench.runs import open_runs

    _check_name(name)
    started, created = time.perf_counter(), datetime.now(timezone.utc)
    store = open_runs(runs_dir)
    run_id = store.reserve_run_id(name, created)
    try:
        return _write_scores(store, run_id, read, data, name, note, created, started)
    finally:
        store.release_run_id(run_id)


def _write_scores(store, run_id, read, data, name, note, created, started) -> RunResult:
    import time

    from rag_bench import __version__
    from rag_bench.experiment.provenance import git_commit, package_versions
    from rag_bench.runs import SCHEMA_VERSION

    tables = scores_tables(run_id, read, data)
    manifest = {
        "run_id": run_id,
        "schema_version": SCHEMA_VERSION,
        "variant": name,
        "variant_origin": "import",
        "params": {"scores": {"name": read.tool}},
        "dataset": _scores_dataset_record(read, data),
        "selection": {"query_ids": list(read.scores)},
        "ks": [],
        "judge": None,
        "created_at": created.isoformat(timespec="microseconds"),
        "status": "complete",
        "rag_bench_version": __version__,
        "packages": package_versions(),
        "git_commit": git_commit(),
        "name": name,
        "note": note,
        "scores": {
            "tool": read.tool,
            "file": read.path.name,
            "sha256": read.sha256,
            "n_records": len(read.scores),
            "metrics": list(read.metrics),
            "missing": list(read.missing),
            "unmatched_records": list(read.unmatched),
        },
    }
    manifest["duration_s"] = round(time.perf_counter() - started, 3)
    return RunResult(store, store.write_run(run_id, manifest, tables), tables)


def _check_name(name: str) -> None:
    if not name or name == "all" or "," in name:
        raise UsageError(f"the name {name!r} cannot name a variant", "give a name like my-system")


def _scores_dataset_record(read, data: Dataset | None) -> dict:
    """The dataset the scores are on: the one given, else the file's questions (hashed, so
    two files over the same questions are on the same dataset)."""
    if data is not None:
        return {
            "name": data.name,
            "path": str(data.path),
            "sha256": data.sha256,
            "n_docs": len(data.docs),
            "n_queries": len(data.queries),
            **dropped_record(data),
        }
    import hashlib

    texts = "\n".join(sorted(f"{q}\t{t}" for q, t in read.questions.items()))
    sha256 = hashlib.sha256(texts.encode()).hexdigest()
    return {
        "name": f"questions-{sha256[:8]}",
        "path": None,
        "sha256": sha256,
        "n_docs": 0,
        "n_queries": len(read.questions),
    }


def scores_tables(run_id: str, read, data: Dataset | None) -> dict[str, pd.DataFrame]:
    """The trace tables of imported scores: a queries row and one metrics row per score of
    each query (NULL, status ``undefined``, where the tool gave none); no rankings, no claims."""
    from rag_bench.model import UNCATEGORIZED
    from rag_bench.runs.layout import file_schema

    grades = data.qrels.to_dict() if data is not None else {}
    queries, metrics = [], []
    for query_id, record in read.scores.items():
        query = data.queries[query_id] if data is not None else None
        category = query.category if query else UNCATEGORIZED
        queries.append(
            {
                "run_id": run_id,
                "query_id": query_id,
                "category": category,
                "tags": list(query.tags) if query else [],
                "should_refuse": bool(query.should_refuse) if query else False,
                "query": query.text if query else read.questions.get(query_id),
                "answer": record.answer,
                "n_relevant": sum(1 for g in grades.get(query_id, {}).values() if g >= 1)
                if query
                else None,
            }
        )
        for metric in read.metrics:
            value = record.scores.get(metric)
            metrics.append(
                {
                    "run_id": run_id,
                    "query_id": query_id,
                    "category": category,
                    "metric": metric,
                    "value": value,
                    "status": "ok" if value is not None else "undefined",
                }
            )
    columns = ["run_id", *file_schema("queries").names]
    queries_frame = pd.DataFrame(
        [{c: row.get(c) for c in columns} for row in queries], dtype=object
    )
    tables = {"queries": queries_frame, "metrics": pd.DataFrame(metrics)}
    return tables
