"""Ranking-metric evaluation of a large TREC run: rag-bench against its peers, side by side.

Each (tool, repetition) runs in its own subprocess, which times its import, the loading of the
two files and the computation of the means (and their CPU time, all threads); the parent reads
the child's peak RSS. Every tool gets one warm-up run, then ``--repeat`` runs taken round-robin;
the table shows medians and each tool's total (load + compute, imports excluded) as a ratio to
rag-bench's.

ranx compiles with numba and caches the machine code on disk. All children share one
``NUMBA_CACHE_DIR``, empty at the start: ranx's warm-up run compiles (row "ranx (cold cache)", one
sample), the measured runs find the cache filled. Row "ranx (1st call)" is a measured run's first
``evaluate``, row "ranx" a second, warm call in the same process.

``--quick`` is a fast check: a run of 300 queries (300k lines), and each tool's warm-up and
repetitions in one child (so no interpreter start-up or import between them; the peak memory is
the child's over all of them). Its numba cache persists in ``benchmarks/data/numba-cache``, so
only the first quick run pays ranx's compilation (and shows the "cold cache" row); there is no
"1st call" row, the warm-up having compiled in the same process.

    python benchmarks/bench_eval.py --quick
    python benchmarks/bench_eval.py --repeat 5 --tools rag-bench,pytrec_eval

To profile one tool's phases: ``python -m pyinstrument benchmarks/bench_eval.py --child rag-bench
--qrels Q --run R``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import common

METRICS = ("precision@10", "recall@100", "mrr", "ndcg@10", "map")
TOLERANCE = 1e-9  # rag-bench and pytrec_eval (trec_eval) must agree this closely
REFERENCE, EXACT_PEER, WITHOUT_C = "rag-bench", "pytrec_eval", "rag-bench (no C)"
EXACT = (EXACT_PEER, WITHOUT_C)  # must give rag-bench's means to TOLERANCE
QUICK_QUERIES = 300
QUICK_NUMBA_CACHE = common.HERE / "data" / "numba-cache"

Means = dict[str, float]


# --- the tools: how each loads the files and computes the means of METRICS --------------------


def load_rag_bench(qrels_path: Path, run_path: Path):
    from rag_bench import load_qrels, load_run

    return load_qrels(qrels_path), load_run(run_path)


@contextmanager
def without_c():
    """As a user without a C compiler has it: the compiled modules absent, pyarrow reads the
    files and numpy matches them."""
    from rag_bench.io import idhash, tabular

    saved = tabular._scan, idhash._groups
    tabular._scan, idhash._groups = None, None
    try:
        yield
    finally:
        tabular._scan, idhash._groups = saved


def load_rag_bench_without_c(qrels_path: Path, run_path: Path):
    with without_c():
        return load_rag_bench(qrels_path, run_path)


def compute_rag_bench_without_c(qrels, run) -> tuple[Means, int]:
    with without_c():
        return compute_rag_bench(qrels, run)


def compute_rag_bench(qrels, run) -> tuple[Means, int]:
    from rag_bench import evaluate_run

    result = evaluate_run(qrels, run, ",".join(METRICS))
    return result.means(), result.n_queries


PYTREC_NAMES = {  # ours -> (pytrec_eval measure, its result key)
    "precision@10": ("P.10", "P_10"),
    "recall@100": ("recall.100", "recall_100"),
    "mrr": ("recip_rank", "recip_rank"),
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10"),
    "map": ("map", "map"),
}


def load_pytrec_eval(qrels_path: Path, run_path: Path):
    import pytrec_eval

    with open(qrels_path) as qrels_file, open(run_path) as run_file:
        return pytrec_eval.parse_qrel(qrels_file), pytrec_eval.parse_run(run_file)


def compute_pytrec_eval(qrels, run) -> tuple[Means, int]:
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {m for m, _ in PYTREC_NAMES.values()})
    per_query = evaluator.evaluate(run).values()
    means = {
        ours: statistics.fmean(values[key] for values in per_query)
        for ours, (_, key) in PYTREC_NAMES.items()
    }
    return means, len(per_query)


def load_ir_measures(qrels_path: Path, run_path: Path):
    import ir_measures

    # Materialised, so that reading is timed apart from computing (the readers are lazy).
    return list(ir_measures.read_trec_qrels(str(qrels_path))), list(
        ir_measures.read_trec_run(str(run_path))
    )


def compute_ir_measures(qrels, run) -> tuple[Means, None]:
    import ir_measures
    from ir_measures import AP, RR, P, R, nDCG

    measures = dict(zip(METRICS, (P @ 10, R @ 100, RR, nDCG @ 10, AP)))
    aggregate = ir_measures.calc_aggregate(list(measures.values()), qrels, run)
    return {ours: float(aggregate[m]) for ours, m in measures.items()}, None


def load_ranx(qrels_path: Path, run_path: Path):
    from ranx import Qrels, Run

    return Qrels.from_file(str(qrels_path), kind="trec"), Run.from_file(str(run_path), kind="trec")


def compute_ranx(qrels, run) -> tuple[Means, int]:
    from ranx import evaluate

    # Without make_comparable ranx refuses a run whose queries differ from the qrels'.
    means = evaluate(qrels, run, list(METRICS), make_comparable=True)
    return {m: float(means[m]) for m in METRICS}, len(qrels)


@dataclass(frozen=True)
class Tool:
    name: str
    module: str  # imported (and timed) before loading
    distribution: str  # for the version
    load: Callable[[Path, Path], tuple]
    compute: Callable[..., tuple[Means, int | None]]
    warm_call: bool = False  # compute twice; "compute_s" is then the second call


TOOLS = {
    tool.name: tool
    for tool in (
        # `import rag_bench` is lazy (it loads no pandas, pyarrow or numpy): the module that
        # evaluates is what loads them, as `import pytrec_eval` loads its extension
        Tool(
            "rag-bench",
            "rag_bench.evaluation.retrieval",
            "rag-bench",
            load_rag_bench,
            compute_rag_bench,
        ),
        Tool(
            WITHOUT_C,
            "rag_bench.evaluation.retrieval",
            "rag-bench",
            load_rag_bench_without_c,
            compute_rag_bench_without_c,
        ),
        Tool(
            "pytrec_eval",
            "pytrec_eval",
            "pytrec-eval-terrier",
            load_pytrec_eval,
            compute_pytrec_eval,
        ),
        Tool("ir_measures", "ir_measures", "ir-measures", load_ir_measures, compute_ir_measures),
        Tool("ranx", "ranx", "ranx", load_ranx, compute_ranx, warm_call=True),
    )
}


# --- the child: measured runs of one tool -----------------------------------------------------


def timed(func: Callable, *args):
    """``func(*args)``, its wall time and its CPU time (every thread of the process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = func(*args)
    return value, time.perf_counter() - wall, time.process_time() - cpu


def measure(tool: Tool, qrels_path: Path, run_path: Path) -> dict:
    """Load and compute once (twice for a warm call); times in s."""
    (qrels, run), load_s, load_cpu = timed(tool.load, qrels_path, run_path)
    (means, n_queries), compute_s, compute_cpu = timed(tool.compute, qrels, run)
    result = {"load_s": load_s}
    if tool.warm_call:
        result["first_compute_s"] = compute_s
        result["first_total_s"] = load_s + compute_s
        (means, n_queries), compute_s, compute_cpu = timed(tool.compute, qrels, run)
    return result | {
        "compute_s": compute_s,
        "total_s": load_s + compute_s,
        "cpu_s": load_cpu + compute_cpu,
        "n_queries": n_queries,
        "means": means,
    }


def child_main(name: str, qrels_path: Path, run_path: Path, rounds: int) -> None:
    """Import the tool (timed), then ``rounds`` measured runs, the data freed between them."""
    tool = TOOLS[name]
    _, import_s, _ = timed(importlib.import_module, tool.module)
    results = []
    for _ in range(rounds):
        results.append({"import_s": import_s} | measure(tool, qrels_path, run_path))
        gc.collect()
    common.emit({"rounds": results})


# --- where rag-bench's time goes: CPU per phase, on one thread --------------------------------


def phases_main(qrels_path: Path, run_path: Path) -> None:
    """rag-bench's load and compute once more under cProfile with a CPU clock, on one thread
    (Arrow's pool at 1, the conversions one after the other), so every CPU second lands in the
    phase that spent it; a warm-up run first. Emits CPU seconds per phase and their total."""
    import cProfile
    import pstats

    import pyarrow as pa

    from rag_bench.io import idhash, tabular

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    tabular.in_parallel = idhash.in_parallel = lambda calls, workers=2: [call() for call in calls]
    compute_rag_bench(*load_rag_bench(qrels_path, run_path))
    gc.collect()
    profile = cProfile.Profile(time.process_time)
    cpu = time.process_time()
    profile.enable()
    compute_rag_bench(*load_rag_bench(qrels_path, run_path))
    profile.disable()
    total = time.process_time() - cpu
    common.emit({"phases": split_phases(pstats.Stats(profile).stats), "total_cpu_s": total})


def split_phases(stats: dict) -> dict[str, float]:
    """CPU seconds per phase from a profile's table (pstats' ``stats``): non-overlapping, so
    they add up to the whole (the rest is "other")."""

    def keys(name: str) -> list:
        return [key for key in stats if key[2] == name and "rag_bench" in key[0]]

    def cumulative(name: str) -> float:
        return sum(stats[key][3] for key in keys(name))

    def own(name: str) -> float:
        return sum(stats[key][2] for key in keys(name))

    def called_from(name: str, caller: str) -> float:
        return sum(
            timing[3]
            for key in keys(name)
            for where, timing in stats[key][4].items()
            if where[2] == caller
        )

    hashing = cumulative("_cached_string_hashes")
    hashing_in_join = called_from("hashes", "_matching_judgements")
    scan = cumulative("_scan_part")  # the compiled scanner: split, parse, hash the doc ids
    parse = own("_read_fast")  # Arrow's read_csv is not traced: its time is _read_fast's own
    ids = cumulative("_categorical") + cumulative("_categorical_of_runs")
    checks = cumulative("_valid")
    loading = cumulative("load_qrels") + cumulative("load_run")
    join = cumulative("_matching_judgements") - hashing_in_join
    rank = cumulative("_ranks")
    judged = cumulative("rank_and_judge")
    kernels = cumulative("compute")
    evaluated = cumulative("evaluate_run") + cumulative("means")
    return {
        "scan lines (compiled: parse, hash ids)": scan,
        "parse (Arrow CSV reader, if declined)": parse,
        "ids to categoricals": ids,
        "hash document ids (numpy)": hashing,
        "checks (duplicates, values)": checks,
        "other loading (columns to pandas)": loading
        - scan
        - parse
        - ids
        - checks
        - (hashing - hashing_in_join),
        "join run with qrels": join,
        "rank (trec_eval order, ties)": rank,
        "other judging (sorts, counts)": judged - join - hashing_in_join - rank,
        "metric kernels": kernels,
        "per-query table and means": evaluated - judged - kernels,
    }


def format_phases(phases: dict, pytrec_cpu: float | None) -> str:
    total = phases["total_cpu_s"]
    lines = [f"{'phase':<36} {'cpu s':>7} {'share':>7} {'vs pytrec_eval':>15}"]
    rows = list(phases["phases"].items())
    rows.append(("other (profiler, interpreter)", total - sum(v for _, v in rows)))
    rows.append(("total (one thread)", total))
    for name, value in rows:
        ratio = f"{value / pytrec_cpu:.3f}x" if pytrec_cpu else "-"
        lines.append(f"{name:<36} {value:>7.3f} {value / total:>6.1%} {ratio:>15}")
    return "\n".join(lines)


# --- the parent: repetitions, medians, agreement, report ---------------------------------------


def run_child(name: str, qrels_path: Path, run_path: Path, numba_cache: Path, rounds: int):
    """``rounds`` measured runs of ``name`` in one fresh interpreter, each with the child's peak
    memory."""
    command = common.python_child(
        Path(__file__).resolve(), "--child", name, "--rounds", str(rounds)
    )
    command += ["--qrels", str(qrels_path), "--run", str(run_path)]
    env = os.environ | {"NUMBA_CACHE_DIR": str(numba_cache)}
    done = common.child_result(common.run_measured(command, env=env), name)
    return [result | {"peak_mib": done["peak_mib"]} for result in done["rounds"]]


def summarize(runs: list[dict]) -> dict:
    """Medians of the numeric fields of the measured runs; means and query count from the last.

    ``runs[0]`` is the warm-up, kept apart as ``cold``.
    """
    cold, measured = runs[0], runs[1:]
    numeric = [key for key, value in cold.items() if isinstance(value, float)]
    summary = {key: statistics.median(run[key] for run in measured) for key in numeric}
    last = measured[-1]
    return summary | {
        "means": last["means"],
        "n_queries": last["n_queries"],
        "cold": cold,
        "runs": measured,
    }


def benchmark(
    names: list[str],
    qrels_path: Path,
    run_path: Path,
    repeat: int,
    numba_cache: Path,
    one_child: bool,
) -> dict:
    """A warm-up per tool, then ``repeat`` measured runs: round-robin, one child each, or (with
    ``one_child``) all of a tool's runs in one child. A tool that fails is dropped."""
    runs: dict[str, list[dict]] = {name: [] for name in names}
    errors: dict[str, str] = {}
    if one_child:
        schedule = [(f"warm-up and {repeat} runs", name, 1 + repeat) for name in names]
    else:
        labels = ["warm-up"] + [f"round {i}/{repeat}" for i in range(1, repeat + 1)]
        schedule = [(label, name, 1) for label in labels for name in names]
    for label, name, rounds in schedule:
        if name in errors:
            continue
        print(f"{label} {name} ...", flush=True)
        try:
            runs[name] += run_child(name, qrels_path, run_path, numba_cache, rounds)
        except RuntimeError as exc:
            errors[name] = str(exc)
            print(exc, flush=True)
    tools = {name: summarize(r) for name, r in runs.items() if name not in errors}
    return {"tools": tools, "errors": errors}


def row(tool: str, numbers: dict, compute: str, total: str) -> dict:
    return {
        "tool": tool,
        "load_s": numbers["load_s"],
        "compute_s": numbers[compute],
        "total_s": numbers[total],
        "peak_mib": numbers["peak_mib"],
        "cpu_s": numbers["cpu_s"],
    }


def table_rows(tools: dict[str, dict], *, first_calls: bool, cold_cache: bool) -> list[dict]:
    """One row per tool (medians); a tool with a warm call adds its first call (when measured in
    a fresh process) and its warm-up run (when that found the compilation cache empty)."""
    rows = []
    for name, summary in tools.items():
        rows.append(row(name, summary, "compute_s", "total_s"))
        if "first_compute_s" not in summary:
            continue
        if first_calls:
            rows.append(row(f"{name} (1st call)", summary, "first_compute_s", "first_total_s"))
        if cold_cache:
            rows.append(
                row(f"{name} (cold cache)", summary["cold"], "first_compute_s", "first_total_s")
            )
    base = tools.get(REFERENCE, {}).get("total_s")
    for line in rows:
        line["ratio"] = line["total_s"] / base if base else float("nan")
    return rows


def format_table(rows: list[dict]) -> str:
    header = (
        f"{'tool':<20} {'load s':>8} {'compute s':>10} {'total s':>8} {'peak MiB':>9} {'ratio':>7}"
        f" {'cpu s':>7}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['tool']:<20} {r['load_s']:>8.2f} {r['compute_s']:>10.2f} {r['total_s']:>8.2f}"
            f" {r['peak_mib']:>9.0f} {r['ratio']:>6.2f}x {r['cpu_s']:>7.2f}"
        )
    return "\n".join(lines)


def format_means(tools: dict[str, dict]) -> str:
    lines = [f"{'tool':<14} {'queries':>8} " + " ".join(f"{m:>12}" for m in METRICS)]
    for name, summary in tools.items():
        n = summary["n_queries"]
        values = " ".join(f"{summary['means'][m]:>12.6f}" for m in METRICS)
        lines.append(f"{name:<14} {n if n is not None else '?':>8} {values}")
    return "\n".join(lines)


def agreement(tools: dict[str, dict]) -> tuple[bool, list[str]]:
    """Exact agreement of rag-bench with pytrec_eval (and with itself without its compiled
    modules); the other peers' largest differences."""
    if REFERENCE not in tools:
        return True, []
    ours = tools[REFERENCE]
    ok, lines = True, []
    for name, summary in tools.items():
        if name == REFERENCE:
            continue
        diffs = {m: abs(summary["means"][m] - ours["means"][m]) for m in METRICS}
        worst = max(diffs, key=diffs.get)
        if name in EXACT:
            bad = [m for m in METRICS if diffs[m] > TOLERANCE]
            if summary["n_queries"] != ours["n_queries"]:
                bad.append("query count")
            for m in bad:
                mine = ours["n_queries"] if m == "query count" else ours["means"][m]
                theirs = summary["n_queries"] if m == "query count" else summary["means"][m]
                lines.append(f"MISMATCH {m}: {REFERENCE} {mine!r} vs {name} {theirs!r}")
            ok = ok and not bad
            if not bad:
                lines.append(f"{name}: agrees with {REFERENCE} to {TOLERANCE:g} on all metrics")
        else:
            lines.append(
                f"{name}: differs by up to {diffs[worst]:.2e} ({worst}); conventions differ,"
                " not required to agree"
            )
    return ok, lines


def available(names: list[str]) -> list[str]:
    found = [n for n in names if importlib.util.find_spec(TOOLS[n].module) is not None]
    for name in sorted(set(names) - set(found)):
        print(f"skipping {name}: not installed (pip install -r benchmarks/requirements.txt)")
    return found


def dataset(args: argparse.Namespace) -> tuple[Path, Path, dict]:
    """The files to evaluate: given ones, or generated (or reused) for the parameters."""
    import generate  # here, not at the top: children must not load numpy and pyarrow for it

    if args.qrels and args.run:
        return args.qrels, args.run, {"qrels": str(args.qrels), "run": str(args.run)}
    params = generate.Params(seed=args.seed, queries=QUICK_QUERIES if args.quick else args.queries)
    folder = generate.ensure(params)
    described = {"generated": vars(params), "lines": count_lines(folder / generate.RUN_FILE)}
    return folder / generate.QRELS_FILE, folder / generate.RUN_FILE, described


def count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 24), b""))


