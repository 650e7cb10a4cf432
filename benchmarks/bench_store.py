"""The run store: writing a large run, and comparing and querying a large store of runs.

1. Writing: ``RunStore.write_run`` of one run of 100k queries, with synthetic trace
   tables shaped like a real run's (every column of the schema; every metric per query as with
   the default cutoffs; 100 BM25 candidates and ~50 documents per query in ``retrieved``; ~1.5
   claims per query). Peer: the same DataFrames written with ``DataFrame.to_parquet`` (no
   schema check, no fsync, no atomic rename): what writing the tables by hand costs.
2. Reading: a generated store of 100 runs × 10,000 queries × 20 metrics (20M metric rows; five
   variants, valid manifests, ``retrieved`` and ``claims`` present but empty, since none of the
   operations reads them), written with pyarrow directly (seconds, not hours). Operations:

   - ``compare``: ``rag-bench compare RUN_A RUN_B --slice category`` (default randomization
     test and bootstrap intervals, 10,000 resamples; the 8 default metrics × 5 slices);
   - ``mean per run and metric``: ``SELECT run_id, metric, avg(value) … GROUP BY ALL`` over
     all 20M rows;
   - ``worst of a slice``: the query of docs/commands.md, the 10 worst paraphrase queries of the
     latest hybrid_rerank run by ndcg@10, joined with their query text.

   Each through the library (``open_runs`` + ``compare`` or ``RunStore.sql``: what a notebook
   does) and through the CLI (a fresh process: start, imports, opening the store, the work,
   printing the default table). Peers for the two SQL queries: pandas (every metrics file read
   with pyarrow, then ``groupby``; "what users would otherwise do"), pyarrow alone
   (``Table.group_by``) and DuckDB queried directly over the files (rag-bench's engine without
   its store: the cost of the store's views and checks).

Every measurement runs in a fresh process: a warm-up call (imports, file cache; for compare a
call with 100 resamples), then ``--repeat`` timed calls in the same process (``--repeat-compare``
for compare, which takes seconds a call; the CLI: one warm-up process, then one process per
call). The two writers share one process, which builds the DataFrames once (not timed), and
alternate: a warm-up write each, then ``--repeat`` rounds. The tables show medians and the
child's peak RSS. Ratio = time / rag-bench library's time for the same operation.

    python benchmarks/bench_store.py --quick
    python benchmarks/bench_store.py --repeat 5 --parts read
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

import common

from rag_bench.evaluation.measures import headline_metrics

WORK = common.HERE / "data"
PACKAGES = ("scipy",)
VARIANTS = ("baseline", "hybrid", "hybrid_rerank", "hybrid_mmr", "baseline_k1")
CATEGORIES = ("literal", "paraphrase", "multi-hop", "unanswerable")
STORE_METRICS = (
    *headline_metrics(),  # rag-bench compare's default metrics first
    "precision@10",
    "recall@5",
    "recall@20",
    "recall@100",
    "ndcg@5",
    "ndcg@20",
    "map",
    "mrr",
    "hit@10",
    "citation_coverage",
    "answer_f1",
    "context_recall@5",
)
RETRIEVAL = {m for m in STORE_METRICS if "@" in m and not m.startswith("context")} | {"map", "mrr"}
BINARY = {"answer_exact", "correct_refusal", "over_refusal", "hit@10"}
FAILURE_CLASSES = ("ok", "retrieval_miss", "unsupported_claim", "wrong_refusal", "correct_refusal")
STORE_SIZE = {"runs": 100, "queries": 10_000}
QUICK_STORE_SIZE = {"runs": 100, "queries": 1_000}
WRITE_QUERIES, QUICK_WRITE_QUERIES = 100_000, 10_000
DEPTH, DOCS_PER_QUERY, CLAIMS_PER_QUERY = 100, 50, 1.5
GENERATOR = 4  # bump when the generated store changes
WARMUP_RESAMPLES = 100  # compare's warm-up call: same loading, 1 % of the resampling

MEAN_SQL = "SELECT run_id, metric, avg(value) AS mean FROM metrics GROUP BY ALL ORDER BY ALL"
WORST_SQL = (
    "SELECT q.query_id, q.query, m.value AS ndcg10, q.failure_class "
    "FROM metrics m JOIN queries q USING (run_id, query_id) "
    "WHERE m.metric = 'ndcg@10' AND q.category = 'paraphrase' "
    "AND m.run_id = (SELECT max(run_id) FROM runs WHERE variant = 'hybrid_rerank') "
    "ORDER BY m.value, q.query_id LIMIT 10"
)


# --- synthetic tables --------------------------------------------------------------------------


def _repeat(value: str, n: int):
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.take(pa.array([value]), pa.array(np.zeros(n, dtype=np.int32)))


def _ids(prefix: str, n: int, width: int | None = None):
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    numbers = pc.cast(pa.array(np.arange(n)), pa.string())
    if width:
        numbers = pc.utf8_lpad(numbers, width, "0")
    return pc.binary_join_element_wise(prefix, numbers, "")


def query_table(rng, run_id: str, n: int, categories, schema):
    """The ``queries`` table of one run (every column of the schema)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = _ids("q", n, len(str(n - 1)))
    refuse = np.asarray(categories) == "unanswerable"
    failure = rng.integers(0, len(FAILURE_CLASSES), size=n)
    tags = pa.ListArray.from_arrays(
        pa.array(np.arange(n + 1, dtype=np.int32) * 2),
        pc.take(
            pa.array(["smoke", "hardware", "policy", "network"]),
            pa.array(rng.integers(0, 4, size=2 * n)),
        ),
    )
    latency = {
        f"latency_ms_{s}": pa.array(rng.gamma(2.0, scale, size=n))
        for s, scale in (
            ("retrieve", 0.3),
            ("fusion", 0.02),
            ("rerank", 1.5),
            ("generate", 0.6),
            ("judge", 0.9),
        )
    }
    latency["latency_ms_total"] = pc.add(
        pc.add(latency["latency_ms_retrieve"], latency["latency_ms_fusion"]),
        pc.add(
            pc.add(latency["latency_ms_rerank"], latency["latency_ms_generate"]),
            latency["latency_ms_judge"],
        ),
    )
    columns = {
        "run_id": _repeat(run_id, n),
        "query_id": ids,
        "category": pa.array(list(categories), pa.string()),
        "tags": tags,
        "should_refuse": pa.array(refuse),
        "query": pc.binary_join_element_wise(
            "How does setting ", ids, " affect the KS-220 backup schedule?", ""
        ),
        "answer": pc.binary_join_element_wise(
            "The setting ", ids, " moves the backup window by two hours [doc-17].", ""
        ),
        "refused": pa.array(rng.random(n) < 0.12),
        "failure_class": pc.take(pa.array(FAILURE_CLASSES), pa.array(failure)),
        "failure_stage": pa.nulls(n, pa.string()),
        "failure_fix": pa.nulls(n, pa.string()),
        "n_relevant": pa.array(rng.integers(0, 6, size=n)),
        **latency,
    }
    return _typed(columns, schema)


