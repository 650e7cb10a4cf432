"""Running one variant over one dataset: index, retrieve, answer, evaluate, store the traces.

A run survives interruption. Its id is reserved before any work; while it runs, every block of
answered (generated and judged) queries is checkpointed in ``runs/.partial-<run_id>/`` and
every finished index (and every block of embeddings) in the cache. Ctrl-C, ``kill``, a full
disk or an endpoint that gives up leave no visible run, and :func:`resume_run` (``rag-bench run
--resume RUN_ID``) continues from the checkpoint: it rebuilds the cheap deterministic stages,
reuses every checkpointed answer whose ranking is unchanged and computes only the rest, so the
stored traces equal those of an uninterrupted run. Resuming requires the same variant,
parameters, dataset (by hash), cutoffs, depth and selection.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from rag_bench import __version__
from rag_bench.components.prompting import prompt_records
from rag_bench.components.registry import VariantSpec, registry, resolve
from rag_bench.data.dataset import Dataset, load_dataset
from rag_bench.data.qrels_versions import qrels_record, use_qrels
from rag_bench.data.selection import EVERY_QUERY, Selection
from rag_bench.data.user_queries import unlabelled_record
from rag_bench.errors import DataError, ParameterError, RagBenchError, UsageError, check_number
from rag_bench.experiment.provenance import git_commit, package_versions
from rag_bench.experiment.repeats import repeat_config, repeat_seeds
from rag_bench.experiment.traces import build_traces
from rag_bench.io.cache import Cache, default_cache_dir
from rag_bench.model import QueryResult
from rag_bench.pipeline.compose import IndexReport, Pipeline
from rag_bench.pipeline.executors import Executor, LocalExecutor
from rag_bench.runs import (
    SCHEMA_VERSION,
    Checkpoint,
    RunLocation,
    RunStore,
    StoredRun,
    WriteError,
    open_runs,
)
from rag_bench.runs.layout import REPEATED
from rag_bench.runs.records import answer_record, restored_answer

DEFAULT_KS = (1, 3, 5, 10, 20, 100)


@dataclass
class RunResult:
    """A stored run: the store it is in, the run (id, location, manifest) and its trace tables
    as DataFrames."""

    store: RunStore
    run: StoredRun
    tables: dict[str, pd.DataFrame] = field(repr=False)

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def manifest(self) -> dict:
        return self.run.manifest

    @property
    def location(self) -> RunLocation:
        """Where its manifest and table partitions are."""
        return self.run.location

    @property
    def metrics(self) -> pd.DataFrame:
        return self.tables["metrics"]

    @property
    def queries(self) -> pd.DataFrame:
        return self.tables["queries"]

    def summary(self, metrics: Sequence[str], by: str = "category") -> pd.DataFrame:
        """Mean of each metric per slice (defined values only) plus an ``all`` row, with n."""
        from rag_bench.evaluation.summary import slice_means

        return slice_means(self.metrics, metrics, by)


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    if not ks:
        raise ParameterError("ks", (), "one or more whole numbers ≥ 1, e.g. 1,3,5,10")
    for k in ks:
        check_number("ks", k, 1, whole=True)
    return tuple(sorted(set(int(k) for k in ks)))


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or ``kill``) during a run, with what was kept: nothing, a resumable checkpoint of
    ``checkpointed`` of ``total`` queries, or (when it came too late) the stored run."""

    def __init__(self, run_id: str, store: RunStore, checkpointed: int, total: int, stored: bool):
        super().__init__(run_id)
        self.run_id, self.store = run_id, store
        self.checkpointed, self.total, self.stored = checkpointed, total, stored

    def message(self) -> str:
        if self.stored:
            return f"interrupted after run {self.run_id} was stored"
        if self.checkpointed:
            return (
                f"interrupted; run {self.run_id} not stored, {self.checkpointed} of "
                f"{self.total} queries checkpointed; resume with: "
                f"{resume_command(self.run_id, self.store)}"
            )
        return "interrupted; nothing stored"


