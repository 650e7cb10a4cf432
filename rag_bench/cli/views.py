"""Turning library results into the tables the CLI prints (compute, tabulate, render)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rag_bench.cli.render import as_records, render, to_json
from rag_bench.evaluation.retrieval import RankingEvaluation
from rag_bench.evaluation.summary import headline_metrics, slice_means


def evaluation_table(result: RankingEvaluation, per_query: bool) -> pd.DataFrame:
    """Means as metric/value rows; with ``per_query`` one row per query plus an ``all`` row."""
    means = result.means()
    if not per_query:
        return pd.DataFrame({"metric": list(means), "value": list(means.values())})
    wide = result.wide().reset_index()
    wide["query_id"] = wide["query_id"].astype(str)
    total = pd.DataFrame([{"query_id": "all", **means}])
    return pd.concat([wide, total], ignore_index=True)


def evaluation_output(result: RankingEvaluation, fmt: str, per_query: bool = False) -> str:
    if fmt == "json":
        payload: dict = {"n_queries": result.n_queries, "means": result.means()}
        if per_query:
            payload["per_query"] = as_records(result.per_query)
        return to_json(payload)
    text = render(evaluation_table(result, per_query), fmt)
    if fmt == "table":
        text += f"\n\nqueries evaluated: {result.n_queries}"
    return text


def run_summary(results, fmt: str) -> str:
    """One table over runs: per category and variant, n and the headline metrics."""
    frames = []
    for result in results:
        table = result.summary(headline_metrics(result.manifest["ks"]))
        table.insert(1, "variant", result.manifest["variant"])
        frames.append(table)
    summary = pd.concat(frames, ignore_index=True)
    order = {name: i for i, name in enumerate(summary["category"].unique())}
    summary = summary.sort_values(by=["category"], key=lambda c: c.map(order), kind="stable")
    return render(summary.reset_index(drop=True), fmt)


def variants_table(variants: dict) -> pd.DataFrame:
    """One row per variant slot: the component, its resolved parameters, and the origin."""
    rows = []
    for name, (spec, resolved) in variants.items():
        for slot, config in resolved.items():
            params = ", ".join(f"{k}={v}" for k, v in config.items() if k != "name")
            rows.append(
                {
                    "variant": name,
                    "slot": slot,
                    "component": config["name"],
                    "params": params,
                    "origin": spec.origin,
                }
            )
    return pd.DataFrame(rows)


def agreement_output(report: dict, fmt: str) -> str:
    if fmt == "json":
        return to_json(report)
    judge = ", ".join(f"{k}={v}" for k, v in report["judge"].items() if k != "name")
    lines = [
        f"judge {report['judge']['name']} ({judge or 'no parameters'}) on {report['dataset']}: "
        f"{report['n_claims']} labelled claims",
        "",
        render(
            pd.DataFrame(
                {
                    "measure": [
                        "accuracy",
                        "cohen_kappa",
                        "precision_unsupported",
                        "recall_unsupported",
                    ],
                    "value": [
                        report["accuracy"],
                        report["kappa"],
                        report["precision_unsupported"],
                        report["recall_unsupported"],
                    ],
                }
            ),
            "table",
        ),
        "",
        render(
            pd.DataFrame([{"": k, "claims": v} for k, v in report["confusion"].items()]), "table"
        ),
    ]
    if "run" in report:
        r = report["run"]
        lines += [
            "",
            f"run: judged supported share {r['judged']:.4f} over {r['n_run_claims']} claims; "
            f"prediction-powered estimate {r['estimate']:.4f} [{r['low']:.4f}, {r['high']:.4f}]",
        ]
    return "\n".join(lines)


def runs_table(store, variant: str | None = None) -> pd.DataFrame:
    """One row per run: id, variant, dataset, when, how long, status, headline means."""
    runs = store.runs_frame()
    if variant:
        runs = runs[runs["variant"] == variant]
    headline = ["recall@10", "ndcg@10", "faithfulness"]
    if not runs.empty:
        means = (
            store.connect()
            .sql(
                "SELECT run_id, metric, avg(value) AS mean FROM metrics "
                f"WHERE metric IN ({', '.join(repr(m) for m in headline)}) GROUP BY ALL"
            )
            .df()
        )
        wide = means.pivot(index="run_id", columns="metric", values="mean")
        runs = runs.join(wide.reindex(columns=headline), on="run_id")
    else:
        runs = runs.assign(**{m: [] for m in headline})
    columns = [
        "run_id",
        "variant",
        "dataset",
        "n_queries",
        "created_at",
        "duration_s",
        "status",
        *headline,
    ]
    table = runs[columns].copy()
    broken = pd.DataFrame(
        [{"run_id": r, "status": f"unreadable: {why.message}"} for r, why in store.broken.items()]
    )
    if len(broken):
        table = pd.concat([table, broken], ignore_index=True)
    return table.reset_index(drop=True).astype({"n_queries": "Int64"})


def _slices(metrics: pd.DataFrame, queries: pd.DataFrame, slice_by: str) -> pd.DataFrame:
    if slice_by == "category":
        return metrics
    labels = queries[["query_id", slice_by]]
    if slice_by == "tag":
        labels = queries[["query_id", "tags"]].explode("tags").rename(columns={"tags": "tag"})
        labels["tag"] = labels["tag"].fillna("untagged")
    return metrics.drop(columns=["category"]).merge(labels, on="query_id")


def show_output(store, run, slice_by: str, metrics, fmt: str) -> str:
    from rag_bench.runs.store import read_table

    frame = read_table(run.path, "metrics")
    queries = read_table(run.path, "queries")
    names = metrics or headline_metrics(run.manifest.get("ks", [10]))
    known = set(frame["metric"])
    for name in names:
        if name not in known:
            from rag_bench.errors import UnknownNameError

            raise UnknownNameError("metric of this run", name, sorted(known))
    table = slice_means(_slices(frame, queries, slice_by), names, slice_by)
    if fmt == "json":
        return to_json({"manifest": run.manifest, "slices": as_records(table)})
    m = run.manifest
    params = "; ".join(
        f"{slot}={c['name']}" + "".join(f" {k}={v}" for k, v in c.items() if k != "name")
        for slot, c in m.get("params", {}).items()
    )
    head = [
        f"run       {m['run_id']}",
        f"variant   {m.get('variant')} ({m.get('variant_origin')})",
        f"dataset   {m['dataset']['name']} ({m['dataset']['n_queries']} queries, "
        f"sha256 {m['dataset']['sha256'][:12]})",
        f"created   {m.get('created_at')}, {m.get('duration_s')} s, {m.get('status')}",
        f"params    {params}",
        *_training_line(m),
        "",
    ]
    return (
        "\n".join(head) + render(table, fmt) if fmt in ("table", "markdown") else render(table, fmt)
    )


def _training_line(manifest: dict) -> list[str]:
    """Where a learning reranker's labels came from: a reader must see when a reranker was
    cross-fitted on the very queries it is scored on."""
    training = manifest.get("reranker_training")
    if not training:
        return []
    if "split" in training:
        return [f"reranker  learnt from split {training['split']} ({training['queries']} queries)"]
    return [f"reranker  {training['labels']} ({training['folds']} folds)"]


def comparison_output(result, fmt: str) -> str:
    rows = result.rows
    if fmt == "json":
        return to_json(as_records(rows))
    if fmt == "csv":
        return render(rows, fmt)
    shown = rows.drop(columns=["run_a"]).copy()
    shown["sig"] = np.where(shown["significant"], "*", "")
    shown = shown.drop(columns=["significant"])
    pairs = ", ".join(f"{run}: {n} queries paired" for run, n in result.n_paired.items())
    head = (
        f"baseline {rows['run_a'].iloc[0]}; {pairs}; {result.test} test, "
        f"Holm-adjusted, * = p_adjusted < {result.alpha}"
    )
    return head + "\n\n" + render(shown, fmt)
