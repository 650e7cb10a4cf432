"""Comparing stored runs: paired statistics per slice, per-query diffs, and the CI gate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rag_bench.analysis import SLICES
from rag_bench.errors import RagBenchError, UnknownNameError, UsageError, check_number
from rag_bench.evaluation.measures import (
    canonical,
    canonical_names,
    headline_metrics,
    improvement,
    not_stored,
)
from rag_bench.evaluation.stats import (
    MAX_RESAMPLES,
    TESTS,
    bootstrap_cis,
    holm,
    minimum_detectable_effect,
    paired_p_values,
    queries_needed,
)
from rag_bench.evaluation.summary import slice_order
from rag_bench.runs import RunStore, StoredRun, open_runs

TIE = 1e-12


@dataclass(frozen=True)
class Comparison:
    """One row per (compared run, slice, metric); ``n_paired`` queries per compared run."""

    rows: pd.DataFrame
    n_paired: dict[str, int]
    test: str
    alpha: float
    # metrics with one value in every query of every compared run: nothing to compare
    constant: dict[str, float] = field(default_factory=dict)


def _runs(store: RunStore, refs: Sequence[str], allow_mismatch: bool) -> list[StoredRun]:
    if len(refs) < 2:
        raise UsageError(
            "compare needs at least two runs",
            "e.g. rag-bench compare latest:baseline latest:hybrid",
        )
    runs = [store.get(ref) for ref in refs]
    ids = [r.run_id for r in runs]
    if len(set(ids)) < len(ids):
        raise UsageError(
            f"run {ids[0] if ids.count(ids[0]) > 1 else ids[1]} is compared with itself",
            "name two different runs",
        )
    if not allow_mismatch:
        same_dataset(runs)
    return runs


def same_dataset(runs: Sequence[StoredRun]) -> None:
    """Refuse runs made on different datasets: pairing their query ids would compare unrelated
    queries (or none at all) without a word."""
    if len({r.dataset_sha256 for r in runs}) > 1:
        names = ", ".join(f"{r.run_id} ({r.manifest.get('dataset', {}).get('name')})" for r in runs)
        raise RagBenchError(
            f"the runs were made on different datasets: {names}",
            "pass --allow-mismatch to pair the shared query ids anyway",
        )


def _load(
    store: RunStore, runs: list[StoredRun], metrics: Sequence[str] | None
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    con = store.connect(runs)
    available = [
        r[0] for r in con.sql("SELECT DISTINCT metric FROM metrics ORDER BY metric").fetchall()
    ]
    chosen = canonical_names(metrics) if metrics else headline_metrics()
    chosen = chosen if metrics else [m for m in chosen if m in available]
    for metric in chosen:
        if metric not in available:
            raise not_stored("metric in these runs", metric, available)
    listing = ", ".join("'" + m.replace("'", "''") + "'" for m in chosen)
    values = con.sql(
        f"SELECT run_id, query_id, metric, value FROM metrics WHERE metric IN ({listing})"
    ).df()
    queries = con.sql("SELECT run_id, query_id, category, tags, failure_class FROM queries").df()
    return values, queries, chosen


def constant_metrics(values: pd.DataFrame) -> dict[str, float]:
    """Metrics whose defined values are one number throughout (faithfulness 1.0 in every query
    of every run), with that number."""
    defined = values.dropna(subset=["value"])
    spread = defined.groupby("metric")["value"].agg(["min", "max"])
    same = spread[spread["min"] == spread["max"]]
    return {str(metric): float(value) for metric, value in same["min"].items()}


def query_slices(
    queries: pd.DataFrame, baseline: str, slice_by: str | None
) -> dict[str, list[str]]:
    """Each query's slices, read from the baseline run (a query may sit in several tag slices)."""
    rows = queries[queries["run_id"] == baseline]
    if slice_by is None:
        return {}
    if slice_by not in SLICES:
        raise UnknownNameError("slice", slice_by, SLICES)
    if slice_by == "tag":
        return {
            q: (list(t) if t is not None and len(t) else ["untagged"])
            for q, t in zip(rows["query_id"], rows["tags"])
        }
    return {q: [str(v)] for q, v in zip(rows["query_id"], rows[slice_by])}