def resume_command(run_id: str, store: RunStore) -> str:
    command = f"rag-bench run --resume {run_id}"
    if not store.is_default:
        command += f" --runs-dir {shlex.quote(str(store))}"
    return command


def run_variant(
    variant: str | VariantSpec,
    dataset: Dataset | str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    ks: Sequence[int] = DEFAULT_KS,
    depth: int = 100,
    selection: Selection = EVERY_QUERY,
    runs_dir: str | Path | RunStore | None = None,
    cache_dir: str | Path | None = None,
    progress: Callable[[Iterable], Iterable] | None = None,
    executor: Executor | None = None,
    annotations: dict | None = None,
    repeats: int = 1,
) -> RunResult:
    """Run ``variant`` over ``dataset``, store the traces under ``runs_dir`` (a path, URL or
    :class:`RunStore`; None: the default runs folder) and return them.

    ``repeats`` above 1 answers every query that many times, each sampling component (see
    :mod:`rag_bench.experiment.repeats`) with its own seed per repeat, and stores every repeat
    (the ``repeat`` column of the answer tables; the manifest's ``repeats`` has the seeds).

    ``variant`` is a registered variant's name or a :class:`VariantSpec` composed on the spot
    (an import is one); ``annotations`` are extra manifest fields (where the outputs came from).

    The per-query work (and embedding the corpus with a stateless encoder) goes through
    ``executor`` (default: this process, one block at a time); the traces are the same
    whatever the executor.

    Raises :class:`RunInterrupted` on Ctrl-C: nothing is stored, and the answered queries stay
    checkpointed for :func:`resume_run`.
    """
    started = time.perf_counter()
    created = datetime.now(timezone.utc)
    ks, spec, resolved, data, pipeline = _prepare(variant, dataset, overrides, ks, depth, cache_dir)
    seeds = repeat_seeds(resolved, repeats)
    qrels = qrels_record(data)  # of the dataset's qrels, before perturbed copies join them
    data, chosen = selection.select(data)
    store = open_runs(runs_dir)
    run_id = store.reserve_run_id(spec.name, created)
    header = {
        "format": 1,
        "variant": spec.name,
        "params": _plain(resolved),
        "prompts": prompt_records(resolved),
        "overrides": list(overrides),
        "dataset": {
            "name": data.name,
            "path": str(Path(data.path).resolve()),
            "sha256": data.sha256,
            "split": _split_of(data),
            **dropped_record(data),
            **data.provenance,
        },
        "qrels": qrels,
        "ks": list(ks),
        "depth": depth,
        "selection": selection.record(),
        "created_at": created.isoformat(timespec="microseconds"),
        "rag_bench_version": __version__,
        "annotations": dict(annotations or {}),
        "repeats": {"n": repeats, "seeds": seeds},
    }  # the checkpoint's header: what the run is, for a resume to check against
    return _execute(
        _Plan(run_id, store, spec, resolved, data, ks, depth, selection, created, header),
        pipeline,
        chosen,
        started,
        progress,
        prior=None,
        executor=executor,
    )


