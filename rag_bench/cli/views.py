"""Turning library results into the tables the CLI prints (compute, tabulate, render)."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from rag_bench.cli.render import as_records, fit_line, render, to_json
from rag_bench.evaluation.measures import canonical_names, headline_metrics, not_stored
from rag_bench.evaluation.retrieval import RankingEvaluation
from rag_bench.evaluation.summary import slice_means


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
        payload: dict = {
            "n_queries": result.n_queries,
            "n_without_relevant": result.n_without_relevant,
            "means": result.means(),
        }
        if per_query:
            payload["per_query"] = as_records(result.per_query)
        return to_json(payload)
    text = render(evaluation_table(result, per_query), fmt)
    if fmt in ("table", "markdown"):
        text += f"\n\nqueries evaluated: {result.n_queries}"
        note = result.convention_note()
        text += f"\n{fit_line(note)}" if note else ""
    return text


def moved_columns(values: pd.DataFrame, runs, metrics) -> dict[str, str]:
    """The metric columns that moved (metric → why, the most moved first) between the runs a
    table shows (``runs``: (run id, dataset) in the order shown), each against the first run
    shown on its dataset; see :mod:`rag_bench.analysis.moved`."""
    from rag_bench.analysis.moved import first_on_each_dataset, moved_metrics

    found = moved_metrics(values, first_on_each_dataset(runs), metrics)
    return {m.metric: m.why for m in found}


def run_summary(results, fmt: str) -> str:
    """One table over runs: per category and variant, n and the headline metrics; on a narrow
    terminal the metrics that moved between the variants (against the first) are kept first."""
    frames = []
    metrics: list[str] = []
    for result in results:
        names = headline_metrics(result.manifest["ks"])
        metrics += [m for m in names if m not in metrics]
        table = result.summary(names)
        table.insert(1, "variant", result.manifest["variant"])
        frames.append(table)
    summary = pd.concat(frames, ignore_index=True)
    order = {name: i for i, name in enumerate(summary["category"].unique())}
    summary = summary.sort_values(by=["category"], key=lambda c: c.map(order), kind="stable")
    moved = None
    if fmt == "table" and len(results) > 1:
        values = pd.concat([r.metrics for r in results], ignore_index=True)
        runs = [(r.run_id, r.manifest["dataset"]["sha256"]) for r in results]
        moved = moved_columns(values, runs, metrics)
    return render(summary.reset_index(drop=True), fmt, metrics=metrics, moved=moved)


def variants_table(variants: dict) -> pd.DataFrame:
    """One row per variant slot: the component, its resolved parameters (a dict), the variant's
    origin and its one-line description (empty when it declares none)."""
    rows = []
    for name, (spec, resolved) in variants.items():
        for slot, config in resolved.items():
            params = {k: v for k, v in config.items() if k != "name"}
            rows.append(
                {
                    "variant": name,
                    "slot": slot,
                    "component": config["name"],
                    "params": params,
                    "origin": spec.origin,
                    "description": spec.description,
                }
            )
    return pd.DataFrame(rows)


def variants_output(table: pd.DataFrame, fmt: str) -> str:
    """json: every row, each slot's parameters as an object (as ``components`` gives them);
    csv: every row, parameters as ``k=v, ...``. As text (table, markdown), the variants with
    their description and origin once each, then their slots."""
    if fmt == "json":
        plain = [{k: _plain(v) for k, v in ps.items()} for ps in table["params"]]
        return to_json(as_records(table.assign(params=plain)))
    table = table.assign(
        params=[", ".join(f"{k}={v}" for k, v in ps.items()) for ps in table["params"]]
    )
    if fmt == "csv":
        return render(table, fmt)
    about = table.drop_duplicates("variant")[["variant", "description", "origin"]]
    slots = table.drop(columns=["origin", "description"])
    return render(about, fmt, wrap=("description",)) + "\n\n" + render(slots, fmt, wrap=("params",))


def components_output(table: pd.DataFrame, fmt: str) -> str:
    """The component catalogue: json keeps each parameter's name, type and default apart; as
    text each parameter reads as in a signature (``k1: float = 1.5``), one a line in a table,
    where the ``pip install`` an optional backend needs follows the description."""
    if fmt == "json":
        plain = [[{**p, "default": _plain(p["default"])} for p in ps] for ps in table["params"]]
        return to_json(as_records(table.assign(params=plain)))
    joiner = "\n" if fmt == "table" else "; "
    signatures = [
        joiner.join(f"{p['name']}: {p['type']} = {p['default']!r}" for p in ps)
        for ps in table["params"]
    ]
    text = table.assign(params=signatures)
    if fmt != "table":
        return render(text, fmt)
    needs = [f"\nneeds: {r}" if isinstance(r, str) else "" for r in text["requires"]]
    text = text.assign(description=text["description"] + needs).drop(columns=["requires"])
    return render(text, fmt, wrap=("params", "description"))


def _plain(value: object) -> object:
    """A parameter's default as JSON holds it: scalars and sequences as they are, anything
    else by its repr."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return repr(value)


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
    if "meta" in report:
        lines += meta_levels(report["meta"]["levels"])
    if "run" in report:
        r = report["run"]
        lines += [
            "",
            f"run: judged supported share {r['judged']:.4f} over {r['n_run_claims']} claims; "
            f"prediction-powered estimate {r['estimate']:.4f} [{r['low']:.4f}, {r['high']:.4f}]",
        ]
    return "\n".join(lines)


