"""answer_length (words, citation markers removed) and its Spearman correlation with
faithfulness in the report."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy.stats import spearmanr

from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.evaluation.answer import AnswerEvidence, answer_length, response_metrics
from rag_bench.evaluation.measures import lower_is_better
from rag_bench.evaluation.stats import spearman
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.model import Query
from rag_bench.report.data import report_data
from rag_bench.report.page import render_report
from rag_bench.runs import open_runs
from tests.conftest import SHIPPED


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("The KS-660 holds 6 drives [d1].", 6),  # The KS 660 holds 6 drives
        ("Returns: 30 days [d1, d2]. Refunds in 2.5 weeks [d3].", 8),  # 2.5 is two
        ("签收7天内可退货【d1】。", 8),  # seven Han characters and the 7
        ("Use port 8080 on ks660r [d1]", 5),
        ("", 0),
    ],
)
def test_answer_length_counts_words_without_the_markers(answer, words):
    assert answer_length(answer) == words


def evidence(answer: str, refused: bool) -> AnswerEvidence:
    return AnswerEvidence(Query("q", "How long?"), answer, refused, [], [], [], {})


def test_a_refusal_has_no_length_and_shorter_is_better():
    analyzer = EnglishAnalyzer()
    assert response_metrics(evidence("I don't know.", True), analyzer)["answer_length"] is None
    assert response_metrics(evidence("Thirty days [d1].", False), analyzer)["answer_length"] == 2
    assert lower_is_better("answer_length")


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 6, 80), rng.integers(0, 3, 80) / 2
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)  # 1 - 6·2 / (4·15)
    assert math.isnan(spearman([1, 2], [2, 1]))
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A baseline run and the recorded system of kestrel-kb (its faithfulness varies)."""
    folder = tmp_path_factory.mktemp("length-runs")
    cache = tmp_path_factory.getbasetemp() / "cache"
    selection = Selection(tier="regression")
    ids = [
        run_variant(v, SHIPPED, selection=selection, runs_dir=folder, cache_dir=cache).run_id
        for v in ("baseline", "recorded")
    ]
    return folder, ids


def test_the_report_shows_each_runs_correlation(runs):
    folder, ids = runs
    store = open_runs(folder)
    page = render_report(report_data(store, ids, resamples=200))
    section = page[page.index('id="length"') :]
    assert '<svg class="chart" id="chart-length"' in section
    metrics = store.metrics(ids)
    shown = re.findall(r"<tr><td>(\w+)</td><td class='num'>([-\d.–]+)</td>", section)
    assert [name for name, _ in shown] == ["baseline", "recorded"]
    for (_, rho), run_id in zip(shown, ids):
        mine = metrics[metrics["run_id"] == run_id].pivot(
            index="query_id", columns="metric", values="value"
        )
        both = mine[["answer_length", "faithfulness"]].dropna()
        expected = spearmanr(both["answer_length"], both["faithfulness"]).statistic
        if np.isnan(expected):  # the extractive answers are all faithful: no correlation
            assert rho == "–" and both["faithfulness"].nunique() == 1
        else:
            assert float(rho) == pytest.approx(expected, abs=5e-4)
            assert len(both) > 20
    circles = section[: section.index("</svg>")].count("<circle")
    assert circles == len(
        metrics[metrics["metric"].isin(["answer_length", "faithfulness"])]
        .pivot_table(index=["run_id", "query_id"], columns="metric", values="value")
        .dropna()
    )