def resume_run(
    ref: str,
    *,
    runs_dir: str | Path | RunStore | None = None,
    variant: str | None = None,
    dataset: Dataset | str | Path | None = None,
    split: str | None = None,
    overrides: Sequence[str] | None = None,
    ks: Sequence[int] | None = None,
    depth: int | None = None,
    selection: Selection | None = None,
    cache_dir: str | Path | None = None,
    progress: Callable[[Iterable], Iterable] | None = None,
    executor: Executor | None = None,
) -> RunResult:
    """Finish an interrupted run from its checkpoint (``ref``: run id, unique prefix, or the
    ``.partial-<run_id>`` folder) and store it under its original id.

    Every argument left as None is taken from the checkpoint; one that is given must agree with
    it, as must the dataset's content hash; a mismatch is a one-line error. Only queries
    without a checkpointed answer are generated and judged.
    """
    started = time.perf_counter()
    store, found = open_runs(runs_dir).find_checkpoint(ref)
    run_id = found.run_id
    store.acquire_run_id(run_id)
    try:
        checkpoint = found.reread()  # now that nobody else writes it
        if store.is_stored(run_id):
            checkpoint.remove()
            raise RagBenchError(
                f"run {run_id} is complete: there is nothing to resume",
                f"see it with `rag-bench show {run_id}`",
            )
        header = checkpoint.header
        if variant is not None and variant != header["variant"]:
            raise _mismatch(run_id, "--variant", header["variant"], variant)
        spec = registry().variant(header["variant"])
        resolved = resolve(spec, header.get("overrides", []) if overrides is None else overrides)
        _check_params(run_id, header["params"], _plain(resolved))
        _check_prompts(run_id, header.get("prompts", {}), prompt_records(resolved))
        if ks is not None and list(_check_ks(ks)) != header["ks"]:
            raise _mismatch(run_id, "--k", _joined(header["ks"]), _joined(_check_ks(ks)))
        if depth is not None and depth != header["depth"]:
            raise _mismatch(run_id, "--depth", header["depth"], depth)
        wanted = Selection(**header["selection"])
        if selection is not None and selection != wanted:
            raise _mismatch(run_id, "the query selection", wanted.shown(), selection.shown())
        data = _resume_dataset(run_id, header, dataset, split)
        pipeline = _pipeline(resolved, cache_dir)
        data, chosen = wanted.select(data)
        created = datetime.fromisoformat(header["created_at"])
        ks_ = tuple(header["ks"])
        plan = _Plan(
            run_id, store, spec, resolved, data, ks_, header["depth"], wanted, created, header
        )
    except BaseException:
        store.release_run_id(run_id)
        raise
    return _execute(plan, pipeline, chosen, started, progress, checkpoint, executor)


@dataclass
class _Plan:
    run_id: str
    store: RunStore
    spec: Any
    resolved: dict
    data: Dataset
    ks: Sequence[int]
    depth: int
    selection: Selection
    created: datetime
    header: dict


class _Saver:
    """The pipeline's checkpoint: saves each block with the time and usage so far (added to
    what earlier, interrupted sessions of the run spent)."""

    def __init__(self, checkpoint: Checkpoint, pipeline: Pipeline, started: float):
        self.checkpoint, self.pipeline, self.started = checkpoint, pipeline, started
        self.before = dict(checkpoint.progress)
        self.reused = 0
        self.extra: list[Pipeline] = []  # the pipelines of repeats 1.., whose usage counts too

    def lookup(self, query_id: str, key: str) -> QueryResult | None:
        found = self.checkpoint.lookup(query_id, key)
        self.reused += found is not None
        return restored_answer(found)

    def save(self, answers: list[tuple[str, str, QueryResult]]) -> None:
        records = [answer_record(*answer) for answer in answers]
        progress = {"elapsed_s": self.elapsed(), "usage": self.usage()}
        self.checkpoint.save([r for r in records if r is not None], progress)

    def elapsed(self) -> float:
        return round(self.before.get("elapsed_s", 0.0) + time.perf_counter() - self.started, 3)

    def usage(self) -> dict:
        used = merge_usage(self.before.get("usage", {}), self.pipeline.usage())
        for pipeline in self.extra:
            used = merge_usage(used, pipeline.usage())
        return used


def merge_usage(before: dict, now: dict) -> dict:
    """Usage of two sessions of one run: counts and costs added, other fields from ``now``."""
    merged = {}
    for slot in {**before, **now}:
        a, b = before.get(slot, {}), now.get(slot, {})
        entry = {**a, **b}
        for key in set(a) & set(b):
            x, y = a[key], b[key]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y)):
                entry[key] = round(x + y, 6) if isinstance(x + y, float) else x + y
        merged[slot] = entry
    return merged


