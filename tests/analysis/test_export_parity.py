"""A TREC export re-scored by pytrec_eval and ir_measures (which read scores at single
precision) and by trec_eval (double) gives the stored means of a fused run, whose near-tied
scores a double-precision nudge alone would merge again; and the export and ``eval`` say how
the unanswerable queries are counted."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from conftest import SHIPPED
from rag_bench.analysis.export import strictly_decreasing, trec_lines
from rag_bench.runs import open_runs

MEASURES = {"ndcg_cut_10": "ndcg@10", "recall_100": "recall@100", "recip_rank": "mrr"}


def _qrels() -> dict[str, dict[str, int]]:
    judged: dict[str, dict[str, int]] = {}
    for line in (SHIPPED / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query, doc, grade = line.split("\t")
        judged.setdefault(query, {})[doc] = int(grade)
    return judged


@pytest.fixture(scope="module")
def exported(shipped_runs, tmp_path_factory):
    """The hybrid run on every kestrel-kb query, its TREC export and stored ndcg@10 etc."""
    hybrid = shipped_runs("kestrel-kb")[1]
    store = open_runs(hybrid.store)
    lines = trec_lines(store.retrieved([hybrid.run_id]), hybrid.run_id)
    path = tmp_path_factory.mktemp("export") / "hybrid.trec"
    path.write_text("\n".join(lines) + "\n")
    run: dict[str, dict[str, float]] = {}
    for line in lines:
        query, _, doc, _, score, _ = line.split()
        run.setdefault(query, {})[doc] = float(score)
    stored = store.metrics([hybrid.run_id]).set_index(["query_id", "metric"])["value"]
    return path, run, stored


def _answerable(stored, qrels):
    defined = stored.xs("ndcg@10", level="metric").dropna()
    return {q: qrels[q] for q in defined.index}


def test_pytrec_eval_reads_the_stored_order_and_metrics(exported):
    import pytrec_eval

    _, run, stored = exported
    qrels = _answerable(stored, _qrels())
    found = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES)).evaluate(run)
    assert len(found) == 235
    for query, values in found.items():
        for theirs, ours in MEASURES.items():
            assert values[theirs] == pytest.approx(stored[(query, ours)], abs=1e-12), query


def test_ir_measures_gives_the_stored_means(exported):
    import ir_measures

    _, run, stored = exported
    qrels = _answerable(stored, _qrels())
    means = ir_measures.calc_aggregate(
        [ir_measures.nDCG @ 10, ir_measures.R @ 100, ir_measures.RR], qrels, run
    )
    for measure, name in ((ir_measures.nDCG @ 10, "ndcg@10"), (ir_measures.R @ 100, "recall@100")):
        expected = stored.xs(name, level="metric").dropna().mean()
        assert means[measure] == pytest.approx(expected, abs=1e-12)
    assert means[ir_measures.RR] == pytest.approx(
        stored.xs("mrr", level="metric").dropna().mean(), abs=1e-12
    )


def test_every_written_score_is_a_32_bit_float_strictly_below_the_one_before():
    near = [0.5, 0.5 - 1e-17, 0.5 - 2e-16, 0.5, 0.25, 0.25 - 1e-12]
    written = strictly_decreasing(near)
    single = np.array(written, dtype=np.float32)
    assert np.array_equal(single.astype(np.float64), np.array(written))
    assert np.all(np.diff(single) < 0)


@pytest.mark.skipif(not os.environ.get("TREC_EVAL"), reason="TREC_EVAL names no trec_eval binary")
def test_trec_eval_agrees_over_the_answerable_queries(exported, tmp_path):
    path, _, stored = exported
    qrels = _answerable(stored, _qrels())
    qrels_file = tmp_path / "qrels"
    qrels_file.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    out = subprocess.run(
        [os.environ["TREC_EVAL"], "-m", "ndcg_cut.10", str(qrels_file), str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert float(out[2]) == pytest.approx(stored.xs("ndcg@10", level="metric").mean(), abs=1e-4)


def test_export_and_eval_state_the_unanswerable_convention(shipped_runs, rag_bench, tmp_path):
    hybrid = shipped_runs("kestrel-kb")[1]
    trec = tmp_path / "run.trec"
    out = rag_bench("export", hybrid.run_id, "--runs-dir", hybrid.store, "-o", trec)
    assert "40 of the 275 queries are unanswerable" in out.stderr
    assert "averages over the other 235" in out.stderr
    scored = rag_bench("eval", "--qrels", SHIPPED / "qrels" / "test.tsv", "--run", trec)
    assert "40 of the 275 queries have no relevant document: scored 0" in " ".join(
        scored.stdout.split()
    )
