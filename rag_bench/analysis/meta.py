"""Meta-evaluation of a judge: how far its verdicts agree with human labels, beside two
baselines scored on the same items.

Items are claims or whole answers with a human label (``rag_bench.data.labels``). The judge
sees each item's context; an answer is split into claims as in a run, its score is its lowest
claim score and it is flagged when any claim is judged unsupported. Per level (claim, answer)
the report gives balanced accuracy, Cohen's κ, ROC-AUC of the judge's continuous score,
precision and recall of "unsupported", and the share flagged beside the human share, each with
a percentile bootstrap interval over resampled groups (seeded). The baselines: ``constant``
(flags nothing; κ 0, AUC 0.5) and ``overlap`` (share of the text's word tokens found in the
context; flagged below a threshold chosen to maximise κ on calibration items, or cross-fitted
over two seeded folds of the items themselves when none are given). A judge whose AUC does not
exceed overlap's is told so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from rag_bench.data.labels import LabelledItem
from rag_bench.model import Chunk, Claim, Query, Verdict
from rag_bench.text.claims import split_claims

MEASURES = (
    "balanced_accuracy",
    "kappa",
    "roc_auc",
    "precision_unsupported",
    "recall_unsupported",
    "share_flagged",
    "human_share",
)
TOKEN = re.compile(r"\w+")
RESAMPLES = 1000


# --- the statistics ----------------------------------------------------------------------


def roc_auc(supported: np.ndarray, score: np.ndarray) -> float:
    """Probability that a supported item outscores an unsupported one (ties count half)."""
    supported = np.asarray(supported, bool)
    n_pos, n_neg = int(supported.sum()), int((~supported).sum())
    if not n_pos or not n_neg:
        return float("nan")
    ranks = rankdata(score)
    return float((ranks[supported].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def binary_stats(supported: np.ndarray, flagged: np.ndarray, score: np.ndarray) -> dict:
    """The measures of one scorer on one set of items; "positive" is unsupported."""
    gold_bad, said_bad = ~np.asarray(supported, bool), np.asarray(flagged, bool)
    n = len(gold_bad)
    tp = float(np.sum(gold_bad & said_bad))
    tn = float(np.sum(~gold_bad & ~said_bad))
    fp = float(np.sum(~gold_bad & said_bad))
    fn = float(np.sum(gold_bad & ~said_bad))
    recalls = [r for r in (_ratio(tp, tp + fn), _ratio(tn, tn + fp)) if not np.isnan(r)]
    observed = (tp + tn) / n if n else float("nan")
    chance = ((tp + fp) * (tp + fn) + (tn + fn) * (tn + fp)) / (n * n) if n else float("nan")
    return {
        "balanced_accuracy": float(np.mean(recalls)) if recalls else float("nan"),
        "kappa": float((observed - chance) / (1 - chance)) if n and chance < 1 else 0.0,
        "roc_auc": roc_auc(~gold_bad, score),
        "precision_unsupported": _ratio(tp, tp + fp),
        "recall_unsupported": _ratio(tp, tp + fn),
        "share_flagged": float(np.mean(said_bad)) if n else float("nan"),
        "human_share": float(np.mean(gold_bad)) if n else float("nan"),
    }


def _ratio(part: float, whole: float) -> float:
    return part / whole if whole else float("nan")


def best_threshold(score: np.ndarray, supported: np.ndarray) -> float:
    """The cut below which items are flagged that maximises Cohen's κ on these items (the
    midpoint between neighbouring distinct scores; the lowest such cut on a tie)."""
    score, supported = np.asarray(score, float), np.asarray(supported, bool)
    values = np.unique(score)
    cuts = np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2, [values[-1] + 1.0]])
    kappas = [binary_stats(supported, score < c, score)["kappa"] for c in cuts]
    return float(cuts[int(np.nanargmax(kappas))])


def fold_of(groups: Sequence[str], seed: int) -> np.ndarray:
    """0 or 1 for each item, by a seeded hash of its group."""
    return np.array(
        [hashlib.sha256(f"{seed}:{g}".encode()).digest()[0] & 1 for g in groups], dtype=int
    )


def cross_fitted_flags(
    score: np.ndarray, supported: np.ndarray, groups: Sequence[str], seed: int
) -> np.ndarray:
    """Flags from thresholds learnt on the other fold of the items (two folds by group)."""
    fold = fold_of(groups, seed)
    flagged = np.zeros(len(score), bool)
    for side in (0, 1):
        learn, apply = fold != side, fold == side
        if learn.any() and apply.any():
            flagged[apply] = score[apply] < best_threshold(score[learn], supported[learn])
    return flagged


def bootstrap(
    scorers: dict[str, tuple[np.ndarray, np.ndarray]],
    supported: np.ndarray,
    groups: Sequence[str],
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """Each scorer's measures with percentile intervals, and the paired interval of each
    scorer's AUC minus overlap's, all over the same resamples of groups."""
    supported = np.asarray(supported, bool)
    codes, group_of = np.unique(np.asarray(groups, dtype=object), return_inverse=True)
    members = [np.flatnonzero(group_of == g) for g in range(len(codes))]
    rng = np.random.default_rng(seed)
    draws: dict[str, list[list[float]]] = {name: [] for name in scorers}
    for _ in range(resamples):
        idx = np.concatenate([members[g] for g in rng.integers(0, len(members), len(members))])
        for name, (flagged, score) in scorers.items():
            stats = binary_stats(supported[idx], flagged[idx], score[idx])
            draws[name].append([stats[m] for m in MEASURES])
    tail = (1 - level) / 2
    out = {}
    for name, (flagged, score) in scorers.items():
        point = binary_stats(supported, flagged, score)
        table = np.array(draws[name], dtype=float)
        out[name] = {
            m: {"value": point[m], **_interval(table[:, j], tail)} for j, m in enumerate(MEASURES)
        }
    if "overlap" in draws:
        auc = MEASURES.index("roc_auc")
        base = np.array(draws["overlap"], dtype=float)[:, auc]
        for name in scorers:
            if name in ("overlap", "constant"):
                continue
            diff = np.array(draws[name], dtype=float)[:, auc] - base
            value = out[name]["roc_auc"]["value"] - out["overlap"]["roc_auc"]["value"]
            out[name]["auc_minus_overlap"] = {"value": value, **_interval(diff, tail)}
    return out


def _interval(values: np.ndarray, tail: float) -> dict:
    kept = values[~np.isnan(values)]
    if not len(kept):
        return {"low": float("nan"), "high": float("nan")}
    low, high = np.quantile(kept, [tail, 1 - tail])
    return {"low": float(low), "high": float(high)}


# --- the baselines -----------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


def unigram_overlap(text: str, context: Sequence[str]) -> float:
    """Share of the text's word tokens that occur anywhere in the context."""
    words = tokens(text)
    if not words:
        return 1.0
    vocabulary = {w for passage in context for w in tokens(passage)}
    return sum(w in vocabulary for w in words) / len(words)


