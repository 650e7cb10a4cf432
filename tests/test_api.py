"""The public API at the package root: every name resolves on first use, importing the package
loads nothing heavy, and ``rag_bench.run`` speaks in parameters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import rag_bench
from conftest import EXAMPLE
from rag_bench.components.registry import parse_override
from rag_bench.experiment.session import override_texts

HEAVY = ("pandas", "pyarrow", "duckdb", "numpy", "scipy", "sklearn", "torch", "bm25s", "ray")


STARTS = {
    "import rag_bench": "import rag_bench",
    "rag-bench --help": "from rag_bench.cli.main import main\nsys.argv[1:] = ['--help']\n"
    "try:\n    main()\nexcept SystemExit:\n    pass",
}


@pytest.mark.parametrize("start", sorted(STARTS))
def test_starting_loads_no_heavy_package(start):
    """What keeps ``import rag_bench`` and ``rag-bench --help`` instant (see bench_startup.py)."""
    loaded = "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    probe = f"import json, sys\n{STARTS[start]}\n{loaded}"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(done.stdout.splitlines()[-1]))
    assert "rag_bench" in modules
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


@pytest.mark.parametrize("name", sorted(rag_bench._API))
def test_every_public_name_resolves_and_is_listed(name):
    assert name in rag_bench.__all__ and name in dir(rag_bench)
    assert getattr(rag_bench, name) is not None


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        rag_bench.no_such_thing  # noqa: B018


def test_the_report_folder_does_not_hide_the_report_function():
    from rag_bench.report import page

    assert rag_bench.report is page.report


def test_the_public_names_are_the_library_functions():
    from rag_bench.analysis.pool import pool_pairs
    from rag_bench.data.qrels_versions import merge_labels
    from rag_bench.evaluation.retrieval import evaluate_run
    from rag_bench.experiment.rescore import rescore_run
    from rag_bench.experiment.session import run

    assert rag_bench.evaluate is evaluate_run and rag_bench.run is run
    assert rag_bench.pool_pairs is pool_pairs and rag_bench.merge_labels is merge_labels
    assert rag_bench.rescore is rescore_run
    assert issubclass(rag_bench.RagBenchError, Exception)


def test_evaluate_scores_files_and_objects():
    means = rag_bench.evaluate(EXAMPLE / "qrels.txt", EXAMPLE / "run.txt", "ndcg@10,mrr").means()
    assert set(means) == {"ndcg@10", "mrr"} and 0 < means["mrr"] <= 1
    qrels = rag_bench.Qrels.from_dict({"q1": {"d1": 1, "d2": 1}})
    run = rag_bench.Run.from_rankings({"q1": ["d3", "d1", "d2"]})
    means = rag_bench.evaluate(qrels, run, "recall@2,ndcg@2").means()
    assert means["recall@2"] == 0.5
    assert means["ndcg@2"] == pytest.approx((1 / 1.584962500721156) / (1 + 1 / 1.584962500721156))


def test_overrides_become_the_texts_the_command_line_takes():
    overrides = {
        "chunker.name": "none",
        "retriever.k1": 1.2,
        "generator.prompt": "1.2",
        "reranker.full": True,
        "encoder.query_prefix": 'say "hi"',
    }
    texts = override_texts(overrides)
    assert texts[:2] == ["chunker.name=none", "retriever.k1=1.2"]
    parsed = {f"{slot}.{param}": value for slot, param, value in map(parse_override, texts)}
    assert parsed == overrides


def test_run_takes_parameters_and_a_shipped_dataset_name(tmp_path, index_cache):
    result = rag_bench.run(
        "baseline",
        "seed-example",
        overrides={"retriever.k1": 1.2, "chunker.name": "none"},
        ks=(2, 3),
        runs_dir=tmp_path,
        cache_dir=index_cache,
    )
    assert isinstance(result, rag_bench.RunResult)
    manifest = result.manifest
    assert manifest["dataset"]["name"] == "seed-example"
    assert manifest["params"]["retriever"]["k1"] == 1.2
    assert manifest["params"]["chunker"]["name"] == "none"
    assert manifest["ks"] == [2, 3]
    both = rag_bench.run(["baseline", "hybrid"], "seed-example", runs_dir=tmp_path, ks=(2,))
    assert [r.manifest["variant"] for r in both] == ["baseline", "hybrid"]


def test_run_checks_every_variant_name_before_any_work(tmp_path):
    with pytest.raises(rag_bench.RagBenchError, match="no_such_variant"):
        rag_bench.run(["baseline", "no_such_variant"], runs_dir=tmp_path)
    assert not (tmp_path / "manifests").exists()


def test_resume_finishes_an_interrupted_run(tmp_path, monkeypatch, index_cache):
    from processes import interrupted_run

    runs = tmp_path / "runs"
    stop = interrupted_run(monkeypatch, runs, index_cache)  # Ctrl-C after two blocks of eight
    result = rag_bench.resume(stop.run_id, runs_dir=runs, cache_dir=index_cache)
    assert result.run_id == stop.run_id and len(result.queries) == 30
    assert result.manifest["resumed"]["queries_from_checkpoint"] == 16