def metric_table(rng, run_id: str, names, categories, quality: float, difficulty, schema):
    """The ``metrics`` table of one run: every query × every metric, query-major."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n, m = len(categories), len(names)
    qidx = np.repeat(np.arange(n, dtype=np.int32), m)
    midx = np.tile(np.arange(m, dtype=np.int32), n)
    value = np.clip(difficulty[qidx] + quality + rng.normal(0, 0.15, size=n * m), 0, 1)
    binary = np.isin(np.asarray(names, dtype=object)[midx], list(BINARY))
    value[binary] = (value[binary] > 0.5).astype(np.float64)
    unanswerable = np.asarray(categories) == "unanswerable"
    retrieval = np.isin(np.asarray(names, dtype=object)[midx], list(RETRIEVAL))
    value[unanswerable[qidx] & retrieval] = np.nan
    ids = _ids("q", n, len(str(n - 1)))
    columns = {
        "run_id": _repeat(run_id, n * m),
        "query_id": pc.take(ids, pa.array(qidx)),
        "category": pc.take(pa.array(list(categories), pa.string()), pa.array(qidx)),
        "metric": pc.take(pa.array(list(names)), pa.array(midx)),
        "value": pa.array(value, mask=np.isnan(value)),  # NULL, as a real run stores it
        "status": pc.take(pa.array(["ok", "undefined"]), pa.array(np.isnan(value).astype(np.int8))),
    }
    return _typed(columns, schema)


def _typed(columns: dict, schema):
    """``columns`` as a table of ``schema``: a column the schema adds since the generator was
    written (``repeat``) is 0 throughout, as in a run answered once."""
    import pyarrow as pa

    n = len(next(iter(columns.values())))
    for field in schema:
        if field.name not in columns:
            columns[field.name] = pa.array([0] * n, field.type)
    return pa.table(columns).select(schema.names).cast(schema)


def categories_of(rng, n: int) -> list[str]:
    return [CATEGORIES[i] for i in rng.choice(len(CATEGORIES), size=n, p=[0.35, 0.3, 0.25, 0.1])]


def manifest(run_id: str, variant: str, created: str, query_ids: list[str]) -> dict:
    """A valid manifest (the store's current schema version) of a synthetic run."""
    from rag_bench import __version__
    from rag_bench.runs import SCHEMA_VERSION

    return {
        "run_id": run_id,
        "schema_version": SCHEMA_VERSION,
        "variant": variant,
        "variant_origin": "benchmark",
        "params": {"retriever": {"name": "bm25", "k1": 1.5, "b": 0.75, "method": "lucene"}},
        "dataset": {
            "name": "synthetic-store",
            "path": "benchmarks/data",
            "sha256": "0" * 64,
            "n_docs": 100_000,
            "n_queries": len(query_ids),
        },
        "selection": {"tag": None, "sample": None, "seed": 0, "query_ids": query_ids},
        "ks": [1, 3, 5, 10, 20, 100],
        "depth": DEPTH,
        "judge": {"name": "lexical"},
        "generator": {"name": "extractive"},
        "index": {"n_chunks": 100_000, "seconds": {}, "cached": {}},
        "created_at": created,
        "duration_s": 60.0,
        "status": "complete",
        "rag_bench_version": __version__,
        "packages": {},
        "git_commit": None,
        "usage": {},
    }


def store_dir(size: dict, seed: int) -> Path:
    return WORK / f"store-s{seed}-r{size['runs']}-q{size['queries']}-m{len(STORE_METRICS)}"


def ensure_store(size: dict, seed: int) -> Path:
    """A runs folder of ``size['runs']`` runs, generated unless already there."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rag_bench.runs.layout import PART, manifest_parts, partition

    root = store_dir(size, seed)
    stamp = root / ".params.json"
    wanted = {**size, "seed": seed, "metrics": list(STORE_METRICS), "generator": GENERATOR}
    if stamp.is_file() and json.loads(stamp.read_text()) == wanted:
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.perf_counter()
    schemas = trace_schemas()
    rng = np.random.default_rng(seed)
    n = size["queries"]
    categories = categories_of(rng, n)
    difficulty = rng.beta(2, 2, size=n) - 0.5
    query_ids = _ids("q", n, len(str(n - 1))).to_pylist()
    for i in range(size["runs"]):
        variant = VARIANTS[i % len(VARIANTS)]
        quality = 0.5 + 0.03 * (i % len(VARIANTS)) + 0.002 * (i // len(VARIANTS))
        day, hour = divmod(i, 24)
        run_id = f"202611{1 + day:02d}-{hour:02d}0000-{variant}-{i:04x}"
        tables = {
            "queries": query_table(rng, run_id, n, categories, schemas["queries"]),
            "metrics": metric_table(
                rng, run_id, STORE_METRICS, categories, quality, difficulty, schemas["metrics"]
            ),
            "retrieved": pa.Table.from_pylist([], schema=schemas["retrieved"]),
            "claims": pa.Table.from_pylist([], schema=schemas["claims"]),
        }
        for name, table in tables.items():  # hive partitions; run_id is in the path only
            target = root.joinpath(*partition(name, variant, run_id), PART)
            target.parent.mkdir(parents=True)
            pq.write_table(table.drop_columns(["run_id"]), target)
        created = f"2026-11-{1 + day:02d}T{hour:02d}:00:00+00:00"
        text = json.dumps(manifest(run_id, variant, created, query_ids), indent=2)
        committed = root.joinpath(*manifest_parts(run_id))  # the manifest commits the run
        committed.parent.mkdir(exist_ok=True)
        committed.write_text(text + "\n")
    stamp.write_text(json.dumps(wanted) + "\n")
    rows = size["runs"] * n * len(STORE_METRICS)
    print(f"generated {root} ({rows:,} metric rows) in {time.perf_counter() - started:.1f} s")
    return root


def trace_schemas() -> dict:
    """The full schema (``run_id`` included) of each trace table."""
    from rag_bench.runs import TABLES
    from rag_bench.runs.layout import schema

    return {table: schema(table) for table in TABLES}


def run_tables(n: int, seed: int) -> dict:
    """DataFrames shaped like a real run of ``n`` queries (what ``build_traces`` returns)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from rag_bench.evaluation.answer import answer_metric_names
    from rag_bench.experiment.traces import ranking_measures

    schemas = trace_schemas()
    rng = np.random.default_rng(seed)
    run_id = "20261201-120000-hybrid_rerank-beef"
    ks = (1, 3, 5, 10, 20, 100)
    names = [str(m) for m in ranking_measures(ks)] + list(answer_metric_names(ks))
    categories = categories_of(rng, n)
    difficulty = rng.beta(2, 2, size=n) - 0.5
    queries = query_table(rng, run_id, n, categories, schemas["queries"])
    metrics = metric_table(rng, run_id, names, categories, 0.5, difficulty, schemas["metrics"])
    # retrieved: DEPTH candidates of stage bm25, then DOCS_PER_QUERY collapsed documents
    per = DEPTH + DOCS_PER_QUERY
    qidx = np.repeat(np.arange(n, dtype=np.int32), per)
    within = np.tile(np.arange(per, dtype=np.int32), n)
    documents = within >= DEPTH
    rank = np.where(documents, within - DEPTH + 1, within + 1).astype(np.int32)
    doc = rng.integers(0, 100_000, size=n * per)
    part = rng.integers(0, 4, size=n * per)
    doc_ids = _ids("doc-", 100_000)
    relevance = rng.choice([-1, 0, 1, 2, 3], size=n * per, p=[0.8, 0.1, 0.05, 0.03, 0.02])
    retrieved = pa.table(
        {
            "run_id": _repeat(run_id, n * per),
            "query_id": pc.take(queries.column("query_id"), pa.array(qidx)),
            "stage": pc.take(pa.array(["bm25", "documents"]), pa.array(documents.astype(np.int8))),
            "rank": pa.array(rank),
            "chunk_id": pc.binary_join_element_wise(
                pc.take(doc_ids, pa.array(doc)), pc.cast(pa.array(part), pa.string()), "#"
            ),
            "doc_id": pc.take(doc_ids, pa.array(doc)),
            "score": pa.array(np.round(30 - rank * 0.1 + rng.random(n * per), 4)),
            "relevance": pa.array(relevance, mask=relevance < 0).cast(pa.int32()),
        }
    ).cast(schemas["retrieved"])
    n_claims = rng.poisson(CLAIMS_PER_QUERY, size=n)
    cq = np.repeat(np.arange(n), n_claims)
    claim_id = np.concatenate([np.arange(k) for k in n_claims]) if len(cq) else np.zeros(0)
    supported = rng.random(len(cq)) < 0.8
    citation = pc.take(doc_ids, pa.array(rng.integers(0, 100_000, size=len(cq))))
    one_each = pa.array(np.arange(len(cq) + 1, dtype=np.int32))
    claims = _typed(
        {
            "run_id": _repeat(run_id, len(cq)),
            "query_id": pc.take(queries.column("query_id"), pa.array(cq)),
            "claim_id": pa.array(claim_id.astype(np.int32)),
            "text": pc.binary_join_element_wise(
                "The KS-220 supports ", pc.cast(pa.array(cq), pa.string()), " TB drives.", ""
            ),
            "citations": pa.ListArray.from_arrays(one_each, citation),
            "supported": pa.array(supported),
            "support_grade": pa.array(np.where(supported, 2, 0).astype(np.int32)),
            "supported_by": pa.ListArray.from_arrays(one_each, citation),
            "judge": _repeat("lexical", len(cq)),
            "reason": _repeat("100% of the claim's content words in one passage window", len(cq)),
        },
        schemas["claims"],
    )
    frames = {
        name: table.to_pandas()
        for name, table in (
            ("queries", queries),
            ("metrics", metrics),
            ("retrieved", retrieved),
            ("claims", claims),
        )
    }
    frames["retrieved"]["relevance"] = frames["retrieved"]["relevance"].astype("Int32")
    return frames


# --- the operations, as each tool does them ------------------------------------------------------


WRITTEN_RUN = {"run_id": "20261201-120000-hybrid_rerank-beef", "variant": "hybrid_rerank"}


def op_write_rag_bench(frames: dict, target: Path) -> None:
    from rag_bench.runs import SCHEMA_VERSION, open_runs

    manifest = WRITTEN_RUN | {"schema_version": SCHEMA_VERSION}
    open_runs(target).write_run(WRITTEN_RUN["run_id"], manifest, frames)


def op_write_pandas(frames: dict, target: Path) -> None:
    """The same files in the same places (the store's partitions), by hand."""
    for name, frame in frames.items():
        path = table_file(target, name, WRITTEN_RUN["variant"], WRITTEN_RUN["run_id"])
        path.parent.mkdir(parents=True)
        frame.drop(columns="run_id").to_parquet(path, index=False)


def table_file(root: Path, table: str, variant: str, run_id: str) -> Path:
    """Where the store keeps one run's ``table``: its hive partition's Parquet file."""
    from rag_bench.runs.layout import PART, partition

    return root.joinpath(*partition(table, variant, run_id), PART)


def table_files(root: Path, table: str) -> list[Path]:
    """Every run's file of ``table`` (committed or not: the generated store has no leftovers)."""
    return sorted((root / table).glob("variant=*/run_id=*/*.parquet"))


def op_compare_library(root: Path, resamples: int = 10_000):
    from rag_bench.analysis.compare import compare

    refs = ["latest:baseline", "latest:hybrid_rerank"]
    result = compare(root, refs, slice_by="category", resamples=resamples)
    return {"rows": len(result.rows), "delta_sum": float(result.rows["delta"].sum())}


def op_mean_library(root: Path):
    from rag_bench.runs import open_runs

    return _mean_digest(open_runs(root).sql(MEAN_SQL))


def op_mean_duckdb(root: Path):
    import duckdb

    pattern = str(root / "metrics" / "*" / "*" / "*.parquet").replace("'", "''")
    sql = MEAN_SQL.replace(
        "FROM metrics", f"FROM read_parquet('{pattern}', hive_partitioning = true)"
    )
    return _mean_digest(duckdb.connect().sql(sql).df())


def op_mean_pandas(root: Path):
    import pandas as pd

    frame = pd.concat(
        [
            pd.read_parquet(f, columns=["metric", "value"]).assign(run_id=run_id_of(f))
            for f in table_files(root, "metrics")
        ],
        ignore_index=True,
    )
    means = frame.groupby(["run_id", "metric"], sort=True)["value"].mean().reset_index()
    return _mean_digest(means.rename(columns={"value": "mean"}))


def op_mean_pyarrow(root: Path):
    import pyarrow.dataset as ds

    files = [str(f) for f in table_files(root, "metrics")]
    dataset = ds.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(root))
    table = dataset.to_table(columns=["run_id", "metric", "value"])
    grouped = table.group_by(["run_id", "metric"]).aggregate([("value", "mean")])
    return _mean_digest(grouped.rename_columns(["run_id", "metric", "mean"]).to_pandas())


