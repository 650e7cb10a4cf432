"""Direction and metric names through the commands that compare runs: a lower-is-better metric
that rises is a loss and a regression, a metric that improves is never said to worsen, and
other tools' spellings of a metric name are read and shown canonically."""

from __future__ import annotations

import json

import numpy as np
import pytest
from runs_helpers import copy_run, locate, read_table, write_table

from conftest import SHIPPED, assert_one_line_error
from rag_bench.experiment.runner import Selection, run_variant

REGRESSED = "29990101-000000-baseline-0bad"
IMPROVED = "29990101-000000-baseline-0900"


def edited_copy(runs, run_id, new_id, metric, change):
    """A copy of a run with ``change`` applied to the defined values of ``metric``."""
    target = copy_run(locate(runs, run_id), runs, new_id, created_at="2099-01-01T00:00:00+00:00")
    frame = read_table(target, "metrics")
    rows = (frame["metric"] == metric) & frame["value"].notna()
    frame.loc[rows, "value"] = change(frame.loc[rows, "value"])
    write_table(target, "metrics", frame)
    return frame.loc[rows, "value"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A baseline smoke run; a copy that refuses every answerable query (over_refusal rises
    to 1); a copy whose recall@10 is higher wherever it was below 1."""
    folder = tmp_path_factory.mktemp("directions")
    base = run_variant("baseline", SHIPPED, selection=Selection(tag="smoke"), runs_dir=folder)
    before = read_table(locate(folder, base.run_id), "metrics")
    over = before[(before["metric"] == "over_refusal") & before["value"].notna()]["value"]
    edited_copy(folder, base.run_id, REGRESSED, "over_refusal", lambda v: v * 0 + 1.0)
    edited_copy(folder, base.run_id, IMPROVED, "recall@10", lambda v: np.minimum(v + 0.25, 1.0))
    return folder, base.run_id, int((over == 0).sum())


def test_a_rise_of_a_lower_is_better_metric_is_a_loss(rag_bench, runs):
    folder, base, n_rises = runs
    out = rag_bench(
        "compare", base, REGRESSED, "--metrics", "over_refusal", "--slice", "none",
        "--resamples", "2000", "--runs-dir", folder, "--format", "json",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert n_rises > 0 and row["delta"] > 0
    assert (row["wins"], row["losses"]) == (0, n_rises) and row["significant"]


def test_the_gate_fails_a_significant_rise_of_over_refusal(rag_bench, runs):
    folder, base, _ = runs
    out = rag_bench(
        "gate", REGRESSED, "--baseline", base, "--max-drop", "over_refusal=0.02",
        "--runs-dir", folder, "--format", "json",
    )  # fmt: skip
    assert out.exit_code == 1
    (row,) = json.loads(out.stdout)
    assert row["verdict"] == "fail" and row["reason"].startswith("worsened by")


def test_the_gate_says_improved_when_a_metric_improved(rag_bench, runs):
    folder, base, _ = runs
    out = rag_bench(
        "gate", IMPROVED, "--baseline", base, "--max-drop", "recall@10=0.02",
        "--runs-dir", folder, "--format", "json",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["delta"] > 0 and row["reason"].startswith("improved by ")
    assert "worsened" not in row["reason"]


def test_diff_lists_a_rise_of_over_refusal_as_worse(rag_bench, runs):
    folder, base, n_rises = runs
    out = rag_bench(
        "diff", REGRESSED, "--against", base, "--metric", "over_refusal", "--top", "100",
        "--runs-dir", folder, "--format", "json",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) == n_rises and {r["change"] for r in rows} == {"worse"}


def test_other_tools_spellings_are_read_and_shown_canonically(rag_bench, runs):
    folder, base, _ = runs
    compared = rag_bench(
        "compare", base, IMPROVED, "--metrics", "R@10,ndcg_cut_10,RR@10", "--slice", "none",
        "--resamples", "200", "--runs-dir", folder, "--format", "json",
    )  # fmt: skip
    assert compared.exit_code == 0, compared.stderr
    assert [r["metric"] for r in json.loads(compared.stdout)] == ["recall@10", "ndcg@10", "mrr@10"]
    gated = rag_bench(
        "gate", IMPROVED, "--baseline", base, "--max-drop", "recall_10=0.02",
        "--runs-dir", folder, "--format", "json",
    )  # fmt: skip
    assert [r["metric"] for r in json.loads(gated.stdout)] == ["recall@10"]
    shown = rag_bench("show", base, "--metrics", "P_5,recip_rank", "--runs-dir", folder,
                      "--format", "csv")  # fmt: skip
    assert shown.stdout.splitlines()[0] == "category,n,precision@5,mrr"
    diffed = rag_bench("diff", IMPROVED, "--against", base, "--metric", "R@10",
                       "--runs-dir", folder, "--format", "json")  # fmt: skip
    assert diffed.exit_code == 0 and json.loads(diffed.stdout)


def test_a_misspelt_metric_gets_a_suggestion(rag_bench, runs):
    folder, base, _ = runs
    assert_one_line_error(
        rag_bench("compare", base, IMPROVED, "--metrics", "ndgc@10", "--runs-dir", folder),
        "unknown metric 'ndgc@10'",
        "did you mean 'ndcg@10'?",
    )
    assert_one_line_error(
        rag_bench("show", base, "--metrics", "recall@7", "--runs-dir", folder),
        "'recall@7'",
        "did you mean 'recall@5' or 'recall@10'",
    )
