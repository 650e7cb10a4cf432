"""End to end: ``rag-bench run`` of each built-in variant, stage by stage, cold and warm cache.

Cases:

- ``baseline``, ``hybrid`` and ``hybrid_rerank`` on the shipped dataset ``data/kestrel-kb``
  (275 queries; with ``--quick`` its 30 ``smoke`` queries, ``--tag smoke``);
- ``baseline`` on a generated BEIR-layout dataset (``corpora.py``: 100k documents of ~100
  words, 300 queries, one relevant document each), once with ``--set chunker.name=none``
  (a document is one chunk) and once with the default fixed chunker (128 words, 32 overlap).

Every run is ``rag-bench run --variant V [--dataset D] [--set …]`` in its own process with a
new runs folder. Cold: ``RAG_BENCH_CACHE_DIR`` is a new, empty folder; warm: the same command
again with the cache the cold run filled (indexes and embeddings are cached, chunking, the
generator's and reranker's preparation and everything per query are not). A warm-up round
(one cold run of each kestrel-kb case; with ``--quick`` of baseline only) comes first and is
not counted; then ``--repeat``
rounds of (cold, warm) per case (``--repeat-generated`` on the generated data, where each run
takes tens of seconds and there is no warm-up round); the table shows medians.

The stages come from the run itself: ``index.seconds`` of its manifest (chunk, index_*,
prepare_*) and the sum over queries of the per-query latency columns of ``queries.parquet``
(``latency_ms_retrieve``, ``_fusion``, ``_rerank``, ``_generate``, ``_judge``); "eval+other" is
the rest of the run's own ``duration_s`` (building the pipeline, whose analyzer imports bm25s
and rjieba, about 0.5 s; evaluating; building the trace tables); "process" is
the rest of the wall time (interpreter start, imports, loading and hashing the dataset, writing
the Parquet files, printing). Peak MiB is the child's ``ru_maxrss``. Ratios: a run's wall time
over the same variant's cold run ("warm/cold"), and over baseline in the same cache state on
the same dataset ("vs baseline").

    python benchmarks/bench_end_to_end.py --quick
    python benchmarks/bench_end_to_end.py --cases kestrel --repeat 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import common
import corpora

REPO = common.HERE.parent
KESTREL = REPO / "data" / "kestrel-kb"
WORK = common.HERE / "data" / "end-to-end"
PACKAGES = ("bm25s", "PyStemmer", "scikit-learn", "scipy")
QUERY_STAGES = ("retrieve", "fusion", "rerank", "generate", "judge")
GENERATED_DOCS, QUICK_GENERATED_DOCS = 100_000, 10_000
GENERATED_QUERIES, GENERATED_WORDS = 300, 100


@dataclass(frozen=True)
class Case:
    name: str
    dataset: str  # "kestrel-kb" or "generated"
    variant: str
    overrides: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.name


KESTREL_CASES = [
    Case("baseline", "kestrel-kb", "baseline"),
    Case("hybrid", "kestrel-kb", "hybrid"),
    Case("hybrid_rerank", "kestrel-kb", "hybrid_rerank"),
]
GENERATED_CASES = [
    Case("baseline, chunker none", "generated", "baseline", ("chunker.name=none",)),
    Case("baseline, chunker fixed", "generated", "baseline"),
]


def rag_bench_command() -> list[str]:
    script = Path(sys.executable).parent / "rag-bench"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from rag_bench.cli.main import main; main()"]


def run_once(case: Case, dataset: Path, cache: Path, label: str, quick: bool) -> dict:
    """One ``rag-bench run`` in a child process; its stages, wall time and peak memory."""
    runs = WORK / "runs" / label
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    command = rag_bench_command() + ["run", "--variant", case.variant, "--runs-dir", str(runs)]
    if case.dataset != "kestrel-kb":
        command += ["--dataset", str(dataset)]
    elif quick:
        command += ["--tag", "smoke"]
    for override in case.overrides:
        command += ["--set", override]
    env = os.environ | {"RAG_BENCH_CACHE_DIR": str(cache)}
    env.pop("RAG_BENCH_RUNS_DIR", None)
    done = common.run_measured(command, env=env, cwd=REPO)
    if done["returncode"] != 0:
        tail = "\n".join(done["output"].strip().splitlines()[-6:])
        raise RuntimeError(f"{case.label} ({label}) failed (exit {done['returncode']}):\n{tail}")
    from rag_bench.runs import open_runs

    (run,) = open_runs(runs).list()
    result = stages_of(run) | {
        "wall_s": done["wall_s"],
        "peak_mib": done["peak_mib"],
        "cpu_s": done["cpu_s"],
    }
    result["process_s"] = done["wall_s"] - result["duration_s"]
    shutil.rmtree(runs, ignore_errors=True)
    return result


def stages_of(run) -> dict:
    """Seconds per stage of a stored run (a ``StoredRun`` or ``RunResult``), from its manifest
    and its queries' latency columns."""
    import pyarrow.parquet as pq

    manifest = run.manifest
    seconds = manifest["index"]["seconds"]
    out = {
        "duration_s": manifest["duration_s"],
        "n_queries": manifest["dataset"]["n_queries"],
        "n_docs": manifest["dataset"]["n_docs"],
        "n_chunks": manifest["index"]["n_chunks"],
        "cached": manifest["index"]["cached"],
        "chunk_s": seconds.get("chunk", 0.0),
        "index_s": sum(v for k, v in seconds.items() if k.startswith("index_")),
        "prepare_s": sum(v for k, v in seconds.items() if k.startswith("prepare_")),
        "index_seconds": seconds,
    }
    columns = [f"latency_ms_{s}" for s in QUERY_STAGES]
    table = pq.read_table(run.location.table_file("queries"), columns=columns)
    for stage, column in zip(QUERY_STAGES, columns):
        values = [v for v in table.column(column).to_pylist() if v is not None and v == v]
        out[f"{stage}_s"] = sum(values) / 1000 if values else None
    known = out["chunk_s"] + out["index_s"] + out["prepare_s"]
    known += sum(out[f"{s}_s"] or 0.0 for s in QUERY_STAGES)
    out["traces_s"] = max(out["duration_s"] - known, 0.0)
    return out