def report(results: dict, path: Path) -> bool:
    """Print the tables and agreement, write the JSON; False on a mismatch or a failed tool."""
    print("\n" + common.describe(results))
    print(f"data: {results['data']}")
    how = "in one child per tool" if results["one_child"] else "each in its own child"
    print(f"medians of {results['repeat']} runs after a warm-up ({how}); total = load + compute")
    print("(imports excluded); ratio = total / rag-bench's total; cpu s = CPU time of load +")
    print("compute, all threads\n")
    print(format_table(results["rows"]))
    print("\nmeans\n" + format_means(results["tools"]))
    if "phases" in results:
        pytrec = results["tools"].get(EXACT_PEER, {}).get("cpu_s")
        print("\nwhere rag-bench's CPU time goes (one thread; vs pytrec_eval = / its CPU s)")
        print(format_phases(results["phases"], pytrec))
    ok, lines = agreement(results["tools"])
    results["agreement_ok"] = ok
    lines += [f"FAILED {name}: {error}" for name, error in results["errors"].items()]
    print("\n" + "\n".join(lines))
    common.write_results(results, path)
    return ok and not results["errors"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_QUERIES} queries, one child per tool"
    )
    parser.add_argument("--repeat", type=int, default=3, help="measured runs per tool")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset")
    parser.add_argument("--seed", type=int, default=0, help="of the generated data")
    parser.add_argument("--queries", type=int, default=10_000, help="of the generated data")
    parser.add_argument("--qrels", type=Path, help="evaluate these files instead of generating")
    parser.add_argument("--run", type=Path)
    parser.add_argument("--json", type=Path, help="results file (default: results/eval*.json)")
    parser.add_argument("--child", choices=list(TOOLS), help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--phases-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-phases", action="store_true", help="skip the one-thread profile of rag-bench"
    )
    args = parser.parse_args()
    if bool(args.qrels) != bool(args.run):
        parser.error("--qrels and --run go together")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    unknown = set(args.tools.split(",")) - set(TOOLS)
    if unknown:
        parser.error(f"unknown tools {sorted(unknown)}; known: {', '.join(TOOLS)}")
    return args


