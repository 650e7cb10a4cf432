"""BM25 indexing and querying: rag-bench's sparse retriever against bm25s and rank_bm25.

On generated English-like corpora (``corpora.py``; 100k and 1M chunks, 1,000 queries), each tool
indexes the whole corpus and answers every query with its top 100:

- rag-bench: ``BM25Retriever().fit(texts, EnglishAnalyzer())`` and ``search(queries, 100)``;
- bm25s, used directly: ``bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer("english"))``,
  ``bm25s.BM25().index(tokens)``, then the queries tokenized the same way and
  ``retrieve(tokens, k=100)`` with bm25s's default numpy backend. Row "bm25s numba" is the same
  index queried through bm25s's numba backend (compiled during the warm-up, which takes ~6 s a
  process, so only in the first round), when numba is installed;
- rank_bm25: ``BM25Okapi`` over the same tokens as bm25s (tokenizing counts as indexing) and
  ``get_top_n(tokens, ids, 100)``. It scores every document in Python for every query term, so
  it runs at the smaller size only, in the first round only, and on the first
  ``RANK_BM25_QUERIES`` queries; its queries/s is measured on those.

All three use k1 = 1.5, b = 0.75 and run single-threaded (bm25s's default). Every (tool, size,
round) runs in its own process: it loads the corpus, warms up on a slice (the first
``WARMUP_DOCS`` documents, at most a tenth of the corpus, and ``WARMUP_QUERIES`` queries:
imports, caches, numba compilation), then indexes and queries ``--timed-runs`` times (once; with
``--quick`` three times, and the round reports the median of each time), and reports its peak
RSS (corpus included). Rounds go round-robin over the tools; the tables show medians over
``--repeat`` rounds at the smaller size and ``--repeat-large`` rounds at the larger ones, where
the first ``LARGE_QUERIES`` queries are run (all 1,000 at the smaller size). ``--quick`` runs
10k and 30k chunks, one round each of three timed runs: a process per round costs more than
indexing 10k chunks.

Agreement: rag-bench's top 100 (it leaves out chunks that match no query term, which score 0)
is compared with bm25s's positive-scored top 100: the share of queries whose id lists are
identical, whose score lists are identical, whose id lists are identical once bm25s's tied
scores are ordered by position as rag-bench orders them, and the mean overlap of the two sets
(|A ∩ B| / max(|A|, |B|)). rank_bm25 (Okapi idf) is compared likewise with bm25s
``method="robertson"``, the same formula (bm25s floors a negative idf at 0 where rank_bm25
uses 0.25 × the mean idf).

    python benchmarks/bench_retrieval.py --quick
    python benchmarks/bench_retrieval.py --sizes 100000 --repeat 5 --tools rag-bench,bm25s
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
import time
from pathlib import Path

import common
import corpora

DEPTH = 100
WARMUP_DOCS, WARMUP_QUERIES = 5_000, 50
RANK_BM25_QUERIES = 50
LARGE_QUERIES = 300  # at the larger sizes (bm25s's numpy top-k takes ~35 ms a query at 1M)
TOOLS = ("rag-bench", "bm25s", "rank_bm25")
REFERENCE, PEER = "rag-bench", "bm25s"
PACKAGES = ("bm25s", "PyStemmer", "rank-bm25", "numba")
TIMES = ("index_s", "query_s", "numba_query_s")
GOAL_OVERHEAD = 0.15  # rag-bench's time over bare bm25s's, at most
SIZES, QUICK_SIZES = (100_000, 1_000_000), (10_000, 30_000)
QUERIES = 1_000


# --- the tools: index the texts, then the top DEPTH of each query ----------------------------


def run_rag_bench(texts: list[str], queries: list[str]) -> dict:
    """Index and query through rag-bench; the analyzer and the scoring are timed apart by
    subclasses that only add clocks."""
    from rag_bench.components.analyzers import EnglishAnalyzer
    from rag_bench.components.sparse import BM25Retriever
    from rag_bench.model import Query

    spent = {"analyze_many": 0.0, "analyze_one": 0.0, "scores": 0.0}

    class TimedAnalyzer(EnglishAnalyzer):
        def terms_many(self, many):
            started = time.perf_counter()
            out = super().terms_many(many)
            spent["analyze_many"] += time.perf_counter() - started
            return out

        def terms(self, text):
            started = time.perf_counter()
            out = super().terms(text)
            spent["analyze_one"] += time.perf_counter() - started
            return out

    class TimedRetriever(BM25Retriever):
        def bm25_scores(self, query):
            started = time.perf_counter()
            out = super().bm25_scores(query)
            spent["scores"] += time.perf_counter() - started
            return out

    retriever = TimedRetriever()
    started = time.perf_counter()
    retriever.fit(texts, TimedAnalyzer())
    index_s = time.perf_counter() - started
    analyze_index = spent["analyze_many"]  # terms_many calls terms: not counted twice
    spent["analyze_one"] = 0.0
    objects = [Query(str(i), text) for i, text in enumerate(queries)]
    started = time.perf_counter()
    hits = retriever.search(objects, DEPTH)
    query_s = time.perf_counter() - started
    return {
        "index_s": index_s,
        "query_s": query_s,
        "phases": {
            "index: analyzer (terms_many)": analyze_index,
            "index: term ids + bm25s.BM25.index(Tokenized)": index_s - analyze_index,
            "query: analyzer (terms)": spent["analyze_one"],
            "query: token ids + scores": spent["scores"] - spent["analyze_one"],
            "query: top-k of the matching chunks": query_s - spent["scores"],
        },
        "ids": [h.index.tolist() for h in hits],
        "scores": [h.score.tolist() for h in hits],
    }


def _bm25s_tokenize(texts: list[str], return_ids: bool = True):
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    return bm25s.tokenize(
        texts, stopwords="en", stemmer=stemmer, return_ids=return_ids, show_progress=False
    )


def run_bm25s(texts: list[str], queries: list[str], numba: bool = True) -> dict:
    import bm25s

    started = time.perf_counter()
    tokens = _bm25s_tokenize(texts)
    tokenize_s = time.perf_counter() - started
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    index_s = time.perf_counter() - started
    started = time.perf_counter()
    query_tokens = _bm25s_tokenize(queries)
    query_tokenize_s = time.perf_counter() - started
    docs, scores = index.retrieve(query_tokens, k=min(DEPTH, len(texts)), show_progress=False)
    query_s = time.perf_counter() - started
    out = {
        "index_s": index_s,
        "query_s": query_s,
        "phases": {
            "index: bm25s.tokenize": tokenize_s,
            "index: bm25s.BM25.index(Tokenized)": index_s - tokenize_s,
            "query: bm25s.tokenize": query_tokenize_s,
            "query: retrieve (scores + top-k)": query_s - query_tokenize_s,
        },
    }
    out |= _positive(docs, scores)
    if numba and importlib.util.find_spec("numba") is not None:
        index.backend = "numba"  # the same index, queried through bm25s's numba backend
        started = time.perf_counter()
        query_tokens = _bm25s_tokenize(queries)
        docs_numba, _ = index.retrieve(query_tokens, k=min(DEPTH, len(texts)), show_progress=False)
        out["numba_query_s"] = time.perf_counter() - started
        index.backend = "numpy"
    return out


def _positive(docs, scores) -> dict:
    """bm25s's results without the zero-scored tail (rag-bench leaves those out)."""
    ids, values = [], []
    for row_docs, row_scores in zip(docs, scores):
        keep = row_scores > 0
        ids.append(row_docs[keep].tolist())
        values.append(row_scores[keep].astype("float64").tolist())
    return {"ids": ids, "scores": values}


