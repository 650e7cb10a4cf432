"""How far a judge can be trusted: its agreement with human claim labels, and a
prediction-powered confidence interval for the faithfulness it measures on a run.

The labelled claims are those of the dataset's ``answers.jsonl``: each recorded answer's claims
with the documents of its ranking that truly support them. The judge sees the same ranking as
context and must say whether each claim is supported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from rag_bench.analysis.meta import Scored, unigram_overlap, verdict_score
from rag_bench.components.base import Capability, Judge
from rag_bench.components.chunking import WholeDocument
from rag_bench.data.dataset import Dataset
from rag_bench.errors import RagBenchError, check_number
from rag_bench.model import Claim, Query


@dataclass(frozen=True)
class Agreement:
    claims: pd.DataFrame  # query_id, claim, gold_supported, judged_supported, grade, score,
    # reason
    judge: str

    def stats(self) -> dict:
        return agreement_stats(
            self.claims["gold_supported"].to_numpy(bool),
            self.claims["judged_supported"].to_numpy(bool),
        )


def labelled_claims(dataset: Dataset) -> list[tuple[Query, list[Claim], list[bool], list]]:
    """For each recorded answer: its query, split claims, gold labels and the context chunks."""
    chunker = WholeDocument()
    out = []
    for query_id, recorded in dataset.answers.items():
        claims = [Claim(c.text, c.citations) for c in recorded.claims if c.supported_by is not None]
        if not claims:
            continue
        gold = [
            bool(set(c.supported_by) & set(recorded.ranking))
            for c in recorded.claims
            if c.supported_by is not None
        ]
        context = [
            chunk
            for d in dict.fromkeys(recorded.ranking)
            for chunk in chunker.chunk(dataset.docs[d])
        ]
        out.append((dataset.queries[query_id], claims, gold, context))
    if not out:
        raise RagBenchError(
            f"dataset {dataset.name!r} has no labelled claims",
            "record answers with claims and supported_by in answers.jsonl",
        )
    return out


def judge_agreement(dataset: Dataset, judge: Judge, analyzer, judge_name: str) -> Agreement:
    """Run ``judge`` over every labelled claim, with the recorded ranking as its context."""
    if Capability.PREPARE in judge.capabilities:
        judge.prepare(dataset, [], analyzer)  # type: ignore[attr-defined]  # PREPARE declares it
    rows = []
    for query, claims, gold, context in labelled_claims(dataset):
        for claim, label, verdict in zip(claims, gold, judge.judge(query, claims, context)):
            if verdict.supported is None:
                continue
            rows.append(
                {
                    "query_id": query.id,
                    "claim": claim.text,
                    "gold_supported": label,
                    "judged_supported": bool(verdict.supported),
                    "grade": verdict.grade,
                    "score": verdict_score(verdict),
                    "reason": verdict.reason,
                }
            )
    return Agreement(pd.DataFrame(rows), judge_name)


def agreement_stats(gold: np.ndarray, judged: np.ndarray) -> dict:
    """Accuracy, precision and recall on the 'unsupported' class, Cohen's kappa, confusion."""
    n = len(gold)
    unsupported_gold, unsupported_judged = ~gold, ~judged
    tp = int(np.sum(unsupported_gold & unsupported_judged))
    confusion = {
        "gold supported, judged supported": int(np.sum(gold & judged)),
        "gold supported, judged unsupported": int(np.sum(gold & unsupported_judged)),
        "gold unsupported, judged supported": int(np.sum(unsupported_gold & judged)),
        "gold unsupported, judged unsupported": tp,
    }
    accuracy = float(np.mean(gold == judged)) if n else float("nan")
    expected = (
        (np.mean(gold) * np.mean(judged) + np.mean(~gold) * np.mean(~judged)) if n else float("nan")
    )
    kappa = (accuracy - expected) / (1 - expected) if n and expected < 1 else float("nan")
    return {
        "n_claims": n,
        "accuracy": accuracy,
        "precision_unsupported": _share(tp, unsupported_judged.sum()),
        "recall_unsupported": _share(tp, unsupported_gold.sum()),
        "kappa": float(kappa),
        "confusion": confusion,
    }


def _share(part: int, whole: int) -> float:
    return part / int(whole) if whole else float("nan")


