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
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert beir_refusal.summary(rows) in readme
    by_rule = {(r["variant"], r["refuse_on"]): r for r in rows}
    assert (
        by_rule["hybrid_rerank", "retrieval"]["refused"]
        < by_rule["hybrid_rerank", "context"]["refused"]
    )