def run_rank_bm25(texts: list[str], queries: list[str]) -> dict:
    import numpy as np
    from rank_bm25 import BM25Okapi

    queries = queries[:RANK_BM25_QUERIES]
    started = time.perf_counter()
    tokens = _bm25s_tokenize(texts, return_ids=False)
    index = BM25Okapi(tokens, k1=1.5, b=0.75)
    index_s = time.perf_counter() - started
    positions = list(range(len(texts)))
    started = time.perf_counter()
    query_tokens = _bm25s_tokenize(queries, return_ids=False)
    top = [index.get_top_n(q, positions, n=min(DEPTH, len(texts))) for q in query_tokens]
    query_s = time.perf_counter() - started
    # Not timed: the scores of those lists, for comparing with bm25s's robertson variant.
    scores = [index.get_scores(q)[t] for q, t in zip(query_tokens, top)]
    ids = [np.asarray(t)[s > 0].tolist() for t, s in zip(top, scores)]
    values = [s[s > 0].tolist() for s in scores]
    return {
        "index_s": index_s,
        "query_s": query_s,
        "n_queries": len(queries),
        "ids": ids,
        "scores": values,
        "agreement_robertson": _robertson_agreement(texts, query_tokens, ids, values),
    }


def _robertson_agreement(texts, query_tokens, ids, values) -> dict:
    """rank_bm25's lists against bm25s method="robertson" on the same tokens (not timed)."""
    import bm25s

    index = bm25s.BM25(method="robertson")
    index.index(_bm25s_tokenize(texts), show_progress=False)
    docs, scores = index.retrieve(
        [q or [""] for q in query_tokens], k=min(DEPTH, len(texts)), show_progress=False
    )
    theirs = _positive(docs, scores)
    # bm25s's robertson scores lack rank_bm25's constant factor (k1 + 1): compare orders only.
    return agreement({"ids": ids, "scores": values}, theirs, compare_scores=False)