def dataset_for(case: Case, quick: bool, seed: int) -> Path:
    if case.dataset == "kestrel-kb":
        return KESTREL
    params = corpora.Params(
        seed=seed,
        docs=QUICK_GENERATED_DOCS if quick else GENERATED_DOCS,
        queries=GENERATED_QUERIES,
        mean_words=GENERATED_WORDS,
    )
    return corpora.ensure_beir(params)


def benchmark(cases: list[Case], quick: bool, repeat: int, seed: int, warmup: bool) -> dict:
    datasets = {case.name: dataset_for(case, quick, seed) for case in cases}
    runs: dict[str, dict[str, list]] = {case.name: {"cold": [], "warm": []} for case in cases}
    errors: dict[str, str] = {}
    rounds = (["warm-up"] if warmup else []) + [f"round {i}/{repeat}" for i in range(1, repeat + 1)]
    for number, round_ in enumerate(rounds):
        for case in cases:
            if case.name in errors:
                continue
            cache = WORK / "cache" / case.name.replace(" ", "_").replace(",", "")
            shutil.rmtree(cache, ignore_errors=True)
            if round_ == "warm-up" and quick and case is not cases[0]:
                continue  # quick: the first case's run warms up imports and files for all
            states = ["cold"] if round_ == "warm-up" else ["cold", "warm"]
            try:
                for state in states:
                    print(f"{round_}: {case.label} ({case.dataset}), {state} cache ...", flush=True)
                    label = f"{number}-{state}"
                    result = run_once(case, datasets[case.name], cache, label, quick)
                    if round_ != "warm-up":
                        runs[case.name][state].append(result)
            except RuntimeError as exc:
                errors[case.name] = str(exc)
                print(exc, flush=True)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    summary = {}
    for case in cases:
        if case.name in errors:
            continue
        summary[case.name] = {
            "case": case.__dict__ | {"dataset_path": str(datasets[case.name])},
            **{state: summarize(measured) for state, measured in runs[case.name].items()},
        }
    return {"cases": summary, "errors": errors}


NUMERIC = (
    "wall_s",
    "duration_s",
    "process_s",
    "chunk_s",
    "index_s",
    "prepare_s",
    *[f"{s}_s" for s in QUERY_STAGES],
    "traces_s",
    "peak_mib",
    "cpu_s",
)


def summarize(measured: list[dict]) -> dict:
    out = {key: common.median_of(measured, key) for key in NUMERIC}
    last = measured[-1]
    for key in ("n_queries", "n_docs", "n_chunks", "cached"):
        out[key] = last[key]
    return out | {"runs": measured}


