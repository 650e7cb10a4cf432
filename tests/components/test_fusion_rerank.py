"""Fusion with weights and normalisations; the ltr reranker's encoder feature and its labels
(a train split of its own, or cross-fitting, and the manifest and ``show`` say which)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import SHIPPED, assert_one_line_error, require
from rag_bench.components.fusion import ReciprocalRankFusion, WeightedScoreFusion, rescale
from rag_bench.components.rerank import FEATURES, LearnedReranker, PassageFeatures, linear
from rag_bench.errors import UsageError
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.model import Hits, Query

# --- fusion ---------------------------------------------------------------------------------


def hits(index, score) -> Hits:
    return Hits(np.array(index), np.array(score, dtype=float))


def test_rrf_weights_scale_each_retrievers_reciprocal_ranks():
    sparse, dense = hits([0, 1], [9.0, 8.0]), hits([1, 2], [0.9, 0.8])
    plain = ReciprocalRankFusion(k=0).fuse([sparse, dense], 10)
    assert dict(zip(plain.index.tolist(), plain.score.tolist())) == {1: 1.5, 0: 1.0, 2: 0.5}
    dense_heavy = ReciprocalRankFusion(k=0, weights=(1.0, 3.0)).fuse([sparse, dense], 10)
    assert dense_heavy.index.tolist() == [1, 2, 0]
    assert dense_heavy.score.tolist() == [0.5 + 3.0, 1.5, 1.0]


def test_rescaling_starts_at_the_lowest_score():
    scores = np.array([3.0, 1.0, 2.0])
    assert rescale(scores, "minmax").tolist() == [1.0, 0.0, 0.5]
    assert rescale(scores, "zscore") == pytest.approx((scores - 1.0) / scores.std())
    assert rescale(np.array([2.0, 2.0]), "zscore").tolist() == [1.0, 1.0]


def test_a_blend_by_zscore_and_by_minmax():
    sparse = hits([0, 1, 2], [10.0, 9.0, 1.0])
    dense = hits([2, 1, 0], [0.9, 0.5, 0.1])
    by_range = WeightedScoreFusion((0.5, 0.5), "minmax").fuse([sparse, dense], 10)
    fused = dict(zip(by_range.index.tolist(), by_range.score.tolist()))
    assert fused == pytest.approx({1: 0.5 * 8 / 9 + 0.25, 0: 0.5, 2: 0.5})
    # by standard deviations (sparse 4.028, dense 0.3266) the dense list's spread counts more
    by_spread = WeightedScoreFusion((0.5, 0.5), "zscore").fuse([sparse, dense], 10)
    assert by_spread.index.tolist() == [1, 2, 0]
    # the reference: scipy's z-scores (population sd), shifted to start at each list's lowest
    zscore = require("scipy.stats").zscore
    z_sparse = dict(zip(sparse.index.tolist(), zscore(sparse.score) - zscore(sparse.score).min()))
    z_dense = dict(zip(dense.index.tolist(), zscore(dense.score) - zscore(dense.score).min()))
    expected = {doc: 0.5 * z_sparse[doc] + 0.5 * z_dense[doc] for doc in z_sparse}
    fused = dict(zip(by_spread.index.tolist(), by_spread.score.tolist()))
    assert fused == pytest.approx(expected, rel=1e-12)
    dense_only = WeightedScoreFusion((0.0, 1.0), "zscore").fuse([sparse, dense], 10)
    assert dense_only.index.tolist()[0] == 2


def test_fusion_parameters_are_checked():
    with pytest.raises(UsageError, match="normalisation='rank'"):
        WeightedScoreFusion(normalisation="rank")
    with pytest.raises(UsageError, match="negative weight"):
        ReciprocalRankFusion(weights=(1.0, -1.0))
    with pytest.raises(UsageError, match="3 weights for 2 retrievers"):
        ReciprocalRankFusion(weights=(1, 1, 1)).fuse([hits([0], [1.0]), hits([0], [1.0])], 5)


# --- the ltr reranker -------------------------------------------------------------------------


def test_scores_are_row_sums_without_blas():
    matrix = np.random.default_rng(0).random((50, len(FEATURES)))
    weights = np.random.default_rng(1).random(len(FEATURES))
    assert linear(matrix, weights) == pytest.approx(matrix @ weights)


class UnitIndex:
    """A dense index over three chunks with hand-made unit embeddings."""

    embeddings = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=np.float32)

    class encoder:  # noqa: N801
        @staticmethod
        def encode(texts):
            return np.array([[0.0, 1.0]] * len(texts), dtype=np.float32)


def test_ltr_sees_the_encoders_similarity_for_every_candidate():
    from rag_bench.components.analyzers import EnglishAnalyzer
    from rag_bench.model import Chunk

    chunks = [Chunk(f"d{i}#0", f"d{i}", 0, 4, t, "") for i, t in enumerate(["a b", "b c", "c d"])]
    reranker = LearnedReranker()
    reranker.features = PassageFeatures(chunks, EnglishAnalyzer())
    candidates = [hits([2, 0, 1], [3.0, 2.0, 1.0])]
    (without,) = reranker._matrices([Query("q", "c")], candidates, [{}])
    assert without[:, FEATURES.index("similarity")].tolist() == [0.0, 0.0, 0.0]
    reranker.attach_encoder(UnitIndex())
    (with_encoder,) = reranker._matrices([Query("q", "c")], candidates, [{}])
    similarity = with_encoder[:, FEATURES.index("similarity")]
    assert similarity == pytest.approx([1.0, 0.0, 0.8])


@pytest.fixture(scope="module")
def with_train_split(tmp_path_factory):
    """kestrel-kb with its judged queries split in two: test (every third) and train."""
    folder = tmp_path_factory.mktemp("split") / "kestrel-split"
    shutil.copytree(SHIPPED, folder)
    (folder / "answers.jsonl").unlink()  # recorded answers of queries now in train
    lines = (SHIPPED / "qrels" / "test.tsv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    queries = sorted({r.split("\t")[0] for r in rows})
    tested = set(queries[::3])
    for name, keep in (("test", True), ("train", False)):
        chosen = [r for r in rows if (r.split("\t")[0] in tested) == keep]
        (folder / "qrels" / f"{name}.tsv").write_text("\n".join([header, *chosen]) + "\n")
    from rag_bench.data.dataset import load_dataset

    evaluated = set(load_dataset(folder).queries)  # the test split and every should_refuse
    return folder, len(set(queries) - tested - evaluated)


@pytest.mark.slow
def test_ltr_learns_from_the_train_split_and_says_so(with_train_split, tmp_path, rag_bench):
    folder, n_train = with_train_split
    common = {"runs_dir": tmp_path, "selection": Selection(tag="api")}
    result = run_variant("hybrid_rerank", folder, **common)
    training = result.manifest["reranker_training"]
    assert training == {"labels": "train split", "split": "train", "queries": n_train}
    shown = rag_bench("show", result.run_id, "--runs-dir", tmp_path)
    assert f"reranker  learnt from split train ({n_train} queries)" in shown.stdout
    crossed = run_variant(
        "hybrid_rerank", folder, overrides=["reranker.train_split=none"], **common
    )
    assert crossed.manifest["reranker_training"]["labels"].startswith("cross-fitted")
    ranks = [
        r.tables["retrieved"].query("stage == 'rerank'")["chunk_id"].tolist()
        for r in (result, crossed)
    ]
    assert ranks[0] != ranks[1]  # a different model: a different ranking
    shown = rag_bench("show", crossed.run_id, "--runs-dir", tmp_path)
    assert "reranker  cross-fitted on the evaluated queries (5 folds)" in shown.stdout


def test_without_a_train_split_ltr_cross_fits_and_says_so(tmp_path):
    result = run_variant("hybrid_rerank", SHIPPED, runs_dir=tmp_path, selection=Selection("api"))
    assert result.manifest["reranker_training"] == {
        "labels": "cross-fitted on the evaluated queries",
        "folds": 5,
    }
    stored = json.loads(next((tmp_path / "_manifests").glob("*.json")).read_text())
    assert stored["reranker_training"] == result.manifest["reranker_training"]


def test_a_missing_train_split_is_a_one_line_error(rag_bench, tmp_path):
    outcome = rag_bench(
        "run", "--variant", "hybrid_rerank", "--runs-dir", tmp_path, "--tag", "api",
        "--set", "reranker.train_split=train",
    )  # fmt: skip
    assert_one_line_error(outcome, "train.tsv", "reranker.train_split=none")
