"""The run store through the CLI: runs, show, rm, compare, diff, gate, sql."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from runs_helpers import (
    committed_ids,
    copy_run,
    locate,
    manifest_file,
    partitions,
    read_table,
    table_file,
    write_table,
)

from conftest import ROOT, SHIPPED, assert_one_line_error
from rag_bench.experiment.runner import Selection, run_variant

SMOKE = Selection(tag="smoke")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two baseline runs, one hybrid_rerank run, all on the smoke queries."""
    runs = tmp_path_factory.mktemp("store")
    ids = {
        "baseline_old": run_variant("baseline", SHIPPED, selection=SMOKE, runs_dir=runs).run_id,
        "baseline": run_variant("baseline", SHIPPED, selection=SMOKE, runs_dir=runs).run_id,
        "hybrid_rerank": run_variant(
            "hybrid_rerank", SHIPPED, selection=SMOKE, runs_dir=runs
        ).run_id,
    }
    return runs, ids


def copy_store(store, tmp_path):
    runs, ids = store
    target = tmp_path / "runs"
    shutil.copytree(runs, target)
    return target, ids


def fingerprint(folder):
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return digest.hexdigest()


def degrade(runs, run_id, new_id, metric, by):
    """A copy of a run whose ``metric`` is lower by ``by`` on every query (for the gate)."""
    target = copy_run(locate(runs, run_id), runs, new_id, created_at="2099-01-01T00:00:00+00:00")
    frame = read_table(target, "metrics")
    hit = frame["metric"] == metric
    frame.loc[hit, "value"] = (frame.loc[hit, "value"] - by).clip(lower=0)
    write_table(target, "metrics", frame)


def test_runs_lists_every_run_with_headline_metrics(rag_bench, store):
    runs, ids = store
    out = rag_bench("runs", "--runs-dir", runs, "--format", "json")
    rows = json.loads(out.stdout)
    assert [r["run_id"] for r in rows] == sorted(ids.values())
    assert {
        "variant",
        "dataset",
        "created_at",
        "duration_s",
        "status",
        "recall@10",
        "ndcg@10",
    } <= set(rows[0])
    only = json.loads(
        rag_bench(
            "runs", "--runs-dir", runs, "--variant", "hybrid_rerank", "--format", "json"
        ).stdout
    )
    assert [r["run_id"] for r in only] == [ids["hybrid_rerank"]]


def test_run_references_resolve(rag_bench, store):
    runs, ids = store

    def shown(ref):
        out = rag_bench("show", ref, "--runs-dir", runs, "--format", "json")
        assert out.exit_code == 0, out.stderr
        return json.loads(out.stdout)["manifest"]["run_id"]

    assert shown(ids["baseline"]) == ids["baseline"]
    assert shown("latest:baseline+") == ids["baseline"]
    assert shown("latest") == ids["hybrid_rerank"]
    assert shown(ids["hybrid_rerank"][:-2]) == ids["hybrid_rerank"]
    assert_one_line_error(
        rag_bench("show", "2", "--runs-dir", runs), "ambiguous", ids["baseline_old"]
    )
    assert_one_line_error(rag_bench("show", "nope", "--runs-dir", runs), "no run 'nope'")
    assert_one_line_error(
        rag_bench("show", "latest:hybrid", "--runs-dir", runs), "no run of variant 'hybrid'"
    )
    assert_one_line_error(  # every stored run is a smoke run: latest:<variant> says so
        rag_bench("show", "latest:baseline", "--runs-dir", runs),
        "no run of variant 'baseline' with its defaults on every query",
        f"the latest, {ids['baseline']}, has tag=smoke",
        "latest:baseline+",
    )


def test_names_and_notes_reach_a_run_wherever_an_id_does(rag_bench, store, tmp_path):
    runs, ids = copy_store(store, tmp_path)
    out = rag_bench(
        "run", "--variant", "baseline", "--tag", "smoke", "--set", "retriever.k1=1.2",
        "--name", "k1-study", "--note", "a lower k1", "--runs-dir", runs, "--format", "csv",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    shown = rag_bench("show", "k1-study", "--runs-dir", runs)
    assert shown.exit_code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].endswith("(k1-study)") and "note      a lower k1" in lines
    assert "made with retriever.k1=1.2, tag=smoke" in lines
    listed = json.loads(rag_bench("runs", "--runs-dir", runs, "--format", "json").stdout)
    named = [r for r in listed if r["name"] == "k1-study"]
    assert len(named) == 1 and named[0]["customised"] == "retriever.k1=1.2, tag=smoke"
    compared = rag_bench(
        "compare", ids["baseline"], "k1-study", "--runs-dir", runs, "--format", "json"
    )
    assert compared.exit_code == 0, compared.stderr
    assert_one_line_error(
        rag_bench("run", "--variant", "baseline,hybrid", "--name", "x", "--runs-dir", runs),
        "--name names one run",
    )