def run_id_of(path: Path) -> str:
    """The run id of a partition file (``…/run_id=<id>/part-0.parquet``)."""
    from urllib.parse import unquote

    return unquote(path.parent.name.removeprefix("run_id="))


def _mean_digest(frame) -> dict:
    return {"rows": len(frame), "sum": float(frame["mean"].sum())}


def op_worst_library(root: Path):
    from rag_bench.runs import open_runs

    return {"query_ids": open_runs(root).sql(WORST_SQL)["query_id"].tolist()}


def _latest_run(root: Path, variant: str) -> dict[str, Path]:
    """What the SQL's ``max(run_id) … WHERE variant = …`` does, from the manifests: the files of
    that run's tables."""
    from rag_bench.runs.layout import MANIFESTS

    found = []
    for manifest_path in (root / MANIFESTS).glob("*.json"):
        if json.loads(manifest_path.read_text())["variant"] == variant:
            found.append(manifest_path.stem)
    run_id = max(found)
    return {t: table_file(root, t, variant, run_id) for t in ("metrics", "queries")}


def op_worst_duckdb(root: Path):
    import duckdb

    run = _latest_run(root, "hybrid_rerank")
    metrics, queries = (str(run[t]).replace("'", "''") for t in ("metrics", "queries"))
    sql = (
        "SELECT q.query_id, q.query, m.value AS ndcg10, q.failure_class "
        f"FROM read_parquet('{metrics}') m JOIN read_parquet('{queries}') q "
        "USING (query_id) WHERE m.metric = 'ndcg@10' AND q.category = 'paraphrase' "
        "ORDER BY m.value, q.query_id LIMIT 10"
    )
    return {"query_ids": duckdb.connect().sql(sql).df()["query_id"].tolist()}