def _execute(
    plan: _Plan,
    pipeline: Pipeline,
    chosen: list[str],
    started: float,
    progress,
    prior: Checkpoint | None,
    executor: Executor | None = None,
) -> RunResult:
    """Index, answer (checkpointed), evaluate and store one run whose id this process holds."""
    run_id, store, data = plan.run_id, plan.store, plan.data
    checkpoint, stored_run, total, resumable = prior, None, len(chosen), True
    # only a registered variant can be resumed by name (an import's spec is made on the spot)
    by_name = registry().variants.get(plan.spec.name) == plan.spec
    executor = executor or LocalExecutor()
    try:
        report = pipeline.index(data, executor, progress)
        query_ids = _selected(pipeline, plan.spec, data, chosen)
        total = len(query_ids)
        if prior is not None and prior.header.get("query_ids") != query_ids:
            resumable = False
            raise UsageError(
                f"the queries of run {run_id} are not those it started with",
                "start a new run without --resume",
            )
        queries = [data.queries[q] for q in query_ids]
        if checkpoint is None:
            checkpoint = store.create_checkpoint(run_id, {**plan.header, "query_ids": query_ids})
        saver = _Saver(checkpoint, pipeline, started)
        results = pipeline.answer(queries, plan.depth, progress, saver, executor)
        tables = build_traces(
            run_id,
            data,
            queries,
            results,
            pipeline.chunks,
            plan.ks,
            pipeline.analyzer,
            plan.resolved["judge"]["name"],
        )
        tables = _answer_repeats(plan, pipeline, queries, tables, saver, progress, executor)
        manifest = _manifest(plan, queries, report, pipeline, saver, executor, prior is not None)
        stored_run = store.write_run(run_id, manifest, tables)
    except KeyboardInterrupt:
        stored = store.is_stored(run_id)
        kept = len(checkpoint) if checkpoint is not None and by_name else 0
        raise RunInterrupted(run_id, store, kept, total, stored) from None
    except RagBenchError as error:
        stored = store.is_stored(run_id)
        if resumable and by_name and checkpoint is not None and len(checkpoint) and not stored:
            error.hint = _resume_hint(error, store, checkpoint, total)
        raise
    finally:
        if checkpoint is not None and (
            stored_run is not None or store.is_stored(run_id) or not len(checkpoint) or not by_name
        ):
            checkpoint.remove()
        store.release_run_id(run_id)
    return RunResult(store, stored_run, tables)


def _answer_repeats(plan, pipeline, queries, tables, saver, progress, executor) -> dict:
    """The trace tables with repeats 1.. of the run's ``repeats`` added to its answer tables:
    each a pipeline with the repeat's seeds, answering every query again (not checkpointed:
    a resumed run answers them again; retrieval is recomputed, the same, and stored once)."""
    repeated = plan.header.get("repeats", {"n": 1, "seeds": {}})
    for repeat in range(1, repeated["n"]):
        config = repeat_config(plan.resolved, repeated["seeds"], repeat)
        # a cache of its own over the same folder: the first one's memory holds the first
        # pipeline's components, which this one's would never be loaded into
        again = Pipeline(config, Cache(pipeline.cache.root))
        again.index(plan.data, executor)
        answers = again.answer(queries, plan.depth, progress, None, executor)
        judge = config["judge"]["name"]
        more = build_traces(
            plan.run_id,
            plan.data,
            queries,
            answers,
            again.chunks,
            plan.ks,
            again.analyzer,
            judge,
            repeat,
        )
        tables = {
            name: pd.concat([t, more[name]], ignore_index=True) if name in REPEATED else t
            for name, t in tables.items()
        }
        saver.extra.append(again)
    return tables


def _selected(pipeline: Pipeline, spec: VariantSpec, data: Dataset, chosen: list[str]) -> list[str]:
    """The chosen queries the pipeline can answer (a replayed system, only those it recorded)."""
    query_ids = pipeline.select_queries(chosen)
    if not query_ids:
        raise UsageError(
            f"variant {spec.name!r} has no query to run on {data.name}", "check the query selection"
        )
    return query_ids