RUNNERS = {"rag-bench": run_rag_bench, "bm25s": run_bm25s, "rank_bm25": run_rank_bm25}


# --- agreement of two tools' top lists ---------------------------------------------------------


def _ties_by_position(ids: list[int], scores: list[float]) -> list[int]:
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))
    return [ids[i] for i in order]


def agreement(ours: dict, theirs: dict, compare_scores: bool = True) -> dict:
    """How far two tools' top lists agree, query by query (see the module docstring)."""
    n = min(len(ours["ids"]), len(theirs["ids"]))
    counts = {"identical_ids": 0, "identical_scores": 0, "ties_by_position": 0, "above_cut_ties": 0}
    overlap = 0.0
    for i in range(n):
        a_ids, b_ids = ours["ids"][i], theirs["ids"][i]
        a_scores, b_scores = ours["scores"][i], theirs["scores"][i]
        counts["identical_ids"] += a_ids == b_ids
        counts["identical_scores"] += a_scores == b_scores
        b_sorted = _ties_by_position(b_ids, b_scores)
        counts["ties_by_position"] += a_ids == b_sorted
        # Without the documents tied with the last kept score, the choice among which is free.
        cut = min(b_scores) if b_scores else None
        counts["above_cut_ties"] += [d for d, s in zip(a_ids, a_scores) if s != cut] == [
            d for d, s in zip(b_sorted, sorted(b_scores, reverse=True)) if s != cut
        ]
        size = max(len(a_ids), len(b_ids))
        overlap += len(set(a_ids) & set(b_ids)) / size if size else 1.0
    out = {"queries": n} | {k: v / n if n else float("nan") for k, v in counts.items()}
    if not compare_scores:
        for key in ("identical_scores", "ties_by_position", "above_cut_ties"):
            out.pop(key)
    return out | {"mean_overlap": overlap / n if n else float("nan")}


# --- the child: one measured run of one tool ---------------------------------------------------