def op_worst_pandas(root: Path):
    import pandas as pd

    run = _latest_run(root, "hybrid_rerank")
    metrics = pd.read_parquet(run["metrics"], columns=["query_id", "metric", "value"])
    queries = pd.read_parquet(
        run["queries"], columns=["query_id", "query", "category", "failure_class"]
    )
    chosen = metrics[metrics["metric"] == "ndcg@10"].merge(queries, on="query_id")
    chosen = chosen[chosen["category"] == "paraphrase"]
    worst = chosen.sort_values(["value", "query_id"], na_position="last").head(10)
    return {"query_ids": worst["query_id"].tolist()}


LIBRARY = "rag-bench library"
CLI = "rag-bench CLI"
READ_OPS = {
    "compare": {LIBRARY: op_compare_library},
    "mean per run and metric": {
        LIBRARY: op_mean_library,
        "duckdb direct": op_mean_duckdb,
        "pandas": op_mean_pandas,
        "pyarrow": op_mean_pyarrow,
    },
    "worst of a slice": {
        LIBRARY: op_worst_library,
        "duckdb direct": op_worst_duckdb,
        "pandas": op_worst_pandas,
    },
}
CLI_ARGS = {
    "compare": ["compare", "latest:baseline", "latest:hybrid_rerank", "--slice", "category"],
    "mean per run and metric": ["sql", MEAN_SQL],
    "worst of a slice": ["sql", WORST_SQL],
}
WRITE_OPS = {LIBRARY + " write_run": op_write_rag_bench, "pandas to_parquet": op_write_pandas}