def ppi_interval(
    run_judged: np.ndarray, gold: np.ndarray, judged: np.ndarray, alpha: float = 0.05
) -> dict:
    """Prediction-powered estimate of the true share of supported claims in a run.

    The judge's rate on the run's (unlabelled) claims is corrected by its average error on the
    labelled claims; the interval adds both sources of variance (Angelopoulos et al., 2023). It
    assumes the labelled claims are like the run's: a judge that errs differently on the run's
    answers than on the labelled ones makes the correction wrong.

    Both variances are taken with z²/2 pseudo-observations spread over the outcomes (the
    Agresti–Coull adjustment of a binomial interval): a judge that agreed with every one of 40
    labels has not been shown to be perfect, and a run judged supported throughout is not
    known to be, so the interval keeps a width that shrinks as the counts grow instead of
    collapsing to a point.
    """
    run_judged = np.asarray(run_judged, dtype=float)
    error = np.asarray(gold, dtype=float) - np.asarray(judged, dtype=float)
    if len(run_judged) < 2 or len(error) < 2:
        raise RagBenchError(
            "too few claims for an interval", "it needs at least two claims on each side"
        )
    z = stats.norm.ppf(1 - alpha / 2)
    estimate = run_judged.mean() + error.mean()
    spread = np.sqrt(_share_variance(run_judged, z) + _error_variance(error, z))
    return {
        "judged": float(run_judged.mean()),
        # a share lies in [0, 1]; so do the estimate and the interval
        "estimate": float(np.clip(estimate, 0.0, 1.0)),
        "low": float(np.clip(estimate - z * spread, 0.0, 1.0)),
        "high": float(np.clip(estimate + z * spread, 0.0, 1.0)),
        "n_run_claims": int(len(run_judged)),
        "n_labelled": int(len(error)),
    }


def _share_variance(outcomes: np.ndarray, z: float) -> float:
    """Variance of the mean of 0/1 outcomes, with z²/2 pseudo-successes and -failures."""
    n = len(outcomes) + z * z
    p = (outcomes.sum() + z * z / 2) / n
    return p * (1 - p) / n


def _error_variance(error: np.ndarray, z: float) -> float:
    """Variance of the mean of judge errors (gold − judged, each −1, 0 or +1), with z²/4
    pseudo-observations added to each kind of disagreement and z²/2 to agreement."""
    n = len(error) + z * z
    up = ((error > 0).sum() + z * z / 4) / n
    down = ((error < 0).sum() + z * z / 4) / n
    return (up + down - (up - down) ** 2) / n


def assess_judge(
    dataset: Dataset,
    judge: str = "lexical",
    overrides: tuple[str, ...] = (),
    run_claims: pd.DataFrame | None = None,
    alpha: float = 0.05,
    resamples: int = 1000,
    seed: int = 0,
    rejudge: bool = True,
) -> dict:
    """Agreement of a judge with the labelled claims, and (``meta``) the meta-evaluation table
    per claim and per answer beside the baselines; with a run's claims (judged by the same
    judge), also the prediction-powered interval of that run's true supported share.

    ``rejudge=False`` builds the meta table from the agreement's own verdicts (each answer's
    labelled claims judged together, with their citations, once) instead of judging every
    answer and every claim alone again: a third of the requests for an LLM judge."""
    from rag_bench.analysis.meta import evaluate_levels, meta_evaluate
    from rag_bench.components.registry import VariantSpec, build, resolve

    check_number("alpha", alpha, 0, 1, open_low=True, open_high=True)
    check_number("resamples", resamples, 1, whole=True)
    resolved = resolve(VariantSpec("judge-agreement", {"judge": {"name": judge}}), overrides)
    built = build("judge", resolved["judge"])
    agreement = judge_agreement(dataset, built, build("analyzer", resolved["analyzer"]), judge)
    report = {"judge": resolved["judge"], "dataset": dataset.name, **agreement.stats()}
    items = dataset_items(dataset)
    if rejudge:
        report["meta"] = meta_evaluate(items, built, judge, (), resamples, seed)
    else:
        levels = agreement_levels(agreement, items)
        report["meta"] = evaluate_levels(levels, judge, len(items), None, resamples, seed)
    if run_claims is not None:
        judged = run_claims.dropna(subset=["supported"])
        used = set(judged["judge"].dropna())
        if used != {judge}:
            raise RagBenchError(
                f"the run's claims were judged by {', '.join(sorted(used)) or 'no judge'}, "
                f"not {judge!r}",
                "pass the --judge the run used",
            )
        report["run"] = ppi_interval(
            judged["supported"].to_numpy(bool),
            agreement.claims["gold_supported"].to_numpy(bool),
            agreement.claims["judged_supported"].to_numpy(bool),
            alpha,
        )
    return report