def child_main(
    tool: str, folder: Path, out: Path, max_queries: int, numba: bool, timed_runs: int
) -> None:
    docs = corpora.load_docs(folder, ("text",))["text"]
    queries = corpora.load_queries(folder)["text"][:max_queries]
    run = RUNNERS[tool]
    if tool == "bm25s":
        run = functools.partial(run_bm25s, numba=numba)
    warmup = min(WARMUP_DOCS, max(len(docs) // 10, 1_000))
    run(docs[:warmup], queries[:WARMUP_QUERIES])  # not timed
    results = []
    for _ in range(timed_runs):
        result = run(docs, queries)
        lists = {"ids": result.pop("ids"), "scores": result.pop("scores")}
        results.append(result)
    # The lists (of the last run) go to a file; the parent reads them for the agreement.
    out.write_text(json.dumps(lists))
    result = median_run(results)
    common.emit(result | {"n_docs": len(docs), "n_queries": result.get("n_queries", len(queries))})


def median_run(results: list[dict]) -> dict:
    """Several timed runs in one process as one: the median of each time and phase, the rest
    from the last run."""
    out = results[-1] | {key: common.median_of(results, key) for key in TIMES if key in results[0]}
    if "phases" in out:
        phases = [r["phases"] for r in results]
        out["phases"] = {phase: common.median_of(phases, phase) for phase in out["phases"]}
    return out | {"timed_runs": len(results)}


# --- the parent ------------------------------------------------------------------------------


def run_child(
    tool: str, folder: Path, lists: Path, queries: int, numba: bool, timed_runs: int
) -> dict:
    command = common.python_child(Path(__file__), "--child", tool, "--corpus", str(folder))
    command += ["--lists", str(lists), "--max-queries", str(queries)]
    command += ["--timed-runs", str(timed_runs)]
    done = common.run_measured(command + (["--numba"] if numba else []))
    return common.child_result(done, f"{tool} on {folder.name}")


def measure_size(
    size: int,
    tools: list[str],
    rounds: int,
    timed_runs: int,
    queries: int,
    run_queries: int,
    seed: int,
) -> dict:
    """All rounds at one corpus size: medians per tool, agreement with bm25s."""
    params = corpora.Params(seed=seed, docs=size, queries=queries)
    folder = corpora.ensure(params)
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    lists: dict[str, dict] = {}
    errors: dict[str, str] = {}
    for round_ in range(1, rounds + 1):
        for tool in tools:
            if tool in errors or (tool == "rank_bm25" and round_ > 1):
                continue
            print(f"{size:,} docs, round {round_}/{rounds}: {tool} ...", flush=True)
            path = common.RESULTS_DIR.parent / "data" / f".lists-{tool}.json"
            try:
                numba = round_ == 1  # numba compiles for seconds in every process: once
                timed = 1 if tool == "rank_bm25" else timed_runs
                runs[tool].append(run_child(tool, folder, path, run_queries, numba, timed))
                lists[tool] = json.loads(path.read_text())
            except RuntimeError as exc:
                errors[tool] = str(exc)
                print(exc, flush=True)
            finally:
                path.unlink(missing_ok=True)
    summary = {}
    for tool, measured in runs.items():
        if not measured:
            continue
        keys = [*TIMES, "peak_mib"]
        summary[tool] = {k: common.median_of(measured, k) for k in keys if k in measured[0]}
        summary[tool] |= {
            "n_docs": measured[0]["n_docs"],
            "n_queries": measured[0]["n_queries"],
            "rounds": len(measured),
            "phases": {
                phase: common.median_of([m["phases"] for m in measured], phase)
                for phase in measured[0].get("phases", {})
            },
            "runs": measured,
        }
        if "agreement_robertson" in measured[-1]:
            summary[tool]["agreement_robertson"] = measured[-1]["agreement_robertson"]
    agree = {}
    if REFERENCE in lists and PEER in lists:
        agree = agreement(lists[REFERENCE], lists[PEER])
    return {"size": size, "corpus": params.__dict__, "tools": summary, "agreement": agree} | {
        "errors": errors
    }


def rows_of(result: dict) -> list[dict]:
    """Table rows of one size: each tool, ratios to bm25s (time / bm25s time)."""
    tools, size = result["tools"], result["size"]
    peer = tools.get(PEER, {})
    rows = []

    def row(name, index_s, query_s, n_docs, n_queries, peak):
        return {
            "size": f"{size:,}",
            "tool": name,
            "index_s": index_s,
            "docs_per_s": n_docs / index_s if index_s else None,
            "query_s": query_s,
            "n_queries": n_queries,
            "queries_per_s": n_queries / query_s if query_s else None,
            "index_ratio": index_s / peer["index_s"] if index_s and peer else None,
            "query_ratio": (query_s / n_queries) / (peer["query_s"] / peer["n_queries"])
            if query_s and peer
            else None,
            "peak_mib": peak,
        }

    for name, t in tools.items():
        rows.append(
            row(name, t["index_s"], t["query_s"], t["n_docs"], t["n_queries"], t["peak_mib"])
        )
        if t.get("numba_query_s"):
            rows.append(
                row("bm25s numba", None, t["numba_query_s"], t["n_docs"], t["n_queries"], None)
            )
    return rows


COLUMNS = [
    ("size", "chunks", "s"),
    ("tool", "tool", "s"),
    ("index_s", "index s", ".2f"),
    ("docs_per_s", "docs/s", ",.0f"),
    ("index_ratio", "vs bm25s", "x"),
    ("n_queries", "queries", "d"),
    ("query_s", "query s", ".3f"),
    ("queries_per_s", "queries/s", ",.0f"),
    ("query_ratio", "vs bm25s", "x"),
    ("peak_mib", "peak MiB", ".0f"),
]


def report(results: dict, path: Path) -> bool:
    print("\n" + common.describe(results))
    print(
        f"median of the rounds per size ({results['repeat']} at the smaller size,"
        f" {results['repeat_large']} at the larger), each in a fresh process after a warm-up on"
        f" up to {WARMUP_DOCS:,} docs, each the median of {results['timed_runs']} timed runs in"
        " that process; index s = tokenize + index, query s = tokenize + top"
        f" {DEPTH} of every query (queries: see the table); vs bm25s = time / bm25s's time"
        f" (per query for queries); rank_bm25: one round, first {RANK_BM25_QUERIES} queries,"
        " smaller size only; bm25s numba: first round only\n"
    )
    rows = [r for size in results["sizes"] for r in rows_of(size)]
    print(common.table(rows, COLUMNS))
    ok = True
    for size in results["sizes"]:
        tools = size["tools"]
        print(f"\n{size['size']:,} chunks")
        for name in (REFERENCE, PEER):
            if name in tools:
                phases = ", ".join(f"{k} {v:.2f} s" for k, v in tools[name]["phases"].items())
                print(f"  {name} phases: {phases}")
        if REFERENCE in tools and PEER in tools:
            ours, theirs = tools[REFERENCE], tools[PEER]
            index_over = ours["index_s"] / theirs["index_s"] - 1
            query_over = ours["query_s"] / theirs["query_s"] - 1
            total_over = (ours["index_s"] + ours["query_s"]) / (
                theirs["index_s"] + theirs["query_s"]
            ) - 1
            size["overhead"] = {"index": index_over, "query": query_over, "total": total_over}
            verdict = "met" if max(index_over, query_over) <= GOAL_OVERHEAD else "NOT met"
            print(
                f"  rag-bench over bare bm25s: indexing {index_over:+.1%}, querying"
                f" {query_over:+.1%}, both {total_over:+.1%} (goal: at most"
                f" +{GOAL_OVERHEAD:.0%} each: {verdict})"
            )
        if size["agreement"]:
            a = size["agreement"]
            print(
                f"  top {DEPTH} of rag-bench vs bm25s over {a['queries']} queries: identical id"
                f" lists {a['identical_ids']:.1%}; identical score lists"
                f" {a['identical_scores']:.1%}; identical ids once bm25s's tied scores are"
                f" ordered by position {a['ties_by_position']:.1%}, and also leaving out the"
                f" documents tied at the cut {a['above_cut_ties']:.1%}; mean overlap"
                f" {a['mean_overlap']:.2%}"
            )
            ok = ok and a["identical_scores"] == 1.0
        if "rank_bm25" in tools and "agreement_robertson" in tools["rank_bm25"]:
            a = tools["rank_bm25"]["agreement_robertson"]
            print(
                f"  rank_bm25 vs bm25s robertson over {a['queries']} queries: identical id lists"
                f" {a['identical_ids']:.1%}, mean overlap {a['mean_overlap']:.2%}"
            )
        for tool, error in size["errors"].items():
            print(f"  FAILED {tool}: {error}")
            ok = False
    common.write_results(results, path)
    return ok


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="10k and 30k chunks, one process of 3 timed runs"
    )
    parser.add_argument("--sizes", help="comma-separated corpus sizes (default 100000,1000000)")
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument(
        "--repeat", type=int, default=None, help="rounds at the smaller size (3; quick: 1)"
    )
    parser.add_argument("--repeat-large", type=int, default=1, help="rounds at larger sizes")
    parser.add_argument(
        "--timed-runs",
        type=int,
        default=None,
        help="timed runs per round, in its process after the warm-up (1; quick: 3)",
    )
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="results file (default: results/retrieval*.json)")
    parser.add_argument("--child", choices=TOOLS, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--lists", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--max-queries", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--numba", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.timed_runs is None:
        args.timed_runs = 3 if args.quick else 1
    unknown = set(args.tools.split(",")) - set(TOOLS)
    if unknown:
        parser.error(f"unknown tools {sorted(unknown)}; known: {', '.join(TOOLS)}")
    if min(args.repeat, args.repeat_large, args.timed_runs) < 1:
        parser.error("--repeat, --repeat-large and --timed-runs must be at least 1")
    return args


def available(names: list[str]) -> list[str]:
    modules = {"rag-bench": "rag_bench", "bm25s": "bm25s", "rank_bm25": "rank_bm25"}
    found = [n for n in names if importlib.util.find_spec(modules[n]) is not None]
    for name in sorted(set(names) - set(found)):
        print(f"skipping {name}: not installed (pip install -r benchmarks/requirements.txt)")
    return found


def main() -> int:
    args = parse_args()
    if args.child:
        child_main(
            args.child, args.corpus, args.lists, args.max_queries, args.numba, args.timed_runs
        )
        return 0
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    sizes = sorted(sizes or (QUICK_SIZES if args.quick else SIZES))
    tools = available(args.tools.split(","))
    load_before = common.load_average()
    started = time.perf_counter()
    measured = []
    for size in sizes:
        chosen = [t for t in tools if t != "rank_bm25" or size == sizes[0]]
        small = size == sizes[0]
        rounds = args.repeat if small else args.repeat_large
        run_queries = args.queries if small else min(args.queries, LARGE_QUERIES)
        measured.append(
            measure_size(
                size, chosen, rounds, args.timed_runs, args.queries, run_queries, args.seed
            )
        )
    results = {
        "benchmark": "retrieval",
        "quick": args.quick,
        "repeat": args.repeat,
        "repeat_large": args.repeat_large,
        "timed_runs": args.timed_runs,
        "depth": DEPTH,
        "seconds": time.perf_counter() - started,
        "load_average_1min": {"before": load_before, "after": common.load_average()},
        "machine": common.machine(PACKAGES),
        "source": common.source(),
        "sizes": measured,
    }
    default = common.RESULTS_DIR / ("retrieval-quick.json" if args.quick else "retrieval.json")
    return 0 if report(results, args.json or default) else 1


if __name__ == "__main__":
    sys.exit(main())
