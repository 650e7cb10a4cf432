"""Repeats: seeds, the repeat column (older files read as repeat 0), the per-query noise, compare's
two-level interval and the gate's ``unstable`` verdict."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rag_bench.analysis.compare import compare
from rag_bench.analysis.gate import NOISE_Z, gate
from rag_bench.analysis.noise import noise_summary, query_noise
from rag_bench.errors import ParameterError, UsageError
from rag_bench.evaluation.stats import bootstrap_ci, repeat_noise_se, two_level_bootstrap_ci
from rag_bench.experiment.repeats import derived_seed, repeat_config, repeat_seeds
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.runs import open_runs
from tests.conftest import SHIPPED
from tests.runs_helpers import copy_run, locate, manifest_file, read_table, write_table

SAMPLING = {"generator": {"name": "llama_cpp", "seed": 7, "temperature": 0.8}, "judge": {}}


def test_each_repeat_gets_its_own_seed_from_the_run_seed():
    seeds = repeat_seeds(SAMPLING, 4)
    assert list(seeds) == ["generator.seed"]
    chosen = seeds["generator.seed"]
    assert chosen[0] == 7 and len(set(chosen)) == 4
    assert chosen[1:] == [derived_seed(7, "generator", r) for r in (1, 2, 3)]
    assert repeat_seeds(SAMPLING, 4) == seeds  # deterministic
    other = {**SAMPLING, "generator": {**SAMPLING["generator"], "seed": 8}}
    assert not set(repeat_seeds(other, 4)["generator.seed"]) & set(chosen)
    config = repeat_config(SAMPLING, seeds, 2)
    assert config["generator"]["seed"] == chosen[2] and SAMPLING["generator"]["seed"] == 7


def test_repeats_of_components_that_do_not_sample_are_refused():
    greedy = {"generator": {"name": "llama_cpp", "seed": 0, "temperature": 0.0}}
    assert repeat_seeds(greedy, 1) == {}
    with pytest.raises(UsageError, match="no component of the variant samples"):
        repeat_seeds(greedy, 3)
    with pytest.raises(ParameterError):
        repeat_seeds(SAMPLING, 0)


def test_the_noise_standard_error_by_hand():
    a = np.array([[1.0, 3.0], [2.0, 2.0]])  # variances 2 and 0, two repeats each
    b = np.array([[0.0, 0.0], [1.0, np.nan]])  # 0, and one repeat: nothing
    assert repeat_noise_se(a, b) == pytest.approx(np.sqrt(2 / 2) / 2)
    assert repeat_noise_se(a[:, :1], b[:, :1]) == 0.0


def test_the_two_level_interval_holds_the_repeat_noise():
    rng = np.random.default_rng(5)
    truth = rng.random((60, 1))
    single = two_level_bootstrap_ci(truth, truth + 0.1, resamples=4000, seed=1)
    assert single == pytest.approx((0.1, 0.1))  # no noise, one repeat: the delta itself
    noisy_a = truth + rng.normal(0, 0.3, (60, 3))
    noisy_b = truth + 0.1 + rng.normal(0, 0.3, (60, 3))
    two = two_level_bootstrap_ci(noisy_a, noisy_b, resamples=4000, seed=1)
    means = bootstrap_ci(noisy_b.mean(1) - noisy_a.mean(1), resamples=4000, seed=1)
    assert two[1] - two[0] > 1.2 * (means[1] - means[0])  # wider: the repeats resampled too
    assert two == two_level_bootstrap_ci(noisy_a, noisy_b, resamples=4000, seed=1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A baseline run on the smoke tier, a copy of it whose tables were written before repeats
    existed (no repeat column), and copies with three repeats of answer_length: one shifted by
    less than its noise, one by far more."""
    folder = tmp_path_factory.mktemp("noise-runs")
    cache = tmp_path_factory.getbasetemp() / "cache"
    base = run_variant(
        "baseline", SHIPPED, selection=Selection(tier="smoke"), runs_dir=folder, cache_dir=cache
    )
    source = base.location
    old = copy_run(source, folder, "old-layout")
    for table in ("queries", "metrics", "claims"):
        write_table(old, table, read_table(source, table).drop(columns=["repeat"]))
    made = {"base": base.run_id, "old": "old-layout"}
    for name, shift in (("noisy", 0.2), ("longer", 6.0)):
        target = copy_run(source, folder, name)
        metrics = read_table(source, "metrics")
        queries = read_table(source, "queries")
        rng = np.random.default_rng(len(name))
        lengths = metrics["metric"] == "answer_length"
        extra, rows = [], []
        for repeat in (1, 2):
            again = metrics.assign(repeat=repeat)
            noise = rng.normal(0, 3, lengths.sum()).round()
            again.loc[lengths, "value"] = again.loc[lengths, "value"] + shift + noise
            extra.append(again)
            rows.append(queries.assign(repeat=repeat))
        metrics.loc[lengths, "value"] += shift
        write_table(target, "metrics", _concat([metrics, *extra]))
        write_table(target, "queries", _concat([queries, *rows]))
        made[name] = name
    return folder, made


