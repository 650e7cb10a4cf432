"""Issue 29's loop end to end, as a person runs it, on a copy of the shipped dataset: baseline and
hybrid_rerank on the smoke tier, `rag-bench pool` of both, pairs graded by key presses on the page
`rag-bench review` serves (headless Chromium), `rag-bench qrels merge` of the labels as a new
version, `rag-bench rescore` of both runs on it, and fresh runs on it (`run --qrels`) that the
rescored ones must equal; judged@10 rises where pairs were labelled and equals ir_measures'
Judged@10 on the new qrels."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil

import pandas as pd
import pytest
from processes import assert_same_traces
from review_browser import Page, review_command

from conftest import SHIPPED, require
from rag_bench.runs import open_runs

VARIANTS = ("baseline", "hybrid_rerank")
# what the person does on the page, in order: a key, and the item (1-based) it grades (None: a
# move); item 4 is skipped and stays unjudged, item 5's grade is corrected (the later line wins)
KEYS = [
    ("3", 1),
    ("0", 2),
    ("2", 3),
    ("j", None),
    ("0", 5),
    ("1", 6),
    ("k", None),
    ("ArrowUp", None),
    ("2", 5),
]


def base_judgements(tsv) -> dict[tuple[str, str], int]:
    """The judgements of a BEIR qrels TSV, read independently of rag_bench."""
    rows = tsv.read_text(encoding="utf-8").splitlines()
    assert rows[0].split("\t")[:2] == ["query-id", "corpus-id"]
    return {(q, d): int(g) for q, d, g in (row.split("\t") for row in rows[1:])}


def metric(store, run_id: str, name: str) -> dict[str, float]:
    """A run's values of one metric per query (NaN where undefined)."""
    rows = store.metrics(run_id)
    rows = rows[rows["metric"] == name]
    return dict(zip(rows["query_id"], rows["value"]))