def test_show_slices(rag_bench, store):
    runs, ids = store
    out = rag_bench(
        "show",
        ids["baseline"],
        "--runs-dir",
        runs,
        "--format",
        "csv",
        "--metrics",
        "recall@10,faithfulness",
    )
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "category,n,recall@10,faithfulness"
    assert [line.split(",")[0] for line in lines[1:]] == [
        "all",
        "literal",
        "paraphrase",
        "multi-hop",
        "unanswerable",
    ]
    by_class = rag_bench(
        "show", ids["baseline"], "--runs-dir", runs, "--slice", "failure_class", "--format", "csv"
    )
    assert by_class.stdout.startswith("failure_class,n,")
    assert_one_line_error(
        rag_bench("show", ids["baseline"], "--runs-dir", runs, "--metrics", "ndcg@7"),
        "ndcg@7",
        "ndcg@10",
    )


def test_compare_category_slices_with_statistics(rag_bench, store):
    runs, ids = store
    out = rag_bench(
        "compare",
        "latest:baseline+",
        "latest:hybrid_rerank+",
        "--runs-dir",
        runs,
        "--format",
        "json",
        "--metrics",
        "recall@10,mrr@10,correct_refusal",
        "--resamples",
        "2000",
    )
    rows = json.loads(out.stdout)
    keys = {
        "slice",
        "metric",
        "run_a",
        "run_b",
        "mean_a",
        "mean_b",
        "delta",
        "ci_low",
        "ci_high",
        "p_value",
        "p_adjusted",
        "wins",
        "ties",
        "losses",
        "n",
    }
    assert keys <= set(rows[0])
    slices = {r["slice"] for r in rows}
    assert slices == {"all", "literal", "paraphrase", "multi-hop", "unanswerable"}
    overall = next(r for r in rows if r["slice"] == "all" and r["metric"] == "recall@10")
    assert overall["n"] == 24 and overall["wins"] + overall["ties"] + overall["losses"] == 24
    assert overall["ci_low"] <= overall["delta"] <= overall["ci_high"]
    assert all(r["p_adjusted"] >= r["p_value"] for r in rows)
    table = rag_bench(
        "compare",
        "latest:baseline+",
        "latest:hybrid_rerank+",
        "--runs-dir",
        runs,
        "--resamples",
        "500",
    )
    assert "30 queries paired" in table.stdout


def test_compare_is_deterministic(rag_bench, store):
    runs, _ = store
    args = (
        "compare",
        "latest:baseline+",
        "latest:hybrid_rerank+",
        "--runs-dir",
        runs,
        "--format",
        "csv",
        "--resamples",
        "500",
    )
    assert rag_bench(*args).stdout == rag_bench(*args).stdout


def test_compare_refuses_itself_and_other_datasets(rag_bench, store, tmp_path):
    runs, ids = copy_store(store, tmp_path)
    assert_one_line_error(
        rag_bench("compare", ids["baseline"], ids["baseline"], "--runs-dir", runs), "itself"
    )
    other = run_variant("recorded", ROOT / "data" / "seed-example", runs_dir=runs).run_id
    assert_one_line_error(
        rag_bench("compare", ids["baseline"], other, "--runs-dir", runs),
        "different datasets",
        "latest:baseline@kestrel-kb",
    )


def test_diff_against_previous(rag_bench, store):
    runs, ids = store
    out = rag_bench(
        "diff",
        ids["hybrid_rerank"],
        "--against",
        ids["baseline"],
        "--runs-dir",
        runs,
        "--format",
        "json",
        "--top",
        "3",
    )
    rows = json.loads(out.stdout)
    assert rows and {
        "change",
        "query_id",
        "before",
        "after",
        "delta",
        "entered",
        "left",
        "moved",
        "failure_before",
        "failure_after",
    } <= set(rows[0])
    assert all((r["delta"] < 0) == (r["change"] == "worse") for r in rows)
    same = rag_bench("diff", ids["baseline"], "--runs-dir", runs, "--format", "json")
    assert same.exit_code == 0
    assert all(r["against"] == ids["baseline_old"] for r in json.loads(same.stdout))
    assert_one_line_error(
        rag_bench("diff", ids["baseline_old"], "--runs-dir", runs), "no earlier run"
    )


