"""Scoring a system that already exists: its outputs (what it retrieved and answered, per query)
are replayed through the ``recorded`` components and stored as an ordinary run on the dataset's
own hash, so ``compare`` pairs it with any variant run on the same dataset."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rag_bench.components.registry import VariantSpec
from rag_bench.data.dataset import Dataset, load_dataset
from rag_bench.data.outputs import Outputs, load_outputs
from rag_bench.errors import UsageError
from rag_bench.experiment.runner import DEFAULT_KS, RunResult, run_variant

IMPORT_VARIANT = "import"


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
) -> tuple[RunResult, Outputs]:
    """Score an outputs file (see :mod:`rag_bench.data.outputs`) like a pipeline run and store
    it as the variant ``name``: ranking metrics on the dataset's qrels, the answers split into
    claims and judged by ``judge`` against the recorded passages (or the retrieved documents),
    failure classes. Evaluated queries without a record are left out and listed in the
    manifest (``outputs.missing``). Returns the stored run and the outputs read."""
    if not name or name == "all" or "," in name:
        raise UsageError(f"the name {name!r} cannot name a variant", "give a name like my-system")
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    read = load_outputs(outputs, data.docs, data.queries)
    replay = dataclasses.replace(data, answers=read.answers)
    generator: dict[str, Any] = {"name": "recorded"}
    if read.context_k is not None:
        generator["context_k"] = read.context_k
    spec = VariantSpec(
        name,
        {
            "chunker": {"name": "recorded"},
            "retriever": {"name": "recorded"},
            "generator": generator,
            "judge": {"name": judge, **(judge_params or {})},
        },
        f"outputs imported from {Path(outputs).name}",
        origin="import",
    )
    annotations = {
        "outputs": {
            "file": Path(outputs).name,
            "sha256": read.sha256,
            "n_records": len(read.answers),
            "missing": list(read.missing),
        },
        "note": note,
    }
    result = run_variant(
        spec,
        replay,
        ks=ks,
        depth=max(max(len(a.ranking) for a in read.answers.values()), max(ks)),
        runs_dir=runs_dir,
        cache_dir=cache_dir,
        annotations=annotations,
    )
    return result, read
