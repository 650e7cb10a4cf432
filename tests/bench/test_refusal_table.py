"""benchmarks/refusal_table.py: one row recomputed against the stored results, and README's
table is the results file's, not typed."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import refusal_table  # noqa: E402

RESULTS = json.loads((ROOT / "benchmarks" / "results" / "refusal.json").read_text())


def test_readme_shows_the_results_files_rows():
    readme = (ROOT / "README.md").read_text()
    shown = re.search(r"<!-- refusal-table[^>]*-->\n(.*?)\n<!-- /refusal-table -->", readme, re.S)
    rows = [r for r in RESULTS["rows"] if r["min_coverage"] == 0.2]
    assert shown and shown.group(1) == refusal_table.markdown(rows)


def test_a_row_is_what_a_run_gives(index_cache):
    stored = next(
        r
        for r in RESULTS["rows"]
        if (r["variant"], r["refuse_on"], r["min_coverage"]) == ("hybrid_rerank", "context", 0.2)
    )
    assert refusal_table.row("hybrid_rerank", "context", 0.2, "kestrel-kb", index_cache) == (
        pytest.approx(stored)
    )


def test_readme_gives_the_arguana_refusals_as_computed():
    import beir_refusal

    stored = ROOT / "benchmarks" / "results" / "beir-arguana-refusal.json"
    rows = json.loads(stored.read_text())["rows"]
    page = " ".join((ROOT / "docs" / "noise.md").read_text().split())
    assert beir_refusal.summary(rows) in page
    by_rule = {(r["variant"], r["refuse_on"]): r for r in rows}
    old, new = by_rule["hybrid_rerank", "context"], by_rule["hybrid_rerank", "retrieval"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (
        f"over_refusal {old['over_refusal']:.3f} with the old rule, {new['over_refusal']:.3f} "
        f"with this one ({old['refused']:,} and {new['refused']:,} of {new['answerable']:,} "
        f"answerable queries refused; nDCG@10 {new['ndcg@10']:.3f} both), baseline's "
        f"{by_rule['baseline', 'retrieval']['over_refusal']:.3f}"
    ) in readme
    assert (
        by_rule["hybrid_rerank", "retrieval"]["refused"]
        < by_rule["hybrid_rerank", "context"]["refused"]
    )


def test_readme_gives_the_measured_noise():
    measured = json.loads((ROOT / "benchmarks" / "results" / "noise-smollm2.json").read_text())
    rows = {r["measure"]: r for r in measured["summary"]}
    readme = " ".join((ROOT / "README.md").read_text().split())
    length, faithful = rows["answer_length"], rows["faithfulness"]
    assert f"{measured['queries']} smoke queries × {measured['repeats']['n']} repeats" in readme
    assert f"answer_length flip rate {length['flip_rate']:.1f}, mean std" in readme
    assert (
        f"mean std {length['mean_std']:.1f} words, mean range {length['mean_range']:.1f}" in readme
    )
    assert f"(mean std {rows['answer_relevance']['mean_std']:.3f})" in readme
    flipped = round(faithful["flip_rate"] * faithful["queries"])
    assert (
        f"faithfulness on {flipped} of {faithful['queries']} (mean std {faithful['mean_std']:.3f})"
        in readme
    )
    assert rows["refused"]["flip_rate"] == rows["failure_class"]["flip_rate"] == 0