def evaluate_variant(
    variant: str | VariantSpec,
    dataset: Dataset | str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    ks: Sequence[int] = DEFAULT_KS,
    depth: int = 100,
    selection: Selection = EVERY_QUERY,
    cache_dir: str | Path | None = None,
) -> dict[str, pd.DataFrame]:
    """The trace tables (queries, metrics, retrieved, claims) a run of ``variant`` would store,
    computed in memory and stored nowhere: for a notebook or a test. Their ``run_id`` is
    ``unsaved``; the numbers are those :func:`run_variant` stores."""
    ks, spec, resolved, data, pipeline = _prepare(variant, dataset, overrides, ks, depth, cache_dir)
    pipeline.index(data)
    data, chosen = selection.select(data)
    queries = [data.queries[q] for q in _selected(pipeline, spec, data, chosen)]
    results = pipeline.answer(queries, depth, None, None)
    judge = resolved["judge"]["name"]
    return build_traces(
        "unsaved", data, queries, results, pipeline.chunks, ks, pipeline.analyzer, judge
    )


def _prepare(variant, dataset, overrides: Sequence[str], ks, depth: int, cache_dir):
    """What a fresh run of ``variant`` works with: the checked cutoffs, the variant, its
    resolved parameters, the dataset and the pipeline."""
    ks = _check_ks(ks)
    _check_depth(depth, ks)
    spec = variant if isinstance(variant, VariantSpec) else registry().variant(variant)
    resolved = resolve(spec, overrides)
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    return ks, spec, resolved, data, _pipeline(resolved, cache_dir)


def _pipeline(resolved: dict, cache_dir) -> Pipeline:
    return Pipeline(resolved, Cache(Path(cache_dir) if cache_dir else default_cache_dir()))


def _resume_hint(error: RagBenchError, store: RunStore, checkpoint: Checkpoint, total: int) -> str:
    command = f"`{resume_command(checkpoint.run_id, store)}`"
    kept = f"{len(checkpoint)} of {total} queries are checkpointed"
    if isinstance(error, WriteError):
        first = "free disk space" if error.disk_full else f"make {store} writable"
        return f"{first}, then resume with {command} ({kept})"
    return f"{error.hint or 'fix the cause'}; then resume with {command} ({kept})"


def _check_depth(depth: int, ks: Sequence[int]) -> None:
    if depth < max(ks):
        raise UsageError(
            f"--depth {depth} is below the largest cutoff {max(ks)}",
            f"use --depth {max(ks)} or more",
        )


def _plain(value: Any) -> Any:
    """``value`` as it comes back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value, default=str))


def _split_of(data: Dataset) -> str | None:
    if data.split is not None:
        return data.split
    source = Path(str(data.qrels.source))
    return source.stem if source.parent.name == "qrels" else None


def _joined(values) -> str:
    return ",".join(map(str, values))


def _mismatch(run_id: str, what: str, then: Any, now: Any) -> UsageError:
    return UsageError(
        f"run {run_id} was started with {what} {then}, not {now}",
        "resume with the same options (or none), or start a new run without --resume",
    )


def _check_params(run_id: str, then: dict, now: dict) -> None:
    """The first parameter that differs from the interrupted run's, as a one-line error."""
    for slot in sorted({*then, *now}):
        a, b = then.get(slot) or {}, now.get(slot) or {}
        for param in sorted({*a, *b}, key=lambda p: (p != "name", p)):  # a switch first
            if a.get(param) != b.get(param):
                raise UsageError(
                    f"run {run_id} was started with {slot}.{param}={json.dumps(a.get(param))}, "
                    f"not {json.dumps(b.get(param))}",
                    "resume with the same --set options (or none), "
                    "or start a new run without --resume",
                )


def _check_prompts(run_id: str, then: dict, now: dict) -> None:
    """A prompt file edited since the interrupted run started, as a one-line error."""
    for where in sorted({*then, *now}):
        if (then.get(where) or {}).get("sha256") != (now.get(where) or {}).get("sha256"):
            raise UsageError(
                f"run {run_id} was started with another {where} (its text has changed)",
                "restore the prompt the run started with, or start a new run without --resume",
            )