# --- the children ----------------------------------------------------------------------------


def timed(func, *args) -> tuple[object, float]:
    started = time.perf_counter()
    value = func(*args)
    return value, time.perf_counter() - started


def child_read(op: str, tool: str, root: Path, repeat: int) -> None:
    func = READ_OPS[op][tool]
    warm_args = (WARMUP_RESAMPLES,) if op == "compare" else ()
    _, warmup = timed(func, root, *warm_args)
    times, digest = [], None
    for _ in range(repeat):
        digest, seconds = timed(func, root)
        times.append(seconds)
    common.emit({"times": times, "warmup_s": warmup, "digest": digest})


def child_write(n: int, seed: int, repeat: int) -> None:
    """Both writers on the same DataFrames (built once, not timed), alternating: a warm-up
    write each, then ``repeat`` rounds."""
    frames, build_s = timed(run_tables, n, seed)
    rows = {name: len(frame) for name, frame in frames.items()}
    target = WORK / f".write-bench-{os.getpid()}"
    times: dict[str, list[float]] = {tool: [] for tool in WRITE_OPS}
    warmup, sizes = {}, {}
    for i in range(repeat + 1):  # the first round is the warm-up
        for tool, func in WRITE_OPS.items():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            _, seconds = timed(func, frames, target)
            if i == 0:
                warmup[tool] = seconds
            else:
                times[tool].append(seconds)
            sizes[tool] = {
                p.relative_to(target).parts[0]: p.stat().st_size for p in target.rglob("*.parquet")
            }
    shutil.rmtree(target, ignore_errors=True)
    common.emit(
        {"times": times, "warmup_s": warmup, "build_s": build_s, "rows": rows, "bytes": sizes}
    )


