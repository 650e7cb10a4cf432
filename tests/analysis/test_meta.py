"""The meta-evaluation harness: its statistics against scikit-learn, its baselines, its
bootstrap and what it says of a judge that does not beat overlap."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import (
    balanced_accuracy_score,
    cohen_kappa_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

from rag_bench.analysis.meta import (
    best_threshold,
    binary_stats,
    bootstrap,
    cross_fitted_flags,
    meta_evaluate,
    unigram_overlap,
)
from rag_bench.data.labels import load_labels
from rag_bench.model import Verdict


def _random(seed: int, n: int = 300):
    rng = np.random.default_rng(seed)
    supported = rng.random(n) < 0.6
    # scores with ties (rounded) that lean towards the truth
    score = np.round(0.3 * supported + rng.random(n), 1)
    flagged = score < 0.6
    return supported, flagged, score


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_binary_stats_equal_scikit_learn(seed):
    supported, flagged, score = _random(seed)
    gold, said = (~supported).astype(int), flagged.astype(int)  # 1 = unsupported
    stats = binary_stats(supported, flagged, score)
    assert stats["kappa"] == pytest.approx(cohen_kappa_score(gold, said), abs=1e-12)
    assert stats["balanced_accuracy"] == pytest.approx(
        balanced_accuracy_score(gold, said), abs=1e-12
    )
    assert stats["roc_auc"] == pytest.approx(roc_auc_score(supported, score), abs=1e-12)
    assert stats["precision_unsupported"] == pytest.approx(precision_score(gold, said), abs=1e-12)
    assert stats["recall_unsupported"] == pytest.approx(recall_score(gold, said), abs=1e-12)
    assert stats["share_flagged"] == pytest.approx(said.mean())
    assert stats["human_share"] == pytest.approx(gold.mean())


def test_a_hand_computed_case():
    # 4 items: supported, supported, unsupported, unsupported; the judge flags the 2nd and 3rd
    supported = np.array([True, True, False, False])
    flagged = np.array([False, True, True, False])
    score = np.array([0.9, 0.4, 0.2, 0.5])
    stats = binary_stats(supported, flagged, score)
    assert stats["kappa"] == 0.0  # observed 1/2, chance 1/2
    assert stats["balanced_accuracy"] == 0.5
    # pairs (supported, unsupported): 0.9>0.2, 0.9>0.5, 0.4>0.2, 0.4<0.5 → 3 of 4
    assert stats["roc_auc"] == 0.75
    assert stats["precision_unsupported"] == 0.5 and stats["recall_unsupported"] == 0.5


def test_the_constant_baseline_is_chance():
    supported, _, _ = _random(5)
    stats = binary_stats(supported, np.zeros(len(supported), bool), np.ones(len(supported)))
    assert stats["kappa"] == 0.0 and stats["roc_auc"] == 0.5 and stats["balanced_accuracy"] == 0.5
    assert stats["share_flagged"] == 0.0 and np.isnan(stats["precision_unsupported"])


def test_unigram_overlap_is_the_share_of_tokens_found():
    assert unigram_overlap("The cat sat on a mat", ["the cat sat", "on the hat"]) == 4 / 6
    assert unigram_overlap("Paris, Paris!", ["paris is big"]) == 1.0
    assert unigram_overlap("...", ["anything"]) == 1.0  # nothing to check


def test_best_threshold_maximises_kappa():
    score = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    supported = np.array([False, False, True, True, True, True])
    cut = best_threshold(score, supported)
    assert 0.2 < cut < 0.3  # flags exactly the two unsupported items
    assert binary_stats(supported, score < cut, score)["kappa"] == 1.0


def test_cross_fitted_flags_never_use_an_items_own_fold():
    supported, _, score = _random(7, 200)
    groups = [f"g{i // 2}" for i in range(200)]
    flags = cross_fitted_flags(score, supported, groups, seed=0)
    assert flags.dtype == bool and 0 < flags.mean() < 1
    # relabelling one fold's items changes only the other fold's flags
    flipped = supported.copy()
    from rag_bench.analysis.meta import fold_of

    fold = fold_of(groups, 0)
    flipped[fold == 0] = ~flipped[fold == 0]
    again = cross_fitted_flags(score, flipped, groups, seed=0)
    assert np.array_equal(flags[fold == 0], again[fold == 0])
    assert not np.array_equal(flags[fold == 1], again[fold == 1])


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    supported, flagged, score = _random(11)
    groups = [str(i // 3) for i in range(len(score))]
    scorers = {"judge": (flagged, score), "overlap": (flagged, np.round(score, 0))}
    once = bootstrap(scorers, supported, groups, resamples=200, seed=3)
    twice = bootstrap(scorers, supported, groups, resamples=200, seed=3)
    other = bootstrap(scorers, supported, groups, resamples=200, seed=4)
    assert json.dumps(once) == json.dumps(twice)
    assert json.dumps(once) != json.dumps(other)
    for measure in once["judge"].values():
        assert measure["low"] <= measure["value"] <= measure["high"]
    assert once["judge"]["auc_minus_overlap"]["value"] > 0


class _Reversed:
    """A judge that scores the more overlapping claims lower: worse than overlap."""

    def judge(self, query, claims, context):
        text = " ".join(c.text for c in context)
        out = []
        for claim in claims:
            share = unigram_overlap(claim.text, [text])
            out.append(Verdict(2 if share < 0.5 else 0, share < 0.5, (), "reversed", 1 - share))
        return out


def _labels(tmp_path, rows):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_labels(path)


def _rows(n: int = 40):
    rows = []
    for i in range(n):
        passage = f"The bridge number {i} opened in spring and carries trains over the river."
        good = i % 2 == 0
        claim = "The bridge carries trains over the river." if good else "Dragons guard a castle."
        rows.append({"id": f"c{i}", "context": [passage], "claim": claim,
                     "label": "supported" if good else "unsupported"})  # fmt: skip
    return rows


def test_a_judge_below_overlap_is_told_so(tmp_path):
    items = _labels(tmp_path, _rows())
    report = meta_evaluate(items, _Reversed(), "reversed", resamples=100)
    level = report["levels"]["claim"]
    assert set(level["scorers"]) == {"reversed", "overlap", "constant"}
    assert level["scorers"]["overlap"]["roc_auc"]["value"] == 1.0
    assert "does NOT beat unigram overlap" in level["note"]
    assert "answer" not in report["levels"]


def test_answers_are_split_into_claims_and_flagged_by_any(tmp_path):
    from rag_bench.components.analyzers import EnglishAnalyzer
    from rag_bench.components.judges import LexicalJudge

    judge = LexicalJudge()
    judge.prepare(None, [], EnglishAnalyzer())
    rows = [
        {"id": "a1", "context": ["The museum opens at nine. Entry costs five euros."],
         "answer": "The museum opens at nine. Entry costs five euros.", "label": "supported",
         "claims": [{"claim": "The museum opens at nine.", "label": "supported"}]},
        {"id": "a2", "context": ["The museum opens at nine. Entry costs five euros."],
         "answer": "The museum opens at nine. It has a famous dinosaur hall.",
         "label": "unsupported"},
    ]  # fmt: skip
    report = meta_evaluate(_labels(tmp_path, rows), judge, "lexical", resamples=50)
    answers = report["levels"]["answer"]
    assert answers["n"] == 2 and report["levels"]["claim"]["n"] == 1
    assert answers["scorers"]["lexical"]["kappa"]["value"] == 1.0  # a2 flagged, a1 not


def test_one_pass_table_equals_rejudging_for_a_judge_of_each_claim_alone():
    """``assess_judge(rejudge=False)`` builds the table from judge-agreement's own verdicts. The
    lexical judge grades every claim on its own, so judging each answer's claims together once
    must give exactly the table of judging every answer and every claim again."""
    from rag_bench.analysis.agreement import assess_judge
    from rag_bench.data.dataset import load_dataset

    dataset = load_dataset("kestrel-kb")
    again = assess_judge(dataset, "lexical", (), resamples=50)["meta"]
    once = assess_judge(dataset, "lexical", (), resamples=50, rejudge=False)["meta"]
    assert once["levels"].keys() == again["levels"].keys() == {"claim", "answer"}
    for level in ("claim", "answer"):
        assert once["levels"][level]["n"] == again["levels"][level]["n"]
        for scorer in ("lexical", "overlap", "constant"):
            ours, theirs = once["levels"][level]["scorers"], again["levels"][level]["scorers"]
            same = json.dumps(ours[scorer]) == json.dumps(theirs[scorer])
            assert same, (level, scorer, ours[scorer], theirs[scorer])
