"""Perturbed runs and the robustness verb: copies stored beside their originals with the same
labels, paired by id, the statistics those of compare over the same pairs."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SHIPPED
from rag_bench.analysis.robustness import robustness
from rag_bench.data.selection import Selection
from rag_bench.errors import RagBenchError
from rag_bench.evaluation.stats import bootstrap_ci, paired_p_value
from rag_bench.experiment.runner import run_variant

KINDS = ("typo", "synonym")


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory, index_cache):
    runs = tmp_path_factory.mktemp("perturbed")
    selection = Selection(tag="smoke", perturb=KINDS, seed=4)
    result = run_variant(
        "baseline", SHIPPED, selection=selection, runs_dir=runs, cache_dir=index_cache
    )
    return runs, result


def test_copies_run_beside_their_originals_with_the_same_labels(perturbed):
    _, result = perturbed
    queries = result.queries.set_index("query_id")
    copies = [q for q in queries.index if "~" in q]
    assert copies and {q.split("~")[1] for q in copies} == set(KINDS)
    for copy in copies:
        original = copy.split("~")[0]
        assert queries.loc[copy, "category"] == queries.loc[original, "category"]
        assert queries.loc[copy, "n_relevant"] == queries.loc[original, "n_relevant"]
        assert queries.loc[copy, "query"] != queries.loc[original, "query"]
        assert "perturbed" in list(queries.loc[copy, "tags"])
    assert result.manifest["selection"]["perturb"] == list(KINDS)


def test_the_same_seed_gives_the_same_copies(perturbed, tmp_path, index_cache):
    _, first = perturbed
    again = run_variant(
        "baseline",
        SHIPPED,
        selection=Selection(tag="smoke", perturb=KINDS, seed=4),
        runs_dir=tmp_path,
        cache_dir=index_cache,
    )
    columns = ["query_id", "query"]
    assert first.queries[columns].equals(again.queries[columns])


def test_robustness_pairs_each_copy_with_its_original(perturbed):
    runs, result = perturbed
    table = robustness(runs, [result.run_id], metrics=["ndcg@10"], slice_by=None, resamples=500)
    metrics = result.metrics
    values = metrics[metrics["metric"] == "ndcg@10"].set_index("query_id")["value"]
    for row in table.rows.itertuples():
        copies = sorted(q for q in values.index if q.endswith("~" + row.perturbation))
        pairs = [(values[q.split("~")[0]], values[q]) for q in copies]
        a, b = (np.array(side) for side in zip(*[p for p in pairs if not np.isnan(p).any()]))
        assert row.n == len(a) and row.delta == pytest.approx((b - a).mean())
        assert row.p_value == paired_p_value(b - a, "randomization", 500, 0)
        assert (row.ci_low, row.ci_high) == pytest.approx(
            bootstrap_ci(b - a, resamples=500, seed=0), abs=1e-12
        )
    assert set(table.rows["perturbation"]) == set(KINDS)
    assert table.perturbations[result.run_id] == {
        kind: sum(q.endswith("~" + kind) for q in values.index) for kind in KINDS
    }


def test_a_run_without_perturbed_queries_is_refused(tmp_path, index_cache):
    plain = run_variant(
        "baseline",
        SHIPPED,
        selection=Selection(tag="smoke"),
        runs_dir=tmp_path,
        cache_dir=index_cache,
    )
    with pytest.raises(RagBenchError, match="--perturb"):
        robustness(tmp_path, [plain.run_id])
    assert "perturb" not in plain.manifest["selection"]  # plain manifests unchanged


def test_the_cli_runs_perturbed_and_shows_what_they_cost(rag_bench, tmp_path):
    runs = str(tmp_path / "runs")
    made = rag_bench(
        "run", "--variant", "baseline", "--tag", "smoke", "--perturb", "typo", "--runs-dir", runs
    )
    assert made.exit_code == 0, made.stderr
    shown = rag_bench(
        "robustness",
        "latest:baseline+",
        "--slice",
        "none",
        "--metrics",
        "ndcg@10",
        "--resamples",
        "200",
        "--runs-dir",
        runs,
    )
    assert shown.exit_code == 0, shown.stderr
    assert "typo" in shown.stdout and "ndcg@10" in shown.stdout
    bad = rag_bench("run", "--variant", "baseline", "--perturb", "tpyo", "--runs-dir", runs)
    assert bad.exit_code != 0 and "typo" in bad.stderr and "Traceback" not in bad.stderr