def _concat(frames):
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def test_a_table_without_the_repeat_column_reads_as_repeat_0(runs):
    folder, ids = runs
    store = open_runs(folder)
    for table in ("queries", "metrics", "claims"):
        assert (store.table(table, ids["old"])["repeat"] == 0).all()
    sql = store.sql("SELECT DISTINCT \"repeat\" FROM metrics WHERE run_id = 'old-layout'")
    assert sql["repeat"].tolist() == [0]
    same = compare(folder, [ids["base"], ids["old"]], resamples=200)
    assert (same.rows["delta"] == 0).all()


def test_compare_pairs_query_means_with_a_two_level_interval(runs):
    folder, ids = runs
    result = compare(folder, [ids["base"], ids["noisy"]], metrics=["answer_length"], resamples=500)
    row = result.rows[result.rows["slice"] == "all"].iloc[0]
    store = open_runs(folder)
    metrics = store.metrics([ids["base"], ids["noisy"]])
    mine = metrics[metrics["metric"] == "answer_length"].dropna(subset=["value"])
    wide = mine.pivot_table(index="query_id", columns=["run_id", "repeat"], values="value")
    a, b = wide[ids["base"]].to_numpy(), wide[ids["noisy"]].to_numpy()
    assert row["n"] == len(wide)
    assert row["mean_b"] == pytest.approx(np.nanmean(b, axis=1).mean())
    assert row["delta"] == pytest.approx(np.nanmean(b, axis=1).mean() - a.mean())
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(
        two_level_bootstrap_ci(a, b, resamples=500, seed=0)
    )


def test_the_gate_calls_a_change_within_the_noise_unstable(runs):
    folder, ids = runs
    noisy = gate(folder, ids["noisy"], ids["base"], {"answer_length": 0.0}, resamples=500)
    row = noisy.rows.iloc[0]
    assert row["verdict"] == "unstable" and abs(row["delta"]) <= row["noise"]
    assert noisy.passed and any("unstable" in w for w in noisy.warnings)
    longer = gate(folder, ids["longer"], ids["base"], {"answer_length": 0.0}, resamples=500)
    row = longer.rows.iloc[0]
    assert row["verdict"] == "fail" and abs(row["delta"]) > row["noise"] > 0
    assert not longer.passed
    plain = gate(folder, ids["old"], ids["base"], {"answer_length": 0.0}, resamples=500)
    assert plain.rows.iloc[0]["noise"] == 0 and plain.rows.iloc[0]["verdict"] == "pass"
    # the band is 1.96 standard errors of the delta from the repeats
    pair_noise = longer.rows.iloc[0]["noise"] / NOISE_Z
    assert pair_noise > 0