@contextmanager
def numba_cache(persistent: bool):
    """ranx's compilation cache: a fresh, empty folder, or the one quick runs share; and whether
    it starts empty."""
    if persistent:
        QUICK_NUMBA_CACHE.mkdir(parents=True, exist_ok=True)
        yield QUICK_NUMBA_CACHE, not any(QUICK_NUMBA_CACHE.iterdir())
        return
    with tempfile.TemporaryDirectory(prefix="bench-numba-") as folder:
        yield Path(folder), True


def main() -> int:
    args = parse_args()
    if args.child:
        child_main(args.child, args.qrels, args.run, args.rounds)
        return 0
    if args.phases_child:
        phases_main(args.qrels, args.run)
        return 0
    names = available(args.tools.split(","))
    qrels_path, run_path, data = dataset(args)
    load_before = common.load_average()
    with numba_cache(persistent=args.quick) as (cache, cold_cache):
        results = benchmark(names, qrels_path, run_path, args.repeat, cache, one_child=args.quick)
    results |= {"data": data, "repeat": args.repeat, "metrics": list(METRICS)}
    results |= {"one_child": args.quick, "numba_cache_cold": cold_cache}
    results["load_average_1min"] = {"before": load_before, "after": common.load_average()}
    results["machine"] = common.machine([t.distribution for t in TOOLS.values()] + ["numba"])
    results["source"] = common.source()
    results["rows"] = table_rows(
        results["tools"], first_calls=not args.quick, cold_cache=cold_cache
    )
    if REFERENCE in names and not args.no_phases:
        print("rag-bench on one thread, profiled by phase ...", flush=True)
        command = common.python_child(Path(__file__).resolve(), "--phases-child")
        command += ["--qrels", str(qrels_path), "--run", str(run_path)]
        results["phases"] = common.child_result(common.run_measured(command), "phases")
    default = common.RESULTS_DIR / ("eval-quick.json" if args.quick else "eval.json")
    return 0 if report(results, args.json or default) else 1


if __name__ == "__main__":
    sys.exit(main())