def _statistics(
    pairs: list[tuple[np.ndarray, np.ndarray]],
    metrics: list[str],
    test: str,
    resamples: int,
    seed: int,
) -> list[dict]:
    """Means, delta, bootstrap interval, p-value and wins/ties/losses of each (a, b) pair of
    value arrays of ``metrics``; computed together, so the resamples of pairs with as many
    queries are drawn once (the numbers are those of one pair at a time)."""
    ds = [b - a for a, b in pairs]
    intervals = bootstrap_cis(ds, resamples=resamples, seed=seed)
    p_values = paired_p_values(ds, test, resamples, seed)
    return [
        _row(d, a, b, *ci, p, improvement(m, d))
        for d, (a, b), ci, p, m in zip(ds, pairs, intervals, p_values, metrics)
    ]


def _row(d, a, b, low: float, high: float, p: float, gain: np.ndarray) -> dict:
    """One pair's numbers; ``gain`` is ``d`` turned so that positive is better (a win)."""
    return {
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "delta": float(d.mean()),
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
        "wins": int(np.sum(gain > TIE)),
        "ties": int(np.sum(np.abs(d) <= TIE)),
        "losses": int(np.sum(gain < -TIE)),
        "n": len(d),
    }


def compare(
    runs_dir: str | Path | RunStore | None,
    refs: Sequence[str],
    *,
    slice_by: str | None = "category",
    metrics: Sequence[str] | None = None,
    test: str = "randomization",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
    allow_mismatch: bool = False,
    mde: float | None = None,
) -> Comparison:
    """Compare every run after the first with the first, paired over their shared queries.

    Each row also gives ``mde``, the smallest delta its test detects with 80 % power at
    ``alpha`` for the paired n and the observed spread of the differences; with ``mde`` (a
    delta to plan for), ``n_needed`` is how many such queries would detect it.

    Per slice (plus ``all``) and metric: both means, the delta (b − a), a 95% bootstrap
    interval of the delta, the paired test's p-value, Holm–Bonferroni across the whole table,
    and wins / ties / losses (a win is a change for the better, which for a lower-is-better
    metric is a fall). A metric undefined for a query (NULL) leaves that query out.
    ``runs_dir`` is the runs folder (a path, URL or :class:`RunStore`; None: the default).
    """
    if test not in TESTS:
        raise UnknownNameError("test", test, list(TESTS))
    check_number("alpha", alpha, 0, 1, open_low=True, open_high=True)
    check_number("resamples", resamples, 1, MAX_RESAMPLES, whole=True)
    check_number("seed", seed, 0, whole=True)
    if mde is not None:
        check_number("mde", mde, 0, open_low=True)
    store = open_runs(runs_dir)
    runs = _runs(store, refs, allow_mismatch)
    values, queries, chosen = _load(store, runs, metrics)
    base = runs[0]
    labels = query_slices(queries, base.run_id, slice_by)
    wide = values.pivot_table(
        index=["metric", "query_id"], columns="run_id", values="value", aggfunc="first"
    )
    keys, compared, n_paired = [], [], {}
    for other in runs[1:]:
        shared = set(queries.loc[queries["run_id"] == base.run_id, "query_id"]) & set(
            queries.loc[queries["run_id"] == other.run_id, "query_id"]
        )
        n_paired[other.run_id] = len(shared)
        slices = ["all", *slice_order({s for q in shared for s in labels.get(q, [])})]
        for metric in chosen:
            pairs = (
                wide.loc[metric, [base.run_id, other.run_id]].dropna()
                if metric in wide.index
                else pd.DataFrame()
            )
            pairs = pairs[pairs.index.isin(shared)]
            for name in slices:
                chosen_rows = (
                    pairs
                    if name == "all"
                    else pairs[[name in labels.get(q, []) for q in pairs.index]]
                )
                if chosen_rows.empty:
                    continue
                keys.append(
                    {"slice": name, "metric": metric, "run_a": base.run_id, "run_b": other.run_id}
                )
                compared.append(
                    (chosen_rows[base.run_id].to_numpy(), chosen_rows[other.run_id].to_numpy())
                )
    stats = _statistics(compared, [key["metric"] for key in keys], test, resamples, seed)
    table = pd.DataFrame([key | row for key, row in zip(keys, stats)])
    if table.empty:
        raise RagBenchError(
            "the runs share no query with a defined value",
            "check that they ran on the same queries",
        )
    table.insert(
        table.columns.get_loc("p_value") + 1, "p_adjusted", holm(table["p_value"].to_numpy())
    )
    table["significant"] = table["p_adjusted"] < alpha
    table["mde"] = [minimum_detectable_effect(b - a, alpha) for a, b in compared]
    columns = [
        "slice",
        "metric",
        "run_a",
        "run_b",
        "mean_a",
        "mean_b",
        "delta",
        "ci_low",
        "ci_high",
        "p_value",
        "p_adjusted",
        "wins",
        "ties",
        "losses",
        "n",
        "mde",
        "significant",
    ]
    if mde is not None:
        table["n_needed"] = [queries_needed(b - a, mde, alpha) for a, b in compared]
        columns.append("n_needed")
    return Comparison(table[columns], n_paired, test, alpha, constant_metrics(values))


