"""The CI gate: does a candidate run worsen any metric by more than its allowance?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.analysis import GATE_RULES, shown
from rag_bench.analysis.compare import compare
from rag_bench.analysis.pairing import TIE, Pair
from rag_bench.analysis.qrels_check import qrels_differ
from rag_bench.errors import UnknownNameError, UsageError, check_number
from rag_bench.evaluation.measures import canonical, improvement
from rag_bench.evaluation.stats import minimum_detectable_effect, queries_needed
from rag_bench.runs import RunStore, open_runs


@dataclass(frozen=True)
class GateResult:
    passed: bool
    rows: pd.DataFrame  # metric, mean_a, mean_b, delta, allowed_drop, p_adjusted, n, mde, rule, ...
    warnings: list[str]

    def _view(self) -> tuple[str, pd.DataFrame, list[str]]:
        title = shown.gate_title(self.passed, self.rows)
        return title, self.rows.drop(columns=["reason"]), shown.gate_notes(self.rows, self.warnings)

    def __repr__(self) -> str:
        return shown.text_view(*self._view())

    def _repr_html_(self) -> str:
        return shown.html_view(*self._view())


def parse_drops(specs: Sequence[str]) -> dict[str, float]:
    """``["recall@10=0.02", …]`` as ``{metric: allowed drop}``, metric names made canonical."""
    drops = {}
    for spec in specs:
        metric, sep, amount = spec.partition("=")
        try:
            value = float(amount)
        except ValueError:
            value = None
        if not sep or not metric.strip() or value is None:
            raise UsageError(
                f"--max-drop {spec!r} is not metric=amount (a number >= 0)",
                "e.g. --max-drop recall@10=0.02",
            )
        drops[canonical(metric)] = value
    if not drops:
        raise UsageError("the gate needs at least one --max-drop", "e.g. --max-drop recall@10=0.02")
    return drops


def _allowances(max_drops: Mapping[str, float]) -> dict[str, float]:
    """The allowances under canonical names, each a finite number ≥ 0."""
    out = {}
    for metric, allowed in max_drops.items():
        out[canonical(metric)] = float(check_number("max_drops", allowed, 0, key=metric))
    if not out:
        raise UsageError("the gate needs at least one allowed drop", "e.g. recall@10=0.02")
    return out


def gate(
    runs_dir: str | Path | RunStore | None,
    candidate: str,
    baseline: str,
    max_drops: Mapping[str, float],
    *,
    test: str = "randomization",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
    require: str = "auto",
) -> GateResult:
    """Fail when a metric worsens by more than its allowance, and (``require``):

    - ``significant``: only when the worsening is also significant (Holm over the gated
      metrics: they are the confirmatory family, named before the runs are read, as
      compare's ``primary``) — a noisy tier cannot fail the gate by chance, but a tier too
      small to detect the allowance can never fail it;
    - ``drop``: on the observed worsening alone;
    - ``auto`` (default): per metric, ``significant`` when the compared queries can detect the
      allowed drop (its minimum detectable effect at 80 % power, at the strictest Holm level,
      is within the allowance), ``drop`` otherwise; such a metric gets a warning naming the
      detectable effect and the queries needed.

    Worse is read from the metric catalogue: lower, except for the metrics where lower is better
    (``over_refusal``, ``answered_unanswerable``), where a rise is the regression.

    When either run has repeats (``run --repeats``), a metric whose change lies within the
    noise, ``|delta| <= 1.96 × the delta's standard error from the repeats alone`` (the queries
    held fixed; :func:`~rag_bench.evaluation.stats.repeat_noise_se`), is ``unstable``: neither
    passed nor failed, with a warning; it does not fail the gate (``passed`` is False only when
    a metric failed), since the change is no evidence either way.
    """
    if require not in GATE_RULES:
        raise UnknownNameError("gate rule", require, list(GATE_RULES))
    allowances = _allowances(max_drops)
    result = compare(
        runs_dir,
        [baseline, candidate],
        slice_by=None,
        metrics=list(allowances),
        test=test,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
        primary=list(allowances),  # the gated metrics, declared in advance: one family
    )
    strictest = alpha / len(allowances)  # Holm's first, strictest level
    store = open_runs(runs_dir)
    rows, warnings = [], qrels_differ([store.get(baseline), store.get(candidate)])
    for (_, row), pair in zip(result.rows.iterrows(), result.pairs):
        metric, allowed = row["metric"], allowances[row["metric"]]
        mde = minimum_detectable_effect(pair.differences, strictest)
        detectable = bool(np.isfinite(mde) and mde <= allowed)
        rule = require if require != "auto" else ("significant" if detectable else "drop")
        if not detectable:
            warnings.append(_power_warning(pair, mde, allowed, strictest, rule))
        drop = -improvement(metric, row["delta"])
        significant = bool(row["p_adjusted"] < alpha)
        failed = drop > allowed and (rule == "drop" or significant)
        noise = NOISE_Z * pair.noise_se
        verdict = "fail" if failed else "pass"
        if noise > 0 and abs(row["delta"]) <= noise:
            verdict = "unstable"
            warnings.append(_noise_warning(metric, row["delta"], noise))
        rows.append(
            {
                "metric": metric,
                "mean_a": row["mean_a"],
                "mean_b": row["mean_b"],
                "delta": row["delta"],
                "allowed_drop": allowed,
                "p_value": row["p_value"],
                "p_adjusted": row["p_adjusted"],
                "n": row["n"],
                "mde": mde,
                "rule": rule,
                "noise": noise,
                "verdict": verdict,
                "reason": _gate_reason(drop, allowed, significant, row["p_adjusted"], rule),
            }
        )
    table = pd.DataFrame(rows)
    return GateResult(bool((table["verdict"] != "fail").all()), table, warnings)


NOISE_Z = 1.96  # the noise band: ± this many standard errors of the delta from repeats alone


def _noise_warning(metric: str, delta: float, noise: float) -> str:
    return (
        f"{metric}: unstable, the change {delta:+.4f} lies within the run-to-run noise "
        f"(±{noise:.4f} from the repeats); it neither passes nor fails: more repeats or "
        "queries, or a lower temperature, would tell"
    )


def _gate_reason(drop: float, allowed: float, significant: bool, p_adj: float, rule: str) -> str:
    if drop < -TIE:
        return f"improved by {-drop:.4f}"
    if drop <= TIE:
        return "unchanged"
    if drop <= allowed:
        return f"worsened by {drop:.4f}, within the allowed {allowed:g}"
    if rule == "drop":
        return f"worsened by {drop:.4f} > {allowed:g} (failing on the drop: see the warning)"
    if significant:
        return f"worsened by {drop:.4f} > {allowed:g}, significant (p_adj {p_adj:.4f})"
    return f"worsened by {drop:.4f} > {allowed:g} but not significant (p_adj {p_adj:.4f})"


def _power_warning(pair: Pair, mde: float, allowed: float, alpha: float, rule: str) -> str:
    """Why a metric's queries cannot detect its allowance at ``alpha`` (the strictest level)."""
    n = len(pair.a)
    if np.isfinite(mde) and allowed > 0:
        needed = queries_needed(pair.differences, allowed, alpha)
        size = f"detect a change of {mde:.4f} at 80 % power, not {allowed:g} (~{needed} would)"
    else:
        size = f"cannot detect a drop of {allowed:g}"
    then = (
        "the gate fails on the observed drop alone"
        if rule == "drop"
        else "a drop of that size cannot fail the gate"
    )
    return f"{pair.metric}: {n} paired queries {size}; {then}"