COLUMNS = [
    ("case", "case", "s"),
    ("dataset", "dataset", "s"),
    ("cache", "cache", "s"),
    ("wall_s", "wall s", ".2f"),
    ("process_s", "process", ".2f"),
    ("chunk_s", "chunk", ".2f"),
    ("index_s", "index", ".2f"),
    ("prepare_s", "prepare", ".2f"),
    ("retrieve_s", "retrieve", ".2f"),
    ("fusion_s", "fusion", ".3f"),
    ("rerank_s", "rerank", ".2f"),
    ("generate_s", "generate", ".2f"),
    ("judge_s", "judge", ".2f"),
    ("traces_s", "eval+other", ".2f"),
    ("peak_mib", "peak MiB", ".0f"),
    ("warm_cold", "warm/cold", "x"),
    ("vs_baseline", "vs baseline", "x"),
]


def table_rows(results: dict) -> list[dict]:
    rows = []
    cases = results["cases"]
    for name, case in cases.items():
        dataset = case["case"]["dataset"]
        base = next(
            (c for c in cases.values() if c["case"]["dataset"] == dataset),
            None,
        )
        for state in ("cold", "warm"):
            numbers = case[state]
            row = {"case": name, "dataset": dataset, "cache": state} | numbers
            row["warm_cold"] = numbers["wall_s"] / case["cold"]["wall_s"]
            row["vs_baseline"] = numbers["wall_s"] / base[state]["wall_s"] if base else None
            rows.append(row)
    return rows


def report(results: dict, path: Path) -> bool:
    print("\n" + common.describe(results))
    print(
        f"medians of {results['repeat']} rounds (after a warm-up round: {results['warmup']});"
        " seconds per stage as the run recorded them; process = wall - the run's duration_s"
        " (start, imports, loading and hashing the dataset, writing); eval+other = the rest of"
        " duration_s (pipeline set-up, evaluation, trace tables); vs baseline = wall / the first"
        " case on the same dataset, same cache\n"
    )
    for name, case in results["cases"].items():
        cold = case["cold"]
        print(
            f"{name} ({case['case']['dataset']}): {cold['n_docs']:,} docs, {cold['n_chunks']:,}"
            f" chunks, {cold['n_queries']} queries; warm cache reused: {case['warm']['cached']}"
        )
    print()
    print(common.table(table_rows(results), COLUMNS))
    for name, error in results["errors"].items():
        print(f"FAILED {name}: {error}")
    common.write_results(results, path)
    return not results["errors"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_GENERATED_DOCS:,} generated documents"
    )
    parser.add_argument(
        "--repeat", type=int, default=None, help="rounds on kestrel-kb (3; quick: 1)"
    )
    parser.add_argument(
        "--repeat-generated", type=int, default=1, help="rounds on the generated dataset"
    )
    parser.add_argument(
        "--cases", default="kestrel,generated", help="kestrel, generated, or both (comma-separated)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--json", type=Path, help="results file (default: results/end_to_end*.json)"
    )
    args = parser.parse_args()
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if min(args.repeat, args.repeat_generated) < 1:
        parser.error("--repeat and --repeat-generated must be at least 1")
    unknown = set(args.cases.split(",")) - {"kestrel", "generated"}
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: kestrel, generated")
    return args


def main() -> int:
    args = parse_args()
    wanted = args.cases.split(",")
    load_before = common.load_average()
    started = time.perf_counter()
    results = {"cases": {}, "errors": {}}
    if "kestrel" in wanted:
        part = benchmark(KESTREL_CASES, args.quick, args.repeat, args.seed, warmup=True)
        results["cases"] |= part["cases"]
        results["errors"] |= part["errors"]
    if "generated" in wanted:
        part = benchmark(
            GENERATED_CASES, args.quick, args.repeat_generated, args.seed, warmup=False
        )
        results["cases"] |= part["cases"]
        results["errors"] |= part["errors"]
    results |= {
        "benchmark": "end_to_end",
        "quick": args.quick,
        "repeat": args.repeat,
        "repeat_generated": args.repeat_generated,
        "warmup": ("baseline on kestrel-kb" if args.quick else "kestrel-kb cases")
        + "; none on the generated data (a full run each)",
        "seconds": time.perf_counter() - started,
        "load_average_1min": {"before": load_before, "after": common.load_average()},
        "machine": common.machine(PACKAGES),
        "source": common.source(),
    }
    shutil.rmtree(WORK / "runs", ignore_errors=True)
    default = common.RESULTS_DIR / ("end_to_end-quick.json" if args.quick else "end_to_end.json")
    return 0 if report(results, args.json or default) else 1


if __name__ == "__main__":
    sys.exit(main())