# --- the CI gate ---------------------------------------------------------------------------


REQUIRE = ("auto", "significant", "drop")


@dataclass(frozen=True)
class GateResult:
    passed: bool
    rows: pd.DataFrame  # metric, mean_a, mean_b, delta, allowed_drop, p_adjusted, n, mde, rule, ...
    warnings: list[str]


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
      metrics) — a noisy tier cannot fail the gate by chance, but a tier too small to detect
      the allowance can never fail it;
    - ``drop``: on the observed worsening alone;
    - ``auto`` (default): per metric, ``significant`` when the compared queries can detect the
      allowed drop (its minimum detectable effect at 80 % power, at the strictest Holm level,
      is within the allowance), ``drop`` otherwise; such a metric gets a warning naming the
      detectable effect and the queries needed.

    Worse is read from the metric catalogue: lower, except for the metrics where lower is better
    (``over_refusal``, ``answered_unanswerable``), where a rise is the regression.
    """
    if require not in REQUIRE:
        raise UnknownNameError("gate rule", require, list(REQUIRE))
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
    )
    strictest = _z_power(alpha / len(allowances)) / _z_power(alpha)
    rows, warnings = [], []
    for _, row in result.rows.iterrows():
        metric, allowed = row["metric"], allowances[row["metric"]]
        mde = row["mde"] * strictest
        detectable = bool(np.isfinite(mde) and mde <= allowed)
        rule = require if require != "auto" else ("significant" if detectable else "drop")
        if not detectable:
            warnings.append(_power_warning(metric, row, mde, allowed, strictest, rule))
        drop = -improvement(metric, row["delta"])
        significant = bool(row["p_adjusted"] < alpha)
        failed = drop > allowed and (rule == "drop" or significant)
        rows.append(
            {
                "metric": metric,
                "mean_a": row["mean_a"],
                "mean_b": row["mean_b"],
                "delta": row["delta"],
                "allowed_drop": allowed,
                "p_adjusted": row["p_adjusted"],
                "n": row["n"],
                "mde": mde,
                "rule": rule,
                "verdict": "fail" if failed else "pass",
                "reason": _gate_reason(drop, allowed, significant, row["p_adjusted"], rule),
            }
        )
    table = pd.DataFrame(rows)
    return GateResult(bool((table["verdict"] == "pass").all()), table, warnings)


def _z_power(alpha: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1 - alpha / 2) + norm.ppf(0.8))


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


def _power_warning(metric, row, mde: float, allowed: float, strictest: float, rule: str) -> str:
    n = int(row["n"])
    if np.isfinite(mde) and allowed > 0:
        spread = row["mde"] * np.sqrt(n) / _z_power(0.05) if n > 1 else float("nan")
        needed = int(np.ceil((_z_power(0.05) * strictest * spread / allowed) ** 2))
        size = f"detect a change of {mde:.4f} at 80 % power, not {allowed:g} (~{needed} would)"
    else:
        size = f"cannot detect a drop of {allowed:g}"
    then = (
        "the gate fails on the observed drop alone"
        if rule == "drop"
        else "a drop of that size cannot fail the gate"
    )
    return f"{metric}: {n} paired queries {size}; {then}"


# --- per-query diff -----------------------------------------------------------------------


def previous_run(store: RunStore, run: StoredRun) -> StoredRun:
    """The latest earlier run of the same variant on the same dataset."""
    created = (run.manifest.get("created_at", ""), run.run_id)
    earlier = [
        r
        for r in store.list()
        if r.variant == run.variant
        and r.dataset_sha256 == run.dataset_sha256
        and (r.manifest.get("created_at", ""), r.run_id) < created
    ]
    if not earlier:
        raise RagBenchError(
            f"no earlier run of {run.variant!r} on this dataset before {run.run_id}",
            "name one with --against RUN",
        )
    return max(earlier, key=lambda r: (r.manifest.get("created_at", ""), r.run_id))


def metric_cutoff(metric: str) -> int:
    _, _, k = metric.partition("@")
    return int(k) if k.isdigit() else 10


def _relevant_top(con, run_id: str, k: int) -> dict[str, dict[str, int]]:
    rows = con.execute(
        "SELECT query_id, doc_id, rank FROM retrieved WHERE run_id = ? AND stage = 'documents' "
        "AND relevance >= 1 AND rank <= ?",
        [run_id, k],
    ).fetchall()
    out: dict[str, dict[str, int]] = {}
    for query_id, doc_id, rank in rows:
        out.setdefault(query_id, {})[doc_id] = rank
    return out


def diff(
    runs_dir: str | Path | RunStore | None,
    ref: str,
    against: str = "previous",
    metric: str = "ndcg@10",
    top: int = 20,
    allow_mismatch: bool = False,
) -> pd.DataFrame:
    """The queries that got worse and better on ``metric`` (worse: lower, or higher for a
    lower-is-better metric), with what changed in between (relevant documents that entered,
    left or moved in the top k; the failure class; the two answers); runs made on different
    datasets only with ``allow_mismatch`` (then over their shared query ids)."""
    metric = canonical(metric)
    check_number("top", top, 1, whole=True)
    store = open_runs(runs_dir)
    new = store.get(ref)
    old = previous_run(store, new) if against == "previous" else store.get(against)
    if old.run_id == new.run_id:
        raise UsageError(
            f"run {new.run_id} is compared with itself", "name another run with --against"
        )
    if not allow_mismatch:
        same_dataset([old, new])
    con = store.connect([old, new])
    available = [r[0] for r in con.sql("SELECT DISTINCT metric FROM metrics ORDER BY 1").fetchall()]
    if metric not in available:
        raise not_stored("metric in these runs", metric, available)
    frame = con.execute(
        "SELECT o.query_id, q.category, o.value AS before, n.value AS after, "
        "n.value - o.value AS delta, "
        "qo.failure_class AS failure_before, q.failure_class AS failure_after, "
        "qo.answer AS answer_before, q.answer AS answer_after "
        "FROM metrics o JOIN metrics n ON o.query_id = n.query_id AND o.metric = n.metric "
        "JOIN queries q ON q.run_id = n.run_id AND q.query_id = n.query_id "
        "JOIN queries qo ON qo.run_id = o.run_id AND qo.query_id = o.query_id "
        "WHERE o.run_id = ? AND n.run_id = ? AND o.metric = ? "
        "AND o.value IS NOT NULL AND n.value IS NOT NULL",
        [old.run_id, new.run_id, metric],
    ).df()
    k = metric_cutoff(metric)
    before, after = _relevant_top(con, old.run_id, k), _relevant_top(con, new.run_id, k)
    frame["_gain"] = improvement(metric, frame["delta"])
    worse = (
        frame[frame["_gain"] < -TIE]
        .sort_values(["_gain", "query_id"])
        .head(top)
        .assign(change="worse")
    )
    better = (
        frame[frame["_gain"] > TIE]
        .sort_values(["_gain", "query_id"], ascending=[False, True])
        .head(top)
        .assign(change="better")
    )
    listed = pd.concat([worse, better], ignore_index=True)
    listed["entered"] = [_moves(after.get(q, {}), before.get(q, {})) for q in listed["query_id"]]
    listed["left"] = [_moves(before.get(q, {}), after.get(q, {})) for q in listed["query_id"]]
    listed["moved"] = [
        _rank_changes(before.get(q, {}), after.get(q, {})) for q in listed["query_id"]
    ]
    listed.insert(0, "run", new.run_id)
    listed.insert(1, "against", old.run_id)
    columns = [
        "run",
        "against",
        "change",
        "query_id",
        "category",
        "before",
        "after",
        "delta",
        "entered",
        "left",
        "moved",
        "failure_before",
        "failure_after",
        "answer_before",
        "answer_after",
    ]
    return listed[columns]


def _rank_changes(before: dict[str, int], after: dict[str, int]) -> str:
    """Relevant documents in the top k of both runs whose rank changed, as ``doc 3→1``."""
    moved = [(d, before[d], after[d]) for d in before if d in after and before[d] != after[d]]
    return " ".join(f"{d} {a}→{b}" for d, a, b in sorted(moved, key=lambda x: x[2]))


def _moves(here: dict[str, int], there: dict[str, int]) -> str:
    """Relevant documents in the top k here but not there, as ``doc@rank``."""
    return " ".join(
        f"{d}@{r}" for d, r in sorted(here.items(), key=lambda x: x[1]) if d not in there
    )