def meta_table(level: dict) -> pd.DataFrame:
    """One row per measure, one column per scorer (the judge, overlap, constant): value
    [low, high]."""
    from rag_bench.analysis.meta import MEASURES

    def cell(found: dict) -> str:
        if np.isnan(found["value"]):
            return "n/a"
        return f"{found['value']:.3f} [{found['low']:.3f}, {found['high']:.3f}]"

    columns = {"measure": list(MEASURES)}
    for scorer, measures in level["scorers"].items():
        columns[scorer] = [cell(measures[m]) for m in MEASURES]
    return pd.DataFrame(columns)


def run_labels_output(report: dict, fmt: str) -> str:
    """The stored judge of a run against a person's claim labels (rag-bench review)."""
    if fmt == "json":
        return to_json(report)
    return "\n".join(
        [
            f"judge {report['judge']} of run {report['run_id']} against {report['labels']}: "
            f"{report['n_claims']} labelled claims of {report['n_groups']} queries "
            f"(labelled by {', '.join(report['labellers'])})",
            "",
            render(meta_table(report), "table"),
            "",
            render(
                pd.DataFrame([{"": k, "claims": v} for k, v in report["confusion"].items()]),
                "table",
            ),
            "",
            f"accuracy on the sample {report['accuracy']:.4f}; over the run, each stratum "
            f"weighted by its share of the run's claims: {report['run_accuracy']:.4f}",
        ]
    )


def meta_output(report: dict, fmt: str) -> str:
    if fmt == "json":
        return to_json(report)
    params = ", ".join(f"{k}={v}" for k, v in report["judge"].items() if k != "name")
    lines = [
        f"judge {report['judge']['name']} ({params or 'no parameters'}) on {report['labels']}: "
        f"{report['n_items']} labelled items"
    ]
    if report.get("describe"):
        lines.append(report["describe"])
    return "\n".join(lines + meta_levels(report["levels"]))


def meta_levels(levels: dict) -> list[str]:
    """The meta-evaluation table of each level (claim, answer), with its verdict on overlap."""
    lines: list[str] = []
    for level, found in levels.items():
        lines += [
            "",
            f"per {level}: {found['n']} ({found['n_groups']} groups); overlap's "
            f"{found['overlap_threshold']}",
            render(meta_table(found), "table"),
            found["note"],
        ]
    return lines


# the columns a narrow terminal loses first (the run id carries the time it was made)
RUNS_HIDDEN_FIRST = ("created_at", "duration_s", "status", "customised")


def runs_output(store, fmt: str, variant: str | None = None, dataset: str | None = None) -> str:
    """The runs listing; on a narrow terminal its long names wrap, and the headline metrics
    that moved between runs on one dataset (against the first listed) are the last to go."""
    table = runs_table(store, variant, dataset)
    metrics = headline_metrics(brief=True)
    moved = None
    listed = table.dropna(subset=["dataset"])
    if fmt == "table" and len(listed) > 1:
        from rag_bench.analysis.reads import metric_values

        values = metric_values(store.connect(), metrics, defined_only=True)
        runs = list(zip(listed["run_id"], listed["dataset"]))
        moved = moved_columns(values[values["run_id"].isin(listed["run_id"])], runs, metrics)
    return render(table, fmt, drop=RUNS_HIDDEN_FIRST, wrap=("name",), metrics=metrics, moved=moved)