def _resume_dataset(run_id: str, header: dict, dataset, split: str | None) -> Dataset:
    recorded = header["dataset"]
    if "queries_file" in recorded and not isinstance(dataset, Dataset):
        raise UsageError(
            f"run {run_id} ran the queries of {recorded['queries_file'].get('file')}, "
            "which a resume cannot read again",
            "start the run again with --queries",
        )
    if isinstance(dataset, Dataset):
        data = dataset
    else:
        path = Path(dataset) if dataset is not None else Path(recorded["path"])
        if dataset is None and not path.is_dir():
            raise DataError(
                path,
                f"the dataset run {run_id} started on is no longer here",
                "pass --dataset with the same data",
            )
        split = split or recorded.get("split") or "test"
        data = load_dataset(path, split=split, drop_unknown="dropped" in recorded)
        qrels = header.get("qrels", {})
        if qrels.get("version") not in (None, "base"):  # the qrels version it was started on
            data = use_qrels(data, qrels["sha256"], split, "dropped" in recorded)
    if data.sha256 != recorded["sha256"]:
        raise UsageError(
            f"dataset {data.path} is not the data run {run_id} started on "
            f"(sha256 {data.sha256[:12]}…, was {recorded['sha256'][:12]}…)",
            "resume with the same data (and --split), or start a new run without --resume",
        )
    return data


def dropped_record(data: Dataset) -> dict:
    """What the manifest says of judgements left out by ``drop_unknown`` (nothing if none)."""
    if not data.n_dropped:
        return {}
    return {"dropped": {"judgements": data.n_dropped, **data.dropped}}


def _manifest(
    plan: _Plan,
    queries,
    report: IndexReport,
    pipeline: Pipeline,
    saver: _Saver,
    executor: Executor,
    resumed: bool,
) -> dict:
    """The manifest of a finished run, whole: what it ran on and with, how long it took and
    what it spent (with the earlier sessions of a resumed run), and where it came from."""
    data, resolved, header = plan.data, plan.resolved, plan.header
    manifest = {
        "run_id": plan.run_id,
        "schema_version": SCHEMA_VERSION,
        "variant": plan.spec.name,
        "variant_origin": plan.spec.origin,
        "params": resolved,
        "dataset": {
            "name": data.name,
            "path": str(data.path),
            "sha256": data.sha256,
            "n_docs": len(data.docs),
            "n_queries": len(queries),
            **dropped_record(data),
            **data.provenance,
            **unlabelled_record(queries, data),
        },
        "qrels": header.get("qrels") or qrels_record(data),
        "selection": {**plan.selection.record(), "query_ids": [q.id for q in queries]},
        "ks": list(plan.ks),
        "depth": plan.depth,
        "judge": resolved.get("judge"),
        "generator": resolved.get("generator"),
        "prompts": prompt_records(resolved),
        "repeats": header.get("repeats", {"n": 1, "seeds": {}}),
        "index": {"n_chunks": report.n_chunks, "seconds": report.seconds, "cached": report.cached},
        "created_at": plan.created.isoformat(timespec="microseconds"),
        "duration_s": saver.elapsed(),
        "status": "complete",
        "rag_bench_version": __version__,
        "packages": package_versions(),
        "git_commit": git_commit(),
        "overrides": list(header.get("overrides", [])),
        **header.get("annotations", {}),
        "executor": executor.describe(),
    }
    checked = pipeline.index_recall(queries, plan.depth)
    if checked is not None:  # an approximate index: what it missed of exact search's top k
        manifest["index"]["recall"] = checked
    if pipeline.reranker_training() is not None:
        manifest["reranker_training"] = pipeline.reranker_training()
    manifest["usage"] = saver.usage()
    if resumed:
        manifest["resumed"] = {
            "at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            "queries_from_checkpoint": saver.reused,
        }
    return manifest