def agreement_levels(agreement: Agreement, items: list) -> dict[str, Scored]:
    """The agreement's verdicts as scored claims and answers (an answer is flagged when one of
    its judged claims is, scored by its lowest claim), with each text's unigram overlap with
    its context, for :func:`evaluate_levels`."""
    by_id = {item.id: item for item in items}
    claims = agreement.claims
    score = claims["score"].fillna(claims["grade"] / 2).to_numpy(float)
    levels = {
        "claim": Scored(
            list(claims["query_id"]),
            list(claims["query_id"]),
            claims["gold_supported"].to_numpy(bool),
            ~claims["judged_supported"].to_numpy(bool),
            score,
            np.array(
                [
                    unigram_overlap(text, by_id[q].context)
                    for q, text in zip(claims["query_id"], claims["claim"])
                ]
            ),
            list(claims["reason"]),
        )
    }
    answers = list(dict.fromkeys(claims["query_id"]))
    rows = claims.assign(score=score).groupby("query_id", sort=False)
    levels["answer"] = Scored(
        answers,
        answers,
        np.array([by_id[q].supported for q in answers], bool),
        np.array([not rows.get_group(q)["judged_supported"].all() for q in answers], bool),
        np.array([rows.get_group(q)["score"].min() for q in answers], float),
        np.array([unigram_overlap(by_id[q].text, by_id[q].context) for q in answers]),
        ["" for _ in answers],
    )
    return levels


def dataset_items(dataset: Dataset) -> list:
    """The dataset's recorded answers as labelled items: an answer is supported when every
    labelled claim is supported by a document of its ranking, and carries its claims."""
    from rag_bench.data.labels import LabelledClaimText, LabelledItem

    items = []
    for query, claims, gold, context in labelled_claims(dataset):
        items.append(
            LabelledItem(
                id=query.id,
                context=tuple(chunk.text for chunk in context),
                text=dataset.answers[query.id].answer,
                supported=all(gold),
                is_answer=True,
                question=query.text,
                claims=tuple(LabelledClaimText(c.text, g) for c, g in zip(claims, gold)),
                group=query.id,
            )
        )
    return items


def build_judge(judge: str, overrides: tuple[str, ...] = ()):
    """The judge (and its resolved parameters) as a run would build it, prepared with the
    variant's analyzer."""
    from rag_bench.components.registry import VariantSpec, build, resolve

    resolved = resolve(VariantSpec("judge-agreement", {"judge": {"name": judge}}), overrides)
    built = build("judge", resolved["judge"])
    if Capability.PREPARE in built.capabilities:
        if judge == "annotated":
            raise RagBenchError(
                "the annotated judge reads a dataset's own labels, not a labels file",
                "pick another --judge (lexical, calibrated, nli, llm, ...)",
            )
        built.prepare(None, [], build("analyzer", resolved["analyzer"]))
    return built, resolved["judge"]


