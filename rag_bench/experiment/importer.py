"""Scoring a system that already exists: its outputs (what it retrieved and answered, per query)
are replayed through the ``recorded`` components and stored as an ordinary run on the dataset's
own hash, so ``compare`` pairs it with any variant run on the same dataset."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd

from rag_bench.components.registry import VariantSpec
from rag_bench.data.dataset import Dataset, load_dataset
from rag_bench.data.outputs import Outputs, load_outputs, outputs_from
from rag_bench.errors import UsageError
from rag_bench.experiment.runner import (
    DEFAULT_KS,
    RunResult,
    evaluate_variant,
    run_variant,
)

IMPORT_VARIANT = "import"


def replay_spec(name: str, outputs: Outputs, judge: str, judge_params: dict | None) -> VariantSpec:
    """The variant that replays ``outputs``: the recorded chunker, retriever and generator,
    judged by ``judge``."""
    if not name or name == "all" or "," in name:
        raise UsageError(f"the name {name!r} cannot name a variant", "give a name like my-system")
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
