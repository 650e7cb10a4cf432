"""The extractive generator's refusal trade-off on the shipped kestrel-kb, computed:

    python benchmarks/refusal_table.py [--dataset kestrel-kb] [--cache DIR]

For each variant (baseline, hybrid, hybrid_rerank) and each ``generator.min_coverage``, and for
hybrid_rerank under both refusal rules (``generator.refuse_on``: ``retrieval``, the default,
decides on the ranking before any reranker; ``context``, the rule before it, on the final
ranking; without a reranker the two are one): the refusal
metrics, balanced accuracy (the mean of 1 − over_refusal and correct_refusal), the queries
diagnosed ``ok`` and ``wrongly_refused``, key_fact_recall and answer_contains. Printed as
Markdown and saved as ``benchmarks/results/refusal.json``; nothing is stored in a runs folder.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from common import RESULTS_DIR

from rag_bench.experiment.runner import evaluate_variant

VARIANTS = ("baseline", "hybrid", "hybrid_rerank")
COVERAGES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
RULES = ("retrieval", "context")
METRICS = ("over_refusal", "correct_refusal", "key_fact_recall", "answer_contains")
COLUMNS = ("variant", "refuse_on", "min_coverage", *METRICS[:2], "balanced", "ok")
COLUMNS += ("wrongly_refused", *METRICS[2:])


def row(variant: str, rule: str, coverage: float, dataset: str, cache: Path) -> dict:
    overrides = [f"generator.refuse_on={rule}", f"generator.min_coverage={coverage}"]
    tables = evaluate_variant(variant, dataset, overrides=overrides, cache_dir=cache)
    metrics, queries = tables["metrics"], tables["queries"]
    means = {m: float(metrics.loc[metrics["metric"] == m, "value"].mean()) for m in METRICS}
    classes = queries["failure_class"].value_counts()
    return {
        "variant": variant,
        "refuse_on": rule,
        "min_coverage": coverage,
        **means,
        "balanced": (1 - means["over_refusal"] + means["correct_refusal"]) / 2,
        "ok": int(classes.get("ok", 0)),
        "wrongly_refused": int(classes.get("wrongly_refused", 0)),
        "queries": len(queries),
    }


def markdown(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [_cell(r, c) for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(r: dict, column: str) -> str:
    value = r[column]
    if column == "min_coverage":
        return f"{value:g}"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="kestrel-kb")
    parser.add_argument("--cache", help="index cache (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        cache = Path(args.cache or scratch)
        rows = [
            row(variant, rule, coverage, args.dataset, cache)
            for variant in VARIANTS
            for rule in (RULES if variant == "hybrid_rerank" else RULES[:1])
            for coverage in COVERAGES
        ]
    out = RESULTS_DIR / "refusal.json"
    out.write_text(json.dumps({"dataset": args.dataset, "rows": rows}, indent=1) + "\n")
    print(markdown(rows))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
