"""Running one variant over one dataset: index, retrieve, answer, evaluate, store the traces."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench import __version__
from rag_bench.cache import Cache, default_cache_dir
from rag_bench.dataset import Dataset, Query, load_dataset
from rag_bench.errors import UsageError
from rag_bench.pipeline.compose import IndexReport, Pipeline
from rag_bench.plugins import registry, resolve
from rag_bench.provenance import git_commit, package_versions
from rag_bench.store import SCHEMA_VERSION, default_runs_dir, reserve_run_id, write_run
from rag_bench.traces import build_traces

DEFAULT_KS = (1, 3, 5, 10, 20, 100)
SHIPPED_DATASET = Path(__file__).resolve().parent.parent / "data" / "kestrel-kb"


@dataclass
class RunResult:
    """A stored run: its id, folder, manifest and trace tables as DataFrames."""

    run_id: str
    path: Path
    manifest: dict
    tables: dict[str, pd.DataFrame] = field(repr=False)

    @property
    def metrics(self) -> pd.DataFrame:
        return self.tables["metrics"]

    @property
    def queries(self) -> pd.DataFrame:
        return self.tables["queries"]

    def summary(self, metrics: Sequence[str], by: str = "category") -> pd.DataFrame:
        """Mean of each metric per slice (defined values only) plus an ``all`` row, with n."""
        from rag_bench.views import slice_means

        return slice_means(self.metrics, metrics, by)


@dataclass(frozen=True)
class Selection:
    tag: str | None = None
    sample: int | None = None
    seed: int = 0

    def apply(self, queries: dict[str, Query]) -> list[str]:
        ids = list(queries)
        if self.tag:
            ids = [q for q in ids if self.tag in queries[q].tags]
            if not ids:
                known = sorted({t for q in queries.values() for t in q.tags})
                raise UsageError(
                    f"no query carries the tag {self.tag!r}",
                    f"use one of: {', '.join(known) or '(none)'}",
                )
        if self.sample is not None:
            if self.sample < 1:
                raise UsageError(f"--sample {self.sample} is below 1", "sample at least one query")
            if self.sample < len(ids):
                rng = np.random.default_rng(self.seed)
                keep = set(rng.choice(len(ids), size=self.sample, replace=False).tolist())
                ids = [q for i, q in enumerate(ids) if i in keep]
        return ids


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(sorted(set(int(k) for k in ks)))
    if not ks or ks[0] < 1:
        raise UsageError(
            f"--k {','.join(map(str, ks))} has a cutoff below 1", "use cutoffs like 1,3,5,10"
        )
    return ks


def run_variant(
    variant: str,
    dataset: Dataset | str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    ks: Sequence[int] = DEFAULT_KS,
    depth: int = 100,
    selection: Selection = Selection(),
    runs_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    progress: Callable[[Iterable], Iterable] | None = None,
) -> RunResult:
    """Run ``variant`` over ``dataset``, store the traces under ``runs_dir`` and return them."""
    started = time.perf_counter()
    created = datetime.now(timezone.utc)
    ks = _check_ks(ks)
    if depth < max(ks):
        raise UsageError(
            f"--depth {depth} is below the largest cutoff {max(ks)}",
            f"use --depth {max(ks)} or more",
        )
    spec = registry().variant(variant)
    resolved = resolve(spec, overrides)
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset or SHIPPED_DATASET)
    pipeline = Pipeline(resolved, Cache(Path(cache_dir) if cache_dir else default_cache_dir()))
    chosen = selection.apply(data.queries)
    report = pipeline.index(data)
    query_ids = pipeline.select_queries(chosen)
    if not query_ids:
        raise UsageError(
            f"variant {variant!r} has no query to run on {data.name}", "check --tag and the dataset"
        )
    queries = [data.queries[q] for q in query_ids]
    results = pipeline.answer(queries, depth, progress)

    runs_path = Path(runs_dir) if runs_dir else default_runs_dir()
    run_id = reserve_run_id(runs_path, variant, created)
    tables = build_traces(
        run_id,
        data,
        queries,
        results,
        pipeline.chunks,
        ks,
        pipeline.analyzer,
        resolved["judge"]["name"],
    )
    manifest = _manifest(
        run_id, spec, resolved, data, queries, ks, depth, selection, report, created, started
    )
    manifest["usage"] = pipeline.usage()
    path = write_run(runs_path, run_id, manifest, tables)
    return RunResult(run_id, path, manifest, tables)


def _manifest(
    run_id,
    spec,
    resolved,
    data: Dataset,
    queries,
    ks,
    depth,
    selection,
    report: IndexReport,
    created,
    started,
) -> dict:
    return {
        "run_id": run_id,
        "schema_version": SCHEMA_VERSION,
        "variant": spec.name,
        "variant_origin": spec.origin,
        "params": resolved,
        "dataset": {
            "name": data.name,
            "path": str(data.path),
            "sha256": data.sha256,
            "n_docs": len(data.docs),
            "n_queries": len(queries),
        },
        "selection": {
            "tag": selection.tag,
            "sample": selection.sample,
            "seed": selection.seed,
            "query_ids": [q.id for q in queries],
        },
        "ks": list(ks),
        "depth": depth,
        "judge": resolved.get("judge"),
        "generator": resolved.get("generator"),
        "index": {"n_chunks": report.n_chunks, "seconds": report.seconds, "cached": report.cached},
        "created_at": created.isoformat(timespec="microseconds"),
        "duration_s": round(time.perf_counter() - started, 3),
        "status": "complete",
        "rag_bench_version": __version__,
        "packages": package_versions(),
        "git_commit": git_commit(),
    }
