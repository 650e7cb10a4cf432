"""The quality report of generated test sets (``rag-bench generate``) on a public BEIR corpus
and on the shipped kestrel-kb, and ``baseline`` run on each generated set:

    python benchmarks/testset_quality.py [--dataset SOURCE | --mirror CLONE] [--n 200] [--docs]

The BEIR corpus is found as ``beir_table.py`` finds it (ArguAna from the public snapshot named
there). For each corpus it generates ``--n`` queries offline (seed ``--seed``), runs
``baseline`` on the generated set, and for kestrel-kb also reports the hand-written queries'
difficulty with the same measure (the BM25 rank of the best relevant document). Writes
``benchmarks/results/generate-<corpus>.json``; ``--docs`` rewrites the tables in
docs/generate.md between their markers from those files.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from collections import Counter
from pathlib import Path

from beir_table import find_dataset
from common import RESULTS_DIR

from rag_bench.data.dataset import load_dataset
from rag_bench.experiment.runner import run_variant
from rag_bench.testsets.generate import generate
from rag_bench.testsets.quality import quality_report

DOCS = Path(__file__).resolve().parent.parent / "docs" / "generate.md"
START, END = "<!-- testset-quality:start -->", "<!-- testset-quality:end -->"
LLM_TOKENS = 48
HEADLINE = ("ndcg@10", "recall@10", "answer_f1", "key_fact_recall")


def with_llm(source: Path, n: int, seed: int, out: Path, work: Path) -> dict:
    """A small set worded by the packaged SmolLM2 (the llama_cpp generator)."""
    if out.exists():
        shutil.rmtree(out)
    started = time.process_time()
    made = generate(
        source,
        out,
        n=n,
        seed=seed,
        llm="llama_cpp",
        llm_overrides=[f"generator.max_tokens={LLM_TOKENS}"],
        cache_dir=work / "cache",
    )
    q = made.quality
    return {
        "model": "SmolLM2-135M-Instruct (packaged), llama_cpp generator",
        "max_tokens": LLM_TOKENS,
        "n": n,
        "cpu_seconds": round(time.process_time() - started, 1),
        "methods": made.methods,
        "unusable_replies": made.llm_unusable,
        "answerability": q["answerability"],
        "difficulty": {k: v for k, v in q["difficulty"].items() if k != "by_category"},
        "queries": [
            {"category": p.category, "method": p.method, "text": p.text, "gold": p.gold_answer}
            for _, p in made.queries
        ],
    }


def measure(name: str, source: Path, n: int, seed: int, work: Path, llm_n: int = 0) -> dict:
    """Generate (or reuse the complete set generated before with the same parameters), run
    baseline on it, and gather the numbers."""
    out = work / f"generated-{name}-s{seed}-n{n}"
    previous = RESULTS_DIR / f"generate-{name}.json"
    cpu = None
    if not (out / "quality.json").is_file():
        if out.exists():
            shutil.rmtree(out)
        started = time.process_time()
        generate(source, out, n=n, seed=seed, cache_dir=work / "cache")
        cpu = round(time.process_time() - started, 1)
    elif previous.is_file():
        cpu = json.loads(previous.read_text()).get("generate_cpu_seconds")
    quality = json.loads((out / "quality.json").read_text())
    records = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    run = run_variant("baseline", out, runs_dir=work / "runs", cache_dir=work / "cache")
    metrics = run.metrics[run.metrics["metric"].isin(HEADLINE)]
    by_category = metrics.groupby(["category", "metric"])["value"].mean()
    step = max(1, len(records) // 8)
    result = {
        "corpus": name,
        "source": str(source),
        "n": n,
        "seed": seed,
        "methods": dict(sorted(Counter(r["generated"]["method"] for r in records).items())),
        "generate_cpu_seconds": cpu,
        "quality": quality,
        "baseline_run": {
            "run_id": run.run_id,
            "all": {
                m: round(float(metrics.loc[metrics["metric"] == m, "value"].mean()), 4)
                for m in HEADLINE
            },
            "by_category": {
                c: {m: round(float(v), 4) for (cc, m), v in by_category.items() if cc == c}
                for c in sorted({c for c, _ in by_category.index})
            },
        },
        "examples": [
            {
                "id": r["_id"],
                "category": r["category"],
                "method": r["generated"]["method"],
                "text": r["text"],
                "gold": r.get("answer"),
                "docs": r["generated"]["doc_ids"],
            }
            for r in records[::step][:8]
        ],
    }
    if llm_n:
        result["llm"] = with_llm(source, llm_n, seed, work / f"llm-{name}-s{seed}-n{llm_n}", work)
    if name == "kestrel-kb":
        hand = quality_report(load_dataset(source), cache_dir=work / "cache")
        result["hand_written"] = {k: hand[k] for k in ("queries", "categories", "difficulty")}
    return result


def table(results: list[dict]) -> str:
    head = (
        "| set | queries | answerable found | near-dup pairs | docs used | top doc share | "
        "median BM25 rank | rank 1 | top 10 | queries for Δ 0.05 | baseline nDCG@10 |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in results:
        rows = [(f"{r['corpus']}: generated (seed {r['seed']})", r["quality"], r["baseline_run"])]
        if "hand_written" in r:
            rows.append((f"{r['corpus']}: hand-written", r["hand_written"], None))
        for label, q, run in rows:
            d, s = q["difficulty"], q.get("spread")
            a, dup = q.get("answerability"), q.get("near_duplicates")
            needed = q.get("power", {}).get("queries_needed", {}).get("0.05")
            cells = [
                label,
                f"{q['queries']} ({d['queries']} ranked)",
                f"{a['share']:.0%} of {a['checked']}" if a else "–",
                dup["pairs"] if dup else "–",
                f"{s['documents_used']} / {s['corpus']}" if s else "–",
                f"{s['top_document_share']:.1%}" if s else "–",
                d["median_rank"],
                f"{d['share_rank_1']:.0%}",
                f"{d['share_top_10']:.0%}",
                needed if needed is not None else "–",
                f"{run['all']['ndcg@10']:.3f}" if run else "–",
            ]
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def by_category(results: list[dict]) -> str:
    """Per category: BM25 difficulty of each set, and the baseline run on the generated ones."""
    head = (
        "| set | category | ranked | median rank | rank 1 | top 10 | not retrieved | "
        "answerable found | baseline nDCG@10 | baseline key_fact_recall |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in results:
        sets = [(f"{r['corpus']}: generated", r["quality"], r["baseline_run"])]
        if "hand_written" in r:
            sets.append((f"{r['corpus']}: hand-written", r["hand_written"], None))
        for label, q, run in sets:
            answerable = q.get("answerability", {}).get("by_category", {})
            for category, d in q["difficulty"]["by_category"].items():
                found = answerable.get(category)
                scores = (run or {}).get("by_category", {}).get(category, {})
                cells = [
                    label,
                    category,
                    d["queries"],
                    d["median_rank"],
                    f"{d['share_rank_1']:.0%}",
                    f"{d['share_top_10']:.0%}",
                    f"{d['share_not_retrieved']:.0%}",
                    f"{found:.0%}" if found is not None else "–",
                    f"{scores['ndcg@10']:.3f}" if "ndcg@10" in scores else "–",
                    f"{scores['key_fact_recall']:.3f}" if "key_fact_recall" in scores else "–",
                ]
                lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def examples(results: list[dict]) -> str:
    lines = []
    for r in results:
        for e in r["examples"]:
            gold = e["gold"] if e["gold"] is not None else "(refuse)"
            text = e["text"].replace("|", "\\|")
            lines.append(f"- {r['corpus']}, {e['category']} (`{e['method']}`): {text} → {gold}")
    return "\n".join(lines)


def llm_lines(results: list[dict]) -> str:
    lines = []
    for r in results:
        llm = r.get("llm")
        if not llm:
            continue
        a = llm["answerability"]
        lines.append(
            f"- {r['corpus']}: {llm['n']} queries, {llm['unusable_replies']} replies unusable "
            f"(those keep the offline wording), answerable found {a['share']:.0%} of "
            f"{a['checked']}, {llm['cpu_seconds']} CPU s in all:"
        )
        for q in llm["queries"]:
            gold = q["gold"] if q["gold"] is not None else "(refuse)"
            text = q["text"].replace("|", "\\|")
            lines.append(f"    - {q['category']} (`{q['method']}`): {text} → {gold}")
    return "\n".join(lines)


def write_docs(results: list[dict]) -> None:
    text = DOCS.read_text(encoding="utf-8")
    block = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.S)
    if not block.search(text):
        raise SystemExit(f"{DOCS} has no {START} … {END} block")
    parts = [table(results), by_category(results), "Every eighth query of each set:"]
    parts.append(examples(results))
    if any("llm" in r for r in results):
        parts += ["Worded by the packaged SmolLM2-135M (`--llm llama_cpp`):", llm_lines(results)]
    body = "\n\n".join(parts)
    DOCS.write_text(block.sub(lambda _: f"{START}\n{body}\n{END}", text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", help="a BEIR folder, BeIR-layout folder, zip or snapshot")
    parser.add_argument("--mirror", help="a bare git clone of the known public copy")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "rag-bench-beir"))
    parser.add_argument("--work", default="/tmp/rag-bench-testset-quality")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--llm-n", type=int, default=8, help="queries worded by SmolLM2 (0: none)")
    parser.add_argument("--docs", action="store_true", help="only rewrite docs/generate.md")
    args = parser.parse_args()
    names = ["arguana", "kestrel-kb"]
    if not args.docs:
        beir = find_dataset(args.dataset, args.mirror, Path(args.cache) / "datasets")
        work = Path(args.work)
        for name, source in (("arguana", beir), ("kestrel-kb", load_dataset().path)):
            result = measure(name, Path(source), args.n, args.seed, work, args.llm_n)
            out = RESULTS_DIR / f"generate-{name}.json"
            out.write_text(json.dumps(result, indent=2) + "\n")
            print(f"wrote {out}", flush=True)
    results = [json.loads((RESULTS_DIR / f"generate-{n}.json").read_text()) for n in names]
    print(table(results))
    if args.docs:
        write_docs(results)


if __name__ == "__main__":
    main()