def test_gate_passes_and_fails(rag_bench, store, tmp_path):
    runs, ids = copy_store(store, tmp_path)
    ok = rag_bench(
        "gate",
        ids["baseline"],
        "--baseline",
        ids["baseline_old"],
        "--max-drop",
        "recall@10=0.02",
        "--runs-dir",
        runs,
    )
    assert ok.exit_code == 0 and "passed" in ok.stderr
    degrade(runs, ids["baseline"], "29990101-000000-baseline-dead", "recall@10", 0.3)
    bad = rag_bench(
        "gate",
        "29990101-000000-baseline-dead",
        "--baseline",
        ids["baseline"],
        "--max-drop",
        "recall@10=0.02",
        "--runs-dir",
        runs,
        "--format",
        "csv",
    )
    assert bad.exit_code == 1 and "FAILED" in bad.stderr
    assert "recall@10" in bad.stdout and ",fail," in bad.stdout
    assert_one_line_error(
        rag_bench(
            "gate",
            ids["baseline"],
            "--baseline",
            ids["baseline_old"],
            "--max-drop",
            "recall@10",
            "--runs-dir",
            runs,
        ),
        "metric=amount",
    )


def worsen_some(runs, run_id, new_id, metric, by, n_queries):
    """A copy of a run whose ``metric`` is worse by ``by`` on its first ``n_queries`` queries
    with room for it (higher for lower-is-better metrics)."""
    target = copy_run(locate(runs, run_id), runs, new_id, created_at="2099-01-01T00:00:00+00:00")
    frame = read_table(target, "metrics")
    lower_is_better = metric in ("over_refusal", "answered_unanswerable")
    room = frame["value"] <= 1 - by if lower_is_better else frame["value"] >= by
    hit = frame.index[(frame["metric"] == metric) & room][:n_queries]
    frame.loc[hit, "value"] += by if lower_is_better else -by
    write_table(target, "metrics", frame)


def test_the_gate_fails_a_small_tier_on_the_drop_it_cannot_test(rag_bench, store, tmp_path):
    """The smoke tier cannot show a 0.02 drop of recall@10 significantly: by default the
    gate then fails on the observed drop and says why; requiring significance passes it."""
    runs, ids = copy_store(store, tmp_path)
    worsen_some(runs, ids["baseline"], "29990101-000000-baseline-beef", "recall@10", 0.35, 2)
    args = ["gate", "29990101-000000-baseline-beef", "--baseline", ids["baseline"]]
    args += ["--max-drop", "recall@10=0.02", "--runs-dir", runs, "--format", "json"]
    auto = rag_bench(*args)
    assert auto.exit_code == 1, auto.stderr
    (row,) = json.loads(auto.stdout)
    assert row["rule"] == "drop" and row["verdict"] == "fail" and row["mde"] > 0.02
    assert row["reason"].startswith(f"worsened by {2 * 0.35 / row['n']:.4f} > 0.02")
    assert f"warning: recall@10: {row['n']} paired queries detect a change of" in auto.stderr
    assert "the gate fails on the observed drop alone" in auto.stderr
    strict = rag_bench(*args, "--require", "significant")
    assert strict.exit_code == 0 and "not significant" in json.loads(strict.stdout)[0]["reason"]
    assert "cannot fail the gate" in strict.stderr


def test_the_gate_reads_lower_is_better_metrics_the_right_way(rag_bench, store, tmp_path):
    runs, ids = copy_store(store, tmp_path)
    worsen_some(runs, ids["baseline"], "29990101-000000-baseline-cafe", "over_refusal", 1.0, 6)
    args = ["gate", "29990101-000000-baseline-cafe", "--baseline", ids["baseline"]]
    out = rag_bench(
        *args, "--max-drop", "over_refusal=0.05", "--runs-dir", runs, "--format", "json"
    )
    assert out.exit_code == 1
    assert json.loads(out.stdout)[0]["reason"].startswith("worsened by 0.2")
    back = ["gate", ids["baseline"], "--baseline", "29990101-000000-baseline-cafe"]
    better = rag_bench(
        *back, "--max-drop", "over_refusal=0.05", "--runs-dir", runs, "--format", "json"
    )
    assert better.exit_code == 0
    assert json.loads(better.stdout)[0]["reason"].startswith("improved by 0.2")