# --- the parent ------------------------------------------------------------------------------


def measure_child(args: list[str], what: str) -> dict:
    done = common.run_measured(common.python_child(Path(__file__), *args))
    result = common.child_result(done, what)
    result["median_s"] = common.median_of([{"t": t} for t in result["times"]], "t")
    return result


def measure_cli(op: str, root: Path, repeat: int) -> dict:
    script = Path(sys.executable).parent / "rag-bench"
    base = [str(script)] if script.is_file() else [sys.executable, "-m", "rag_bench.cli.main"]
    command = base + CLI_ARGS[op] + ["--runs-dir", str(root)]
    warm = command + (["--resamples", str(WARMUP_RESAMPLES)] if op == "compare" else [])
    runs = []
    for i in range(repeat + 1):  # the first is the warm-up
        done = common.run_measured(warm if i == 0 else command)
        if done["returncode"] != 0:
            tail = "\n".join(done["output"].strip().splitlines()[-5:])
            raise RuntimeError(f"{CLI} {op} failed (exit {done['returncode']}):\n{tail}")
        runs.append(done)
    measured = runs[1:]
    return {
        "times": [r["wall_s"] for r in measured],
        "warmup_s": runs[0]["wall_s"],
        "median_s": common.median_of(measured, "wall_s"),
        "peak_mib": max(r["peak_mib"] for r in measured),
        "output_lines": len(measured[-1]["output"].splitlines()),
    }