def runs_table(store, variant: str | None = None, dataset: str | None = None) -> pd.DataFrame:
    """One row per run: id, variant, name, dataset and the queries it scored, what it was
    made with, when, how long, status, headline means; optionally of one variant and on one
    dataset (a name, a unique prefix of one or of its sha256)."""
    chosen = {r.run_id for r in store.list(variant, dataset)}
    runs = store.runs_frame()
    headline = headline_metrics(brief=True)
    runs = runs[runs["run_id"].isin(chosen)]
    if not runs.empty:
        from rag_bench.analysis.reads import metric_means

        means = metric_means(store.connect(), headline)
        wide = means.pivot(index="run_id", columns="metric", values="mean")
        runs = runs.join(wide.reindex(columns=headline), on="run_id")
    else:
        runs = runs.assign(**{m: [] for m in headline})
    columns = [
        "run_id",
        "variant",
        "name",
        "dataset",
        "queries",
        "customised",
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
    return table.reset_index(drop=True).astype({"queries": "Int64"})


def show_output(store, run, slice_by: str, metrics, fmt: str) -> str:
    from rag_bench.analysis.slices import dataset_of, query_slices, sliced_rows

    frame = store.metrics([run.run_id])
    queries = store.queries([run.run_id])
    names = canonical_names(metrics) if metrics else headline_metrics(run.manifest.get("ks", [10]))
    known = set(frame["metric"])
    for name in names:
        if name not in known:
            raise not_stored("metric of this run", name, sorted(known))
    frame = frame.drop(columns=["category"])
    labels = query_slices(queries, slice_by, None, dataset_of(run))
    sliced = sliced_rows(frame, labels, overall=False).rename(columns={"slice": slice_by})
    table = slice_means(sliced, names, slice_by, overall=frame)
    if fmt == "json":
        return to_json({"manifest": run.manifest, "slices": as_records(table)})
    m = run.manifest
    head = [
        f"run       {m['run_id']}" + (f" ({run.name})" if run.name else ""),
        f"variant   {m.get('variant')} ({m.get('variant_origin')})",
        f"dataset   {m['dataset']['name']} ({m['dataset']['n_queries']} queries, "
        f"sha256 {m['dataset']['sha256'][:12]})",
        f"created   {m.get('created_at')}, {m.get('duration_s')} s, {m.get('status')}",
    ]
    if isinstance(m.get("qrels"), dict):  # runs stored before manifests named their qrels lack it
        source = m.get("rescored_from")
        head.append(
            f"qrels     {m['qrels'].get('version')} {str(m['qrels'].get('sha256'))[:12]}"
            + (f" (rescored from {source['run_id']})" if isinstance(source, dict) else "")
        )
    if isinstance(m.get("note"), str):
        head.append(f"note      {m['note']}")
    head.append(f"made with {', '.join(run.customised) or 'the variant defaults, every query'}")
    for number, (slot, config) in enumerate(m.get("params", {}).items()):
        settings = " ".join(f"{k}={v}" for k, v in config.items() if k != "name")
        label = "params    " if number == 0 else " " * 10
        head.append(
            textwrap.fill(
                f"{label}{slot:<10} {config['name']} {settings}".rstrip(),
                width=120,
                subsequent_indent=" " * 21,
                break_on_hyphens=False,
            )
        )
    head += [*_training_line(m), *_index_line(m), ""]
    # one run: no metric moved; class names and other slice labels wrap rather than being cut
    body = render(table, fmt, wrap=(slice_by,), metrics=names)
    return "\n".join(head) + body if fmt in ("table", "markdown") else body


def _index_line(manifest: dict) -> list[str]:
    """What an approximate index cost: the recall of its top k against exact search, so its
    effect on the retrieval metrics is never hidden."""
    checked = (manifest.get("index") or {}).get("recall")
    if not checked:
        return []
    return [
        f"index     approximate: recall@{checked['depth']} {checked['recall']:.4f} against exact "
        f"search ({checked['sample']} of {checked['of']} queries, seed {checked['seed']})"
    ]


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
    """The comparison: every row as json, csv or markdown; as a table, compact (the candidate
    by letter when there are several, the interval and wins/ties/losses in one cell each) and
    with the metrics constant throughout collapsed to one line each."""
    rows = result.rows
    if fmt == "json":
        return to_json(as_records(rows))
    if fmt in ("csv", "markdown"):
        return render(rows, fmt)
    candidates = list(result.n_paired)
    letters = {run: chr(ord("B") + i) for i, run in enumerate(candidates)}
    legend = [f"A = {rows['run_a'].iloc[0]} (baseline)"] + [
        f"{letters[run]} = {run} ({n} queries paired)" for run, n in result.n_paired.items()
    ]
    head = "; ".join(legend) + ". " + family_legend(result)
    same = [
        f"{metric}: {value:g} in every query of every run"
        for metric, value in result.constant.items()
    ]
    shown = rows[~rows["metric"].isin(list(result.constant))]
    confirmatory = shown["family"] == "confirmatory"
    marks = np.where(shown["significant"], np.where(confirmatory, "*", "+"), "")
    table = pd.DataFrame(
        {
            "slice": shown["slice"],
            **({"run": shown["run_b"].map(letters)} if len(candidates) > 1 else {}),
            "metric": shown["metric"],
            "family": np.where(confirmatory, "confirm", "explore"),
            "A": shown["mean_a"],
            **({"B": shown["mean_b"]} if len(candidates) == 1 else {"mean": shown["mean_b"]}),
            "delta": shown["delta"],
            "ci": [f"[{lo:+.4f}, {hi:+.4f}]" for lo, hi in zip(shown["ci_low"], shown["ci_high"])],
            "p": shown["p_value"],
            "p_adj": shown["p_adjusted"],
            "w/t/l": [
                f"{w}/{t}/{lo}" for w, t, lo in zip(shown["wins"], shown["ties"], shown["losses"])
            ],
            "n": shown["n"],
            "mde": shown["mde"],
            **({"n_needed": shown["n_needed"]} if "n_needed" in shown else {}),
            "sig": [m + ("" if ok else "!") for m, ok in zip(marks, shown["ci_agrees"])],
        }
    )
    body = render(table, fmt, drop=("n", "w/t/l")) if len(table) else "(every metric is constant)"
    warnings = [fit_line(f"warning: {w}") for w in result.warnings]
    return "\n".join([fit_line(head), *same, *warnings, "", body])


def family_legend(result) -> str:
    """What compare's families are and at which level each row's interval and p stand."""
    first = result.rows["family"] == "confirmatory"
    levels = sorted(set(result.rows.loc[first, "ci_level"]))
    level = "/".join(f"{100 * v:g} %" for v in levels)
    confirm = (
        f"confirm = the primary metric ({', '.join(result.primary)}) over all queries: p_adj "
        f"Holm across its {int(first.sum())} row(s), ci at {level} (simultaneous), * = p_adj "
        f"< {result.alpha}. "
        if levels
        else "no confirmatory row. "
    )
    return (
        f"{result.test} test. {confirm}explore = every other row: p raw, p_adj "
        f"Benjamini-Hochberg across them, ci at 95 % per row, + = p_adj < {result.alpha}. "
        "! = the ci and the row's test disagree at the ci's level. mde: the smallest delta "
        "the row could detect (80 % power)"
    )


def diff_output(listed: pd.DataFrame, metric: str, fmt: str) -> str:
    """The diff: in a table the two runs once, above, rather than on every row."""
    if fmt != "table" or listed.empty:
        return render(listed, fmt)
    run, against = listed["run"].iloc[0], listed["against"].iloc[0]
    head = fit_line(f"{metric} of {run} against {against}: the queries that got worse, then better")
    body = listed.drop(columns=["run", "against"])
    drop = ("failure_before", "category", "entered", "left", "moved")
    wrap = ("answer_before", "answer_after")
    return head + "\n\n" + render(body, fmt, drop=drop, wrap=wrap)


def gate_output(result, fmt: str) -> str:
    """The gate's verdicts: in a table the reasons below it, one line per metric."""
    if fmt != "table":
        return render(result.rows, fmt)
    table = render(result.rows.drop(columns=["reason"]), fmt)
    reasons = [
        fit_line(f"{row.metric}: {row.verdict}, {row.reason}") for row in result.rows.itertuples()
    ]
    return table + "\n\n" + "\n".join(reasons)


def robustness_output(result, fmt: str) -> str:
    """The robustness table: per run, what each perturbation costs each metric per slice."""
    rows = result.rows
    if fmt == "json":
        return to_json(as_records(rows))
    if fmt in ("csv", "markdown"):
        return render(rows, fmt)
    made = "; ".join(
        f"{result.variants.get(run, run)}: " + ", ".join(f"{k} {n}" for k, n in counts.items())
        for run, counts in result.perturbations.items()
        if counts
    )
    head = (
        f"perturbed copy against its original query, same run. {result.test} test, p "
        f"Holm-adjusted over the table, * = p_adj < {result.alpha}"
        + (f". Copies made: {made}" if made else "")
    )
    # a run by its variant when that names it alone (the id is in the legend)
    variants = result.variants
    shown = {r: v for r, v in variants.items() if list(variants.values()).count(v) == 1}
    legend = "; ".join(f"{v} = {r}" for r, v in shown.items())
    head = (legend + ". " if legend else "") + head
    table = pd.DataFrame(
        {
            "run": rows["run"].map(lambda r: shown.get(r, r)),
            "perturbation": rows["perturbation"],
            "slice": rows["slice"],
            "metric": rows["metric"],
            "original": rows["mean_original"],
            "perturbed": rows["mean_perturbed"],
            "delta": rows["delta"],
            "95% ci": [
                f"[{lo:+.4f}, {hi:+.4f}]" for lo, hi in zip(rows["ci_low"], rows["ci_high"])
            ],
            "p_adj": rows["p_adjusted"],
            "w/t/l": [
                f"{w}/{t}/{lo}" for w, t, lo in zip(rows["wins"], rows["ties"], rows["losses"])
            ],
            "n": rows["n"],
            "sig": np.where(rows["significant"], "*", ""),
        }
    )
    return "\n".join([fit_line(head), "", render(table, fmt, drop=("n", "w/t/l"))])