def test_sql_over_all_runs(rag_bench, store):
    runs, ids = store
    out = rag_bench(
        "sql",
        "SELECT run_id, count(*) AS n FROM metrics WHERE metric = 'ndcg@10' "
        "GROUP BY ALL ORDER BY 1",
        "--runs-dir",
        runs,
        "--format",
        "json",
    )
    assert json.loads(out.stdout) == [{"run_id": r, "n": 30} for r in sorted(ids.values())]
    schema = rag_bench("sql", "--schema", "--runs-dir", runs, "--format", "csv").stdout
    for view in ("runs", "queries", "metrics", "retrieved", "claims"):
        assert f"\n{view}," in schema


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("COPY metrics TO 'out.csv'", "COPY statements are not allowed"),
        ("CREATE TABLE t AS SELECT 1", "CREATE statements are not allowed"),
        ("DELETE FROM metrics", "not allowed"),
        ("ATTACH 'other.db'", "ATTACH statements are not allowed"),
        ("INSTALL httpfs", "not allowed"),
        ("EXPORT DATABASE 'out'", "not allowed"),
        ("SELECT * FROM read_csv('/etc/passwd')", "--allow-files"),
        ("SELECT * FROM read_parquet('https://example.com/x.parquet')", "SQL error"),
        ("SELEC 1", "syntax error"),
    ],
)
def test_sql_is_read_only(rag_bench, store, tmp_path, query, fragment):
    runs, _ = copy_store(store, tmp_path)
    before = fingerprint(runs)
    assert_one_line_error(rag_bench("sql", query, "--runs-dir", runs), fragment)
    assert fingerprint(runs) == before


def test_broken_runs_are_reported_and_the_rest_stay_queryable(rag_bench, store, tmp_path):
    runs, ids = copy_store(store, tmp_path)
    table_file(locate(runs, ids["baseline_old"]), "metrics").write_bytes(b"not parquet")
    manifest = json.loads(manifest_file(runs, ids["baseline"]).read_text())
    manifest["schema_version"] = 99
    manifest_file(runs, ids["baseline"]).write_text(json.dumps(manifest))
    out = rag_bench("runs", "--runs-dir", runs, "--format", "csv")
    assert out.exit_code == 0
    assert f"{ids['hybrid_rerank']},hybrid_rerank" in out.stdout
    assert "unreadable" in out.stdout and "schema version 99" in out.stderr
    sql = rag_bench(
        "sql", "SELECT DISTINCT run_id FROM metrics", "--runs-dir", runs, "--format", "csv"
    )
    assert sql.stdout.strip().splitlines()[1:] == [ids["hybrid_rerank"]]
    assert_one_line_error(
        rag_bench("show", ids["baseline"], "--runs-dir", runs), "newer than this rag-bench"
    )


def test_rm_asks_then_deletes(rag_bench, store, tmp_path):
    runs, ids = copy_store(store, tmp_path)
    from click.testing import CliRunner

    from rag_bench.cli.main import cli

    declined = CliRunner().invoke(
        cli, ["rm", ids["baseline"], "--runs-dir", str(runs)], input="n\n"
    )
    assert declined.exit_code != 0 and manifest_file(runs, ids["baseline"]).exists()
    out = rag_bench("rm", ids["baseline"], ids["baseline_old"], "--yes", "--runs-dir", runs)
    assert out.exit_code == 0
    assert committed_ids(runs) == [ids["hybrid_rerank"]]
    assert list(partitions(runs)) == [ids["hybrid_rerank"]]


def test_a_broken_run_can_be_removed_by_prefix(rag_bench, store, tmp_path):
    runs, ids = copy_store(store, tmp_path)
    table_file(locate(runs, ids["baseline"]), "claims").unlink()
    shown = rag_bench("show", ids["baseline"], "--runs-dir", runs)
    assert_one_line_error(shown, "unreadable", "claims/variant=baseline")
    assert shown.stderr.count("unreadable") == 1
    out = rag_bench("rm", ids["baseline"][:-2], "--yes", "--runs-dir", runs)
    assert out.exit_code == 0 and ids["baseline"] not in committed_ids(runs)
    assert ids["baseline"] not in partitions(runs)


def test_compare_collapses_metrics_constant_in_every_query(rag_bench, store):
    """faithfulness is 1.0 in every query of the shipped smoke runs: one line, not rows of
    ties; json keeps every row."""
    runs, ids = store
    args = ("compare", ids["baseline"], ids["hybrid_rerank"], "--runs-dir", runs)
    table = rag_bench(*args, "--resamples", "200").stdout
    assert "faithfulness: 1 in every query of every run" in table
    assert not any(line.split()[1:2] == ["faithfulness"] for line in table.splitlines()[3:])
    rows = json.loads(rag_bench(*args, "--resamples", "200", "--format", "json").stdout)
    assert any(r["metric"] == "faithfulness" for r in rows)
