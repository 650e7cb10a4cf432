"""Numbers out of range are refused in one line naming the parameter and its valid range: in the
library's terms (``resamples``, ``max_drops``) and, through the CLI, in its flags' terms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from runs_helpers import copy_run, fingerprint, locate

from conftest import SHIPPED, assert_one_line_error
from rag_bench.errors import ParameterError, check_number
from rag_bench.experiment.runner import Selection, run_variant

COPY = "29990101-000000-baseline-0c0c"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 0, 1, -0.5, True, "0.1", None])
def test_a_value_outside_an_open_interval(value):
    with pytest.raises(ParameterError) as info:
        check_number("alpha", value, 0, 1, open_low=True, open_high=True)
    assert str(info.value).startswith("alpha = ")
    assert "alpha takes a finite number in (0, 1)" in str(info.value)


def test_whole_numbers_and_their_bounds():
    assert check_number("resamples", np.int64(5), 1, 1_000_000, whole=True) == 5
    assert check_number("max_drops", 0.0, 0, key="recall@10") == 0.0
    for bad in (0, 2.5, 1_000_001):
        with pytest.raises(ParameterError, match=r"whole number in \[1, 1,000,000\]"):
            check_number("resamples", bad, 1, 1_000_000, whole=True)
    with pytest.raises(ParameterError, match=r"max_drops\['recall@10'\] = nan"):
        check_number("max_drops", math.nan, 0, key="recall@10")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parameters")
    base = run_variant("baseline", SHIPPED, selection=Selection(tag="smoke"), runs_dir=folder)
    copy_run(locate(folder, base.run_id), folder, COPY, created_at="2099-01-01T00:00:00+00:00")
    return folder, base.run_id


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["compare", "B", COPY, "--resamples", "0"], ["--resamples 0", "[1, 1,000,000]"]),
        (["compare", "B", COPY, "--resamples", "-5"], ["--resamples -5", "whole number"]),
        (["compare", "B", COPY, "--resamples", "1000000000"], ["--resamples 1000000000"]),
        (["compare", "B", COPY, "--alpha", "nan"], ["--alpha nan", "(0, 1)"]),
        (["compare", "B", COPY, "--alpha", "inf"], ["--alpha inf", "(0, 1)"]),
        (["compare", "B", COPY, "--alpha", "-0.1"], ["--alpha -0.1", "(0, 1)"]),
        (["gate", COPY, "--baseline", "B", "--max-drop", "recall@10=nan"],
         ["--max-drop recall@10=nan", "finite number in [0, ∞)"]),
        (["gate", COPY, "--baseline", "B", "--max-drop", "R@10=-1"],
         ["--max-drop recall@10=-1.0", "[0, ∞)"]),
        (["gate", COPY, "--baseline", "B", "--max-drop", "recall@10=inf"], ["recall@10=inf"]),
        (["diff", COPY, "--against", "B", "--top", "0"], ["--top 0", "[1, ∞)"]),
    ],
)  # fmt: skip
def test_the_cli_names_the_flag_and_its_range(rag_bench, runs, args, fragments):
    folder, base = runs
    before = fingerprint(folder)
    args = [base if a == "B" else a for a in args]
    assert_one_line_error(rag_bench(*args, "--runs-dir", folder), *fragments)
    assert fingerprint(folder) == before


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["run", "--variant", "baseline", "--k", ""], ["--k ''"]),
        (["run", "--variant", "baseline", "--k", "0"], ["--k 0", "[1, ∞)"]),
        (["run", "--variant", "baseline", "--k", "3,-1"], ["--k -1", "[1, ∞)"]),
        (["judge-agreement", "--alpha", "0"], ["--alpha 0.0", "(0, 1)"]),
        (["judge-agreement", "--alpha", "nan"], ["--alpha nan", "(0, 1)"]),
    ],
)
def test_run_and_judge_agreement_numbers(rag_bench, tmp_path, args, fragments):
    out = rag_bench(*args, "--runs-dir", tmp_path / "runs")
    assert_one_line_error(out, *fragments)
    assert not (tmp_path / "runs").exists()