# --- running a judge over labelled items -------------------------------------------------


@dataclass(frozen=True)
class Scored:
    """One level's items: human label, group, the judge's flag and score, and overlap."""

    ids: list[str]
    groups: list[str]
    supported: np.ndarray
    flagged: np.ndarray
    score: np.ndarray
    overlap: np.ndarray
    reasons: list[str]


def verdict_score(verdict: Verdict) -> float | None:
    """A verdict's continuous score of support in [0, 1]; from the grade (0, ½, 1) for a judge
    that gives none."""
    score = getattr(verdict, "score", None)
    if score is not None:
        return float(score)
    return None if verdict.grade is None else verdict.grade / 2


def context_chunks(item: LabelledItem) -> list[Chunk]:
    return [
        Chunk(f"{item.id}#p{i}", f"{item.id}#p{i}", 0, len(text), text)
        for i, text in enumerate(item.context)
    ]


def _run(judge, tasks: list[tuple[Query, list[Claim], list[Chunk]]]) -> list[list[Verdict]]:
    if hasattr(judge, "judge_all"):
        out: list[list[Verdict]] = []
        for start in range(0, len(tasks), 32):
            block = tasks[start : start + 32]
            out += judge.judge_all(
                [t[0] for t in block], [t[1] for t in block], [t[2] for t in block]
            )
        return out
    return [judge.judge(q, claims, context) for q, claims, context in tasks]