def benchmark_write(n: int, seed: int, repeat: int) -> dict:
    print(f"write a run of {n:,} queries: {', '.join(WRITE_OPS)} ...", flush=True)
    args = ["--child-write", "--queries", str(n), "--seed", str(seed), "--repeat", str(repeat)]
    try:
        done = common.run_measured(common.python_child(Path(__file__), *args))
        result = common.child_result(done, "write")
    except RuntimeError as exc:
        print(exc, flush=True)
        return {"queries": n, "tools": {}, "errors": {"write": str(exc)}}
    tools = {
        tool: {
            "times": result["times"][tool],
            "median_s": common.median_of([{"t": t} for t in result["times"][tool]], "t"),
            "warmup_s": result["warmup_s"][tool],
            "bytes": result["bytes"][tool],
            "peak_mib": result["peak_mib"],  # of the one process, DataFrames included
            "rows": result["rows"],
        }
        for tool in WRITE_OPS
    }
    return {"queries": n, "build_s": result["build_s"], "tools": tools, "errors": {}}


def benchmark_read(size: dict, seed: int, repeat: int, repeat_compare: int) -> dict:
    root = ensure_store(size, seed)
    out: dict[str, dict] = {}
    errors = {}
    for op, tools in READ_OPS.items():
        out[op] = {}
        for tool in [LIBRARY, CLI, *[t for t in tools if t != LIBRARY]]:
            print(f"{op}: {tool} ...", flush=True)
            times = repeat_compare if op == "compare" else repeat
            try:
                if tool == CLI:
                    out[op][tool] = measure_cli(op, root, times)
                else:
                    args = ["--child-read", op, "--tool", tool, "--store", str(root)]
                    out[op][tool] = measure_child(args + ["--repeat", str(times)], f"{op} {tool}")
            except RuntimeError as exc:
                errors[f"{op}: {tool}"] = str(exc)
                print(exc, flush=True)
    return {"store": str(root), "size": size, "operations": out, "errors": errors}


def same(a, b) -> bool:
    """Equal digests, floats to 1e-9 (tools sum in different orders)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def agreement(read: dict) -> list[str]:
    """Every tool of an operation must give the library's answer."""
    problems = []
    for op, tools in read["operations"].items():
        reference = tools.get(LIBRARY, {}).get("digest")
        for tool, result in tools.items():
            if "digest" in result and not same(result["digest"], reference):
                problems.append(f"{op}: {tool} gives {result['digest']}, library {reference}")
    return problems


COLUMNS = [
    ("operation", "operation", "s"),
    ("tool", "tool", "s"),
    ("median_s", "median s", ".3f"),
    ("warmup_s", "warm-up s", ".3f"),
    ("ratio", "vs library", "x"),
    ("peak_mib", "peak MiB", ".0f"),
]


