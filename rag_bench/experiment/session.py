"""Running and resuming from Python: what ``rag_bench.run`` and ``rag_bench.resume`` are.

They speak in parameters where the command line speaks in flags: component overrides as a
mapping (``{"retriever.k1": 1.2}``), the query selection as ``tier``, ``tag``, ``sample`` and
``seed``,
the executor by name. They build what the runner works with, close the executor afterwards and
return the stored runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_bench.components.registry import ALL_VARIANTS, registry
from rag_bench.data.dataset import Dataset, load_dataset
from rag_bench.data.selection import Selection
from rag_bench.experiment.runner import DEFAULT_KS, RunResult, resume_run, run_variant
from rag_bench.pipeline.executors import make_executor


def run(
    variant: str | Sequence[str],
    dataset: Dataset | str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    depth: int = 100,
    tier: str | None = None,
    tag: str | None = None,
    sample: int | None = None,
    perturb: Sequence[str] = (),
    seed: int = 0,
    split: str = "test",
    runs_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
    repeats: int = 1,
) -> RunResult | list[RunResult]:
    """Run a variant over ``dataset`` and store its traces under ``runs_dir``.

    ``variant`` is one name (returns its :class:`RunResult`), or a list of names or ``"all"``
    (every variant that needs nothing but the dataset, as ``--variant all``; returns a list, in
    order). ``dataset`` is a folder, a shipped dataset's name
    (``kestrel-kb``, ``lumen-mall-zh``, ``seed-example``) or a loaded :class:`Dataset`; None
    is kestrel-kb. ``overrides`` maps ``"slot.param"`` to a value, as in the manifest's
    params. ``tier`` (``smoke``, ``regression``, ``deep``; see :mod:`rag_bench.data.tiers`)
    keeps the queries of a tier, ``tag`` those carrying it; ``sample`` draws that many of them with
    ``seed``; ``perturb`` (e.g. ``["typo", "synonym"]``; see :mod:`rag_bench.data.perturb`) adds
    perturbed copies of each chosen query, drawn with ``seed``, for
    :func:`rag_bench.analysis.robustness.robustness`. ``executor`` is ``"local"`` (``workers``
    threads) or ``"ray"``. ``repeats`` answers each query that many times with distinct seeds of
    the sampling components (see :mod:`rag_bench.experiment.repeats`).
    """
    names = registry().variants_named(variant)  # a misspelt name fails before any work
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, split=split)
    texts = override_texts(overrides or {})
    selection = Selection(tag=tag, sample=sample, seed=seed, tier=tier, perturb=tuple(perturb))
    runner = make_executor(executor, address, workers)
    try:
        results = [
            run_variant(
                name,
                data,
                overrides=texts,
                ks=ks,
                depth=depth,
                selection=selection,
                runs_dir=runs_dir,
                cache_dir=cache_dir,
                executor=runner,
                repeats=repeats,
            )
            for name in names
        ]
    finally:
        runner.close()
    one = isinstance(variant, str) and variant.strip() != ALL_VARIANTS
    return results[0] if one else results


def resume(
    ref: str,
    *,
    runs_dir: str | Path | None = None,
    dataset: Dataset | str | Path | None = None,
    cache_dir: str | Path | None = None,
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
) -> RunResult:
    """Finish an interrupted run (``ref``: its id or a unique prefix) from its checkpoint.

    The variant, parameters, cutoffs and selection come from the checkpoint; ``dataset`` is
    needed only when the data moved, and must hash as the run's did.
    """
    runner = make_executor(executor, address, workers)
    try:
        return resume_run(
            ref, runs_dir=runs_dir, dataset=dataset, cache_dir=cache_dir, executor=runner
        )
    finally:
        runner.close()


def override_texts(overrides: Mapping[str, Any]) -> list[str]:
    """``{"retriever.k1": 1.2}`` -> ``["retriever.k1=1.2"]``, the form the manifest records.

    A string stays as written unless it would read back as another JSON value (``"1.2"``),
    in which case it is quoted so that it stays a string.
    """
    return [f"{key}={_text(value)}" for key, value in overrides.items()]


def _text(value: Any) -> str:
    if isinstance(value, str):
        try:
            json.loads(value)
        except json.JSONDecodeError:
            return value
    return json.dumps(value)