def assess_labels(
    labels: str,
    judge: str = "lexical",
    overrides: tuple[str, ...] = (),
    calibration: str | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> dict:
    """The meta-evaluation table of a judge on a labels JSONL file (rag_bench.data.labels),
    with the constant and unigram-overlap baselines; ``calibration`` (another labels file)
    chooses overlap's threshold, else it is cross-fitted."""
    from rag_bench.analysis.meta import meta_evaluate
    from rag_bench.data.labels import load_labels

    check_number("resamples", resamples, 1, whole=True)
    items = load_labels(labels)
    calibrating = load_labels(calibration) if calibration else ()
    built, params = build_judge(judge, overrides)
    report = meta_evaluate(items, built, judge, calibrating, resamples, seed)
    return {**report, "judge": params, "labels": str(labels), "describe": _describe(built)}


def _describe(judge) -> str:
    """What the judge says of itself (e.g. which model ran, or that it is the weaker one)."""
    describe = getattr(judge, "describe", None)
    return describe() if callable(describe) else ""


def assess_run_labels(store, run_ref: str, labels: str, resamples: int = 1000, seed: int = 0):
    """The stored judge's agreement with a person's claim labels for one run: the ``claim``
    labels of a review labels file (:mod:`rag_bench.data.review`, e.g. from ``rag-bench pool
    --claims`` and ``rag-bench review``) that name the run, the last label per claim.

    The measures (balanced accuracy, κ, ROC-AUC of the judge's grade, precision and recall of
    "unsupported", with bootstrap intervals over queries) are those of the labelled claims,
    beside the constant baseline (the judge's context is not re-read, so there is no overlap
    baseline). A stratified sample over-represents small strata: ``run_accuracy`` reweights
    each stratum's accuracy by its share of the run's judged claims (the stratified
    estimator), an estimate of the judge's accuracy over the whole run."""
    from rag_bench.analysis.meta import bootstrap
    from rag_bench.analysis.pool import stratum
    from rag_bench.analysis.reads import claim_verdicts
    from rag_bench.data.review import latest_labels, read_labels

    check_number("resamples", resamples, 1, whole=True)
    run_id = store.resolve(run_ref)
    verdicts = claim_verdicts(store.connect([run_id]), run_id)
    mine = [
        label
        for key, label in latest_labels(read_labels(labels)).items()
        if key[0] == "claim" and label["run_id"] == run_id
    ]
    if not mine:
        raise RagBenchError(
            f"{labels} holds no claim labels of run {run_id}",
            f"sample its claims with rag-bench pool --claims {run_id} and label them",
        )
    indexed = verdicts.set_index(["query_id", "claim_id"])
    rows = []
    for label in mine:
        where = (label["query_id"], label["claim_index"])
        if where not in indexed.index:
            raise RagBenchError(
                f"{labels} labels claim {where[1]} of query {where[0]!r}, which run {run_id} lacks",
                "label claims sampled from this run (rag-bench pool --claims)",
            )
        found = indexed.loc[where]
        if pd.isna(found["supported"]):
            continue  # the judge gave no verdict: nothing to agree with
        rows.append(
            {
                "query_id": where[0],
                "supported": label["label"] == "supported",
                "judged": bool(found["supported"]),
                "grade": found["support_grade"],
                "stratum": stratum(bool(found["supported"]), found["failure_class"]),
                "labeller": label["labeller"],
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise RagBenchError(
            f"the claims {labels} labels for run {run_id} have no judge verdict",
            "label claims the run's judge gave a verdict on",
        )
    supported = frame["supported"].to_numpy(bool)
    judged = frame["judged"].to_numpy(bool)
    grades = pd.to_numeric(frame["grade"], errors="coerce").to_numpy(float)
    score = np.where(np.isnan(grades), judged.astype(float), grades / 2)
    n = len(frame)
    scorers = {"judge": (~judged, score), "constant": (np.zeros(n, bool), np.ones(n))}
    table = bootstrap(scorers, supported, frame["query_id"].tolist(), resamples, seed)
    judges = sorted(set(verdicts["judge"].dropna()))
    return {
        "run_id": run_id,
        "judge": ", ".join(judges) or "?",
        "labels": str(labels),
        "labellers": sorted(set(frame["labeller"])),
        "n_claims": n,
        "n_groups": int(frame["query_id"].nunique()),
        "scorers": table,
        **agreement_stats(supported, judged),
        "run_accuracy": _stratified_accuracy(frame, verdicts),
    }


def _stratified_accuracy(frame: pd.DataFrame, verdicts: pd.DataFrame) -> float:
    """Σ over strata of (the stratum's share of the run's judged claims) × (the accuracy on
    its labelled claims), over the strata that have labels (their shares renormalised)."""
    from rag_bench.analysis.pool import stratum

    judged = verdicts[verdicts["supported"].notna()]
    sizes = pd.Series(
        [stratum(bool(s), f) for s, f in zip(judged["supported"], judged["failure_class"])]
    ).value_counts()
    accuracy = (frame["supported"] == frame["judged"]).groupby(frame["stratum"]).mean()
    weights = sizes.reindex(accuracy.index).fillna(0)
    if weights.sum() == 0:
        return float("nan")
    return float((accuracy * weights).sum() / weights.sum())