def rows_of(results: dict) -> list[dict]:
    rows = []
    write = results.get("write")
    if write:
        base = write["tools"].get(LIBRARY + " write_run", {}).get("median_s")
        for tool, r in write["tools"].items():
            rows.append(
                {"operation": f"write a run of {write['queries']:,} queries", "tool": tool}
                | r
                | {"ratio": r["median_s"] / base if base else None}
            )
    read = results.get("read")
    if read:
        for op, tools in read["operations"].items():
            base = tools.get(LIBRARY, {}).get("median_s")
            for tool, r in tools.items():
                rows.append(
                    {"operation": op, "tool": tool}
                    | r
                    | {"ratio": r["median_s"] / base if base else None}
                )
    return rows


def report(results: dict, path: Path) -> bool:
    print("\n" + common.describe(results))
    write, read = results.get("write"), results.get("read")
    if write and write["tools"]:
        any_tool = next(iter(write["tools"].values()))
        shape = ", ".join(f"{k} {v:,} rows" for k, v in any_tool["rows"].items())
        print(f"write: one run of {write['queries']:,} queries ({shape})")
    if read:
        s = read["size"]
        rows = s["runs"] * s["queries"] * len(STORE_METRICS)
        print(
            f"read: a store of {s['runs']} runs x {s['queries']:,} queries x"
            f" {len(STORE_METRICS)} metrics ({rows:,} metric rows), {read['store']}"
        )
    print(
        f"medians of {results['repeat']} calls ({results['repeat_compare']} for compare) after a"
        " warm-up call (compare's with --resamples"
        f" {WARMUP_RESAMPLES}), each tool in a fresh process (CLI: one process per call, its"
        " whole wall time; writers: one process, alternating); library calls include"
        " open_runs; vs library = time / rag-bench library's time for the same operation\n"
    )
    print(common.table(rows_of(results), COLUMNS))
    problems = agreement(read) if read else []
    if read:
        print("\n" + ("results agree across tools" if not problems else "\n".join(problems)))
    errors = {**(write or {}).get("errors", {}), **(read or {}).get("errors", {})}
    for name, error in errors.items():
        print(f"FAILED {name}: {error}")
    results["agreement_problems"] = problems
    common.write_results(results, path)
    return not problems and not errors


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="10x smaller: 10k-query run, 1k-query store"
    )
    parser.add_argument(
        "--repeat", type=int, default=None, help="timed calls per tool (3; quick: 2)"
    )
    parser.add_argument(
        "--repeat-compare", type=int, default=2, help="timed calls of compare (slow) per tool"
    )
    parser.add_argument("--parts", default="write,read", help="write, read, or both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="results file (default: results/store*.json)")
    parser.add_argument("--child-write", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-read", choices=list(READ_OPS), help=argparse.SUPPRESS)
    parser.add_argument("--tool", help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--queries", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeat is None:
        args.repeat = 2 if args.quick else 3
    if min(args.repeat, args.repeat_compare) < 1:
        parser.error("--repeat and --repeat-compare must be at least 1")
    unknown = set(args.parts.split(",")) - {"write", "read"}
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; known: write, read")
    return args


def main() -> int:
    args = parse_args()
    if args.child_write:
        child_write(args.queries, args.seed, args.repeat)
        return 0
    if args.child_read:
        child_read(args.child_read, args.tool, args.store, args.repeat)
        return 0
    parts = args.parts.split(",")
    load_before = common.load_average()
    started = time.perf_counter()
    results: dict = {
        "benchmark": "store",
        "quick": args.quick,
        "repeat": args.repeat,
        "repeat_compare": args.repeat_compare,
    }
    if "write" in parts:
        n = QUICK_WRITE_QUERIES if args.quick else WRITE_QUERIES
        results["write"] = benchmark_write(n, args.seed, args.repeat)
    if "read" in parts:
        size = QUICK_STORE_SIZE if args.quick else STORE_SIZE
        results["read"] = benchmark_read(size, args.seed, args.repeat, args.repeat_compare)
    results |= {
        "seconds": time.perf_counter() - started,
        "load_average_1min": {"before": load_before, "after": common.load_average()},
        "machine": common.machine(PACKAGES),
        "source": common.source(),
    }
    default = common.RESULTS_DIR / ("store-quick.json" if args.quick else "store.json")
    return 0 if report(results, args.json or default) else 1


if __name__ == "__main__":
    sys.exit(main())