def test_the_per_query_noise_flips_and_spread(runs):
    folder, ids = runs
    store = open_runs(folder)
    rows = query_noise(store.metrics(ids["noisy"]), store.queries(ids["noisy"]))
    lengths = rows[rows["measure"] == "answer_length"]
    metrics = store.metrics(ids["noisy"])
    mine = metrics[metrics["metric"] == "answer_length"].dropna(subset=["value"])
    by_query = mine.groupby("query_id")["value"]
    expected = (by_query.max() - by_query.min()).reindex(lengths["query_id"]).to_numpy()
    assert lengths["range"].to_numpy() == pytest.approx(expected)
    assert lengths["std"].to_numpy() == pytest.approx(
        by_query.std(ddof=1).reindex(lengths["query_id"]).to_numpy()
    )
    summary = noise_summary(rows).set_index("measure")
    assert summary.loc["answer_length", "flip_rate"] == pytest.approx((expected > 0).mean())
    assert summary.loc["faithfulness", "flip_rate"] == 0  # copied unchanged in every repeat
    assert summary.loc["refused", "flip_rate"] == 0
    assert "context_precision@5" not in summary.index  # the answer does not move it


def test_a_repeats_manifest_is_recorded(runs):
    folder, ids = runs
    manifest = json.loads(manifest_file(folder, ids["base"]).read_text())
    assert manifest["repeats"] == {"n": 1, "seeds": {}}
    assert locate(folder, ids["noisy"]).run_id == "noisy"


@pytest.mark.llm
def test_the_real_model_sampling_stores_every_repeat(real_smollm2, tmp_path, index_cache):
    """SmolLM2 at temperature 1: two repeats with their own seeds, both stored, and the noise
    read back from them."""
    options = (
        "generator.name=llama_cpp",
        "generator.temperature=1.0",
        "generator.max_tokens=24",
        "generator.context_k=1",
    )
    stored = run_variant(
        "baseline",
        SHIPPED,
        overrides=options,
        selection=Selection(tag="smoke", sample=3, seed=2),
        runs_dir=tmp_path,
        cache_dir=index_cache,
        repeats=2,
    )
    seeds = stored.manifest["repeats"]["seeds"]["generator.seed"]
    assert stored.manifest["repeats"]["n"] == 2 and seeds[0] == 0 and seeds[1] != 0
    queries = stored.queries
    assert sorted(queries["repeat"].unique()) == [0, 1]
    answers = queries.pivot(index="query_id", columns="repeat", values="answer")
    assert len(answers) == 3 and (answers[0] != answers[1]).any()  # sampled: answers differ
    assert (stored.metrics.groupby("repeat").size() == len(stored.metrics) / 2).all()
    retrieved = stored.tables["retrieved"]
    assert "repeat" not in retrieved and not retrieved.duplicated().any()  # retrieval once
    rows = query_noise(stored.metrics, queries)
    lengths = rows[rows["measure"] == "answer_length"]
    changed = answers[0] != answers[1]
    assert set(lengths.loc[lengths["flipped"] == 1, "query_id"]) <= set(changed[changed].index)


def test_the_cli_refuses_repeats_that_cannot_differ(rag_bench, tmp_path):
    from tests.conftest import assert_one_line_error

    out = rag_bench("run", "--variant", "baseline", "--repeats", "0", "--runs-dir", tmp_path)
    assert_one_line_error(out, "--repeats 0 is out of range")
    out = rag_bench("run", "--variant", "baseline", "--repeats", "2", "--runs-dir", tmp_path)
    assert_one_line_error(out, "no component of the variant samples", "generator.temperature")


def test_the_noise_command_lists_flip_rates(rag_bench, runs):
    folder, ids = runs
    out = rag_bench("noise", ids["noisy"], "--runs-dir", folder, "--format", "json")
    assert out.exit_code == 0, out.stderr
    summary = {row["measure"]: row for row in json.loads(out.stdout)}
    assert 0 < summary["answer_length"]["flip_rate"] <= 1
    assert summary["refused"]["flip_rate"] == 0
    lone = rag_bench("noise", ids["base"], "--runs-dir", folder)
    assert lone.exit_code == 0 and "no query answered in two repeats" in lone.stderr