@pytest.mark.browser
@pytest.mark.signals
@pytest.mark.slow
def test_pool_review_merge_rescore_equals_fresh_runs(browser, rag_bench, tmp_path):
    ir_measures = require("ir_measures")
    kb = tmp_path / "kestrel-kb"
    shutil.copytree(SHIPPED, kb)
    runs = tmp_path / "runs"
    common = ("--dataset", kb, "--runs-dir", runs)

    # 1. the two runs, on the dataset's own qrels
    for variant in VARIANTS:
        ran = rag_bench("run", "--variant", variant, "--tier", "smoke", *common, "--name", variant)
        assert ran.exit_code == 0, ran.stderr
    store = open_runs(runs)
    before = {v: store.resolve(v) for v in VARIANTS}

    # 2. their unjudged top-10 pairs, as a pool file
    pool = tmp_path / "pool.jsonl"
    pooled = rag_bench("pool", *VARIANTS, "--depth", 10, *common, "-o", pool)
    assert pooled.exit_code == 0, pooled.stderr
    items = [json.loads(line) for line in pool.read_text(encoding="utf-8").splitlines()]
    assert pooled.stdout.strip() == (
        f"wrote {len(items)} unjudged pairs from the top 10 of 2 run(s) to {pool}"
    )

    # 3. a person grades some of them on the page, by keyboard, then ends the server (Ctrl-C)
    labels = tmp_path / "labels.jsonl"
    grades: dict[int, int] = {}
    with review_command(pool, labels, "ana") as review:
        page = Page(browser, review.url)
        assert page.text("progress") == f"0 / {len(items)} labelled"
        for key, item in KEYS:
            if item is None:
                page.press(key)
                continue
            assert page.text("position").startswith(f"item {item} of {len(items)}")
            page.press(key, f"pair {item} grade {key}")
            grades[item] = int(key)
        assert page.text("progress") == f"{len(grades)} / {len(items)} labelled"
        assert not page.problems, page.problems
    assert review.returncode == 0, review.stderr
    assert (
        review.stdout.strip().splitlines()[-1] == f"{len(grades)}/{len(items)} labelled in {labels}"
    )
    graded = {(items[i - 1]["query_id"], items[i - 1]["doc_id"]): g for i, g in grades.items()}
    assert sorted(set(graded.values())) == [0, 1, 2, 3]  # relevant and not relevant
    # each run has graded pairs in its top 10
    ranked = {
        v: {(items[i - 1]["query_id"]) for i in grades if before[v] in items[i - 1]["ranks"]}
        for v in VARIANTS
    }
    assert all(ranked.values()), ranked

    # 4. merged as a new qrels version of the copy, recorded in its log
    merged = rag_bench("qrels", "merge", "--dataset", kb, labels)
    assert merged.exit_code == 0, merged.stderr
    tsvs = list((kb / "qrels" / "versions" / "test").glob("*.tsv"))
    assert len(tsvs) == 1
    new_qrels = base_judgements(tsvs[0])
    base = base_judgements(kb / "qrels" / "test.tsv")
    assert not set(graded) & set(base)  # the pool held unjudged pairs only
    assert new_qrels == {**base, **graded}
    sha = tsvs[0].stem
    assert (
        sha
        == hashlib.sha256(
            "".join(f"{q}\t{d}\t{g}\n" for (q, d), g in sorted(new_qrels.items())).encode()
        ).hexdigest()
    )
    assert merged.stdout.startswith(f"qrels version 1 {sha[:12]} ({len(new_qrels)} judgements;")
    assert f"{len(graded)} added, 0 changed, 0 unchanged; labelled by ana" in merged.stdout
    log = rag_bench("qrels", "log", "--dataset", kb, "--format", "json")
    assert log.exit_code == 0, log.stderr
    versions = json.loads(log.stdout)
    assert [v["version"] for v in versions] == ["base", "1"]
    assert {k: versions[1][k] for k in ("sha256", "parent", "judgements", "labels")} == {
        "sha256": sha[:12],
        "parent": "base",
        "judgements": len(new_qrels),
        "labels": "labels.jsonl",
    }
    assert (versions[1]["added"], versions[1]["changed"], versions[1]["unchanged"]) == (
        len(graded),
        0,
        0,
    )
    assert versions[1]["labellers"] == "ana"
    assert not (SHIPPED / "qrels" / "versions").exists()  # the shipped data is never written

    # 5. both runs re-scored on it, and run fresh on it
    refuse = {}
    for variant in VARIANTS:
        rescored = rag_bench(
            "rescore",
            variant,
            "--qrels",
            "latest",
            "--runs-dir",
            runs,
            "--name",
            f"{variant}-rescored",
        )
        assert rescored.exit_code == 0, rescored.stderr
        # a reranker that learnt from the qrels keeps its model; rescore says how to run the
        # fresh run equal to it, and that is the fresh run made here
        advice = re.search(r"a fresh run equal to this one: (rag-bench run .*)", rescored.stderr)
        if variant == "hybrid_rerank":
            assert advice is not None, rescored.stderr
        command = (
            shlex.split(advice.group(1))[2:]
            if advice
            else ["--variant", variant, "--qrels", sha[:12]]
        )
        assert command[:4] == ["--variant", variant, "--qrels", sha[:12]], command
        fresh = rag_bench("run", *command, "--tier", "smoke", *common, "--name", f"{variant}-fresh")
        assert fresh.exit_code == 0, fresh.stderr

        store = open_runs(runs)
        source, again, new = (store.resolve(f"{variant}{s}") for s in ("", "-rescored", "-fresh"))
        for run_id in (again, new):
            assert store.get(run_id).manifest["qrels"]["sha256"] == sha
        assert store.get(again).manifest["rescored_from"]["run_id"] == source

        # every stored metric row of the rescored run equals the fresh run's
        ours = store.metrics(again).drop(columns="run_id").sort_values(["query_id", "metric"])
        theirs = store.metrics(new).drop(columns="run_id").sort_values(["query_id", "metric"])
        assert (
            set(ours["query_id"])
            == set(theirs["query_id"])
            == set(metric(store, source, "judged@10"))
        )
        pd.testing.assert_frame_equal(
            ours.reset_index(drop=True), theirs.reset_index(drop=True), check_exact=True
        )
        assert_same_traces(store.get(again).location, store.get(new).location)

        # judged@10 rises exactly where a graded pair is in the run's top 10
        old, now = metric(store, source, "judged@10"), metric(store, again, "judged@10")
        top = store.retrieved(source)
        top = top[(top["stage"] == "documents") & (top["rank"] <= 10)]
        rows = store.queries(source)
        refuse[variant] = set(rows.loc[rows["should_refuse"], "query_id"])
        for query_id in old:
            if query_id in refuse[variant]:
                assert pd.isna(old[query_id]) and pd.isna(now[query_id])
                continue
            docs = set(top.loc[top["query_id"] == query_id, "doc_id"])
            newly = sum((query_id, d) in graded for d in docs)
            assert (now[query_id] > old[query_id]) == (newly > 0), query_id
            assert now[query_id] - old[query_id] == pytest.approx(newly / 10, abs=1e-12)
        assert any(now[q] > old[q] for q in ranked[variant])

        # and equals ir_measures' Judged@10 on the new qrels, query by query
        ranking = store.retrieved(again)
        ranking = ranking[ranking["stage"] == "documents"]
        run = {
            q: {d: -float(r) for d, r in zip(f["doc_id"], f["rank"])}
            for q, f in ranking.groupby("query_id")
            if q not in refuse[variant]
        }
        qrels: dict[str, dict[str, int]] = {}
        for (q, d), g in new_qrels.items():
            qrels.setdefault(q, {})[d] = g
        reference = {
            m.query_id: m.value
            for m in ir_measures.iter_calc(
                [ir_measures.parse_measure("Judged@10")], {q: qrels[q] for q in run}, run
            )
        }
        defined = {q: v for q, v in now.items() if not pd.isna(v)}
        assert set(defined) == set(reference) == set(run)
        assert max(abs(defined[q] - reference[q]) for q in reference) <= 1e-12
