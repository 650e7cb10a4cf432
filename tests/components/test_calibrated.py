"""The calibrated judge: its learned numbers load with their origin, the lexical-only model
says it is the weaker one, and with the real MiniLM it ranks public claims better than word
overlap."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from conftest import ROOT, SHIPPED
from rag_bench.analysis.agreement import build_judge
from rag_bench.analysis.meta import meta_evaluate
from rag_bench.components import calibrated
from rag_bench.components.analyzers import EnglishAnalyzer
from rag_bench.components.calibrated import LEXICAL, SEMANTIC, CalibratedJudge, learned
from rag_bench.data.labels import load_labels
from rag_bench.errors import MissingBackendError
from rag_bench.model import Chunk, Claim, Query

SLICE = ROOT / "tests" / "fixtures" / "hagrid-slice.jsonl"
PASSAGE = "The ferry leaves at 7:30 from pier 4 and reaches Vlieland in forty minutes."
CONTEXT = [Chunk("d1#0", "d1", 0, len(PASSAGE), PASSAGE)]


def _lexical_judge() -> CalibratedJudge:
    judge = CalibratedJudge(semantic=False)
    judge.prepare(None, [], EnglishAnalyzer())
    return judge


def test_the_learned_models_load_with_their_origin():
    text = resources.files("rag_bench.components").joinpath("calibrated_judge.json").read_text()
    document = json.loads(text)
    assert document["written_by"] == "benchmarks/train_judge.py"
    assert set(document["trained_on"]) == {"attribution", "hagrid", "lfqa", "summaries"}
    for kind, names in (("semantic", LEXICAL + SEMANTIC), ("lexical", LEXICAL)):
        model = learned(kind)
        assert model["features"] == list(names)
        assert len(model["coef"]) == len(model["mean"]) == len(model["scale"]) == len(names)
        assert 0 < model["threshold"] < 1 and model["C"] > 0


def test_the_lexical_only_model_says_it_is_the_weaker_one():
    judge = _lexical_judge()
    assert "weaker" in judge.describe() and judge.usage()["model"] == "lexical"
    good, changed, unrelated = judge.judge(
        Query("q", "When does the ferry leave?"),
        [
            Claim("The ferry leaves at 7:30 from pier 4.", ()),
            Claim("The ferry leaves at 9:15 from pier 4.", ()),
            Claim("Dragons guard the old castle of Prague.", ()),
        ],
        CONTEXT,
    )
    assert good.supported and good.supported_by == ("d1",) and good.grade == 2
    assert not unrelated.supported and unrelated.grade == 0 and unrelated.supported_by == ()
    assert good.score > changed.score > unrelated.score  # a changed number costs support
    assert all("weaker" in v.reason for v in (good, changed, unrelated))
    assert judge.usage()["claims_judged"] == 3


def test_semantic_true_without_the_models_extra_is_an_error(monkeypatch):
    def missing(batch_size=64):
        raise MissingBackendError("sentence_transformers is not installed", "pip install x")

    monkeypatch.setattr(calibrated, "minilm", missing)
    with pytest.raises(MissingBackendError):
        CalibratedJudge(semantic=True)
    fallback = CalibratedJudge()  # unset: the lexical model, and it says so
    assert fallback.encoder is None and "weaker" in fallback.describe()


def test_a_run_manifest_names_the_model_that_ran(tmp_path):
    from rag_bench.experiment.runner import Selection, run_variant

    result = run_variant(
        "baseline",
        SHIPPED,
        overrides=["judge.name=calibrated", "judge.semantic=false"],
        selection=Selection(sample=4, seed=1),
        runs_dir=tmp_path / "runs",
    )
    usage = result.manifest["usage"]["judge"]
    assert usage["model"] == "lexical" and "weaker" in usage["note"]
    assert usage["claims_judged"] > 0


@pytest.mark.slow
def test_with_minilm_it_beats_word_overlap_on_a_public_slice(real_minilm):
    judge, _ = build_judge("calibrated", ("judge.semantic=true",))
    assert judge.usage()["model"] == "semantic"
    ours = meta_evaluate(load_labels(SLICE), judge, "calibrated", resamples=200)["levels"]["claim"]
    mine, overlap = ours["scorers"]["calibrated"], ours["scorers"]["overlap"]
    assert mine["roc_auc"]["value"] > overlap["roc_auc"]["value"]
    assert mine["kappa"]["value"] > overlap["kappa"]["value"]
    assert abs(mine["share_flagged"]["value"] - mine["human_share"]["value"]) <= 0.10