def score_items(items: Sequence[LabelledItem], judge) -> dict[str, Scored]:
    """The judge's verdicts on every labelled claim and answer, by level."""
    tasks, owners = [], []
    for item in items:
        query = Query(item.id, item.question or item.text)
        chunks = context_chunks(item)
        if item.is_answer:
            tasks.append((query, split_claims(item.text), chunks))
            owners.append((item, "answer", item.text, item.supported))
        claims = item.claims if item.is_answer else (item,)
        for claim in claims:
            tasks.append((query, [Claim(claim.text, ())], chunks))
            owners.append((item, "claim", claim.text, claim.supported))
    verdicts = _run(judge, tasks)
    rows: dict[str, list[tuple]] = {"claim": [], "answer": []}
    for (item, level, text, gold), found in zip(owners, verdicts):
        judged = [(v, verdict_score(v)) for v in found if v.supported is not None]
        flagged = any(not v.supported for v, _ in judged)
        scores = [s for _, s in judged if s is not None]
        score = min(scores) if scores else 1.0
        reason = next((v.reason for v, _ in judged if not v.supported), "")
        overlap = unigram_overlap(text, item.context)
        rows[level].append((item.id, item.group, gold, flagged, score, overlap, reason))
    return {
        level: Scored(
            [r[0] for r in found],
            [r[1] for r in found],
            np.array([r[2] for r in found], bool),
            np.array([r[3] for r in found], bool),
            np.array([r[4] for r in found], float),
            np.array([r[5] for r in found], float),
            [r[6] for r in found],
        )
        for level, found in rows.items()
        if found
    }


def overlap_flags(scored: Scored, calibration: Scored | None, seed: int) -> tuple[np.ndarray, str]:
    """Overlap's flags on ``scored`` and how its threshold was chosen."""
    if calibration is not None and len(calibration.supported):
        cut = best_threshold(calibration.overlap, calibration.supported)
        return scored.overlap < cut, f"threshold {cut:.4f} (max κ on the calibration items)"
    flags = cross_fitted_flags(scored.overlap, scored.supported, scored.groups, seed)
    return flags, "threshold cross-fitted over two seeded folds of these items (max κ)"


def verdict_on_overlap(name: str, row: dict) -> str:
    diff = row.get("auc_minus_overlap")
    if diff is None or np.isnan(diff["value"]):
        return f"judge {name}: no ROC-AUC comparison (one class only)"
    span = f"{diff['value']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}]"
    if diff["value"] <= 0:
        return f"judge {name} does NOT beat unigram overlap: ROC-AUC difference {span}"
    if diff["low"] <= 0:
        return f"judge {name} is not shown to beat unigram overlap: ROC-AUC difference {span}"
    return f"judge {name} beats unigram overlap: ROC-AUC difference {span}"


def meta_evaluate(
    items: Sequence[LabelledItem],
    judge,
    judge_name: str,
    calibration: Sequence[LabelledItem] = (),
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict:
    """The judge and both baselines on every level of the items, with intervals."""
    levels = score_items(items, judge)
    calibrated = score_items(calibration, _NoJudge()) if calibration else {}
    return evaluate_levels(levels, judge_name, len(items), calibrated, resamples, seed)


def evaluate_levels(
    levels: dict[str, Scored],
    judge_name: str,
    n_items: int,
    calibrated: dict[str, Scored] | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict:
    """The meta-evaluation report of items already scored by the judge, by level: the judge
    beside the constant and overlap baselines, with bootstrap intervals over the groups."""
    calibrated = calibrated or {}
    report: dict = {"judge": judge_name, "n_items": n_items, "levels": {}}
    for level, scored in levels.items():
        overlap_flag, how = overlap_flags(scored, calibrated.get(level), seed)
        scorers = {
            judge_name: (scored.flagged, scored.score),
            "overlap": (overlap_flag, scored.overlap),
            "constant": (np.zeros(len(scored.score), bool), np.ones(len(scored.score))),
        }
        table = bootstrap(scorers, scored.supported, scored.groups, resamples, seed)
        report["levels"][level] = {
            "n": int(len(scored.supported)),
            "n_groups": len(set(scored.groups)),
            "scorers": table,
            "overlap_threshold": how,
            "note": verdict_on_overlap(judge_name, table[judge_name]),
        }
    return report


class _NoJudge:
    """Calibration items need only their overlap: every claim is left unjudged."""

    def judge(self, query, claims, context):
        return [Verdict(None, None, (), "") for _ in claims]
