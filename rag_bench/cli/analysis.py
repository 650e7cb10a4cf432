"""`rag-bench compare`, `diff`, `gate`, `diagnose`, `noise` and `report`: what changed between
runs, and how much a run varies with its repeats."""

from __future__ import annotations

import click

from rag_bench.analysis import GATE_RULES
from rag_bench.cli.options import (
    FORMATS,
    REAL,
    WHOLE,
    config_option,
    format_option,
    open_store,
    primary_option,
    resampling_options,
    runs_dir_option,
    seed_option,
    significance_options,
    slice_option,
    split_list,
)

# on a narrow terminal the counts behind the shares and the example ids go first; the text a
# reader acts on wraps rather than being cut
DIAGNOSE_HIDDEN_FIRST = ("cleared", "appeared", "of", "n_against", "examples")
DIAGNOSE_WRAPPED = ("symptom", "culprit", "what_to_try")


@click.command("diagnose")
@click.argument("run")
@click.option("--against", default=None, metavar="RUN", help="Pair with this run's symptoms.")
@slice_option
@click.option("--explain", is_flag=True, help="Also print the rule behind each symptom.")
@runs_dir_option()
@format_option(FORMATS)
def diagnose_command(run, against, slice_by, explain, runs_dir, fmt):
    """Which symptoms a run shows, per slice: count, share, likely culprit stage, what to try
    and example queries; with --against, which symptoms grew or shrank over the same queries."""
    from rag_bench.analysis.diagnose import cutoffs, diagnose, diagnosis_rules
    from rag_bench.cli.render import as_records, render, to_json

    store = open_store(runs_dir)
    table = diagnose(store, run, against, slice_by)
    rules = diagnosis_rules(*cutoffs(store.get(run))) if explain else None
    if rules is not None and fmt == "json":
        click.echo(to_json({"diagnosis": as_records(table), "rules": as_records(rules)}))
        return
    click.echo(render(table, fmt, drop=DIAGNOSE_HIDDEN_FIRST, wrap=DIAGNOSE_WRAPPED))
    if rules is not None:
        click.echo("\n" + render(rules, fmt, wrap=("rule",)))


@click.command("noise")
@click.argument("run")
@click.option("--per-query", is_flag=True, help="One row per query and metric or verdict.")
@runs_dir_option()
@format_option(FORMATS)
def noise_command(run, per_query, runs_dir, fmt):
    """How a run made with --repeats varies from repeat to repeat: per answer metric and verdict
    (refused, failure_class), the flip rate (share of queries whose repeats disagree) and the
    mean std and range over queries; --per-query lists each query."""
    from rag_bench.analysis.noise import run_noise
    from rag_bench.cli.render import render

    rows, summary = run_noise(open_store(runs_dir), run)
    if rows.empty:
        click.echo(f"run {run} has no query answered in two repeats (see run --repeats)", err=True)
    click.echo(render(rows if per_query else summary, fmt))


@click.command("compare")
@click.argument("runs", nargs=-1, required=True)
@slice_option
@click.option("--metrics", default=None, help="Comma-separated metric names.")
@primary_option
@significance_options
@resampling_options
@click.option("--allow-mismatch", is_flag=True, help="Compare runs made on different datasets.")
@click.option(
    "--mde",
    type=REAL,
    default=None,
    metavar="DELTA",
    help="Also give, per row, the queries needed to detect a delta of DELTA (80 % power).",
)
@runs_dir_option()
@format_option(FORMATS)
def compare_command(
    runs,
    slice_by,
    metrics,
    primary,
    test,
    alpha,
    resamples,
    seed,
    allow_mismatch,
    mde,
    runs_dir,
    fmt,
):
    """Compare runs with paired significance tests; the first run is the baseline."""
    from rag_bench.analysis.compare import compare
    from rag_bench.cli.views import comparison_output

    result = compare(
        open_store(runs_dir),
        runs,
        slice_by=slice_by,
        metrics=split_list(metrics) if metrics else None,
        test=test,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
        allow_mismatch=allow_mismatch,
        mde=mde,
        primary=split_list(primary) if primary else None,
    )
    click.echo(comparison_output(result, fmt))


@click.command("diff")
@click.argument("run")
@click.option(
    "--against",
    default="previous",
    show_default=True,
    help="The run to diff against; 'previous' is the latest earlier run of the same variant.",
)
@click.option(
    "--metric", default="ndcg@10", show_default=True, help="Metric of the per-query changes."
)
@click.option("--top", type=WHOLE, default=20, show_default=True, help="Queries listed each way.")
@click.option("--allow-mismatch", is_flag=True, help="Diff runs made on different datasets.")
@runs_dir_option()
@format_option(FORMATS)
def diff_command(run, against, metric, top, allow_mismatch, runs_dir, fmt):
    """The queries that got worse and better, with what changed in their rankings."""
    from rag_bench.analysis.diff import diff
    from rag_bench.cli.views import diff_output

    table = diff(open_store(runs_dir), run, against, metric, top, allow_mismatch)
    click.echo(diff_output(table, metric, fmt))


@click.command("gate")
@click.argument("candidate", required=False)
@click.option("--baseline", default=None, help="The run the candidate must not regress from.")
@click.option(
    "--max-drop",
    "max_drops",
    multiple=True,
    metavar="METRIC=AMOUNT",
    help="Largest tolerated drop, e.g. recall@10=0.02 (repeatable).",
)
@click.option(
    "--require",
    default="auto",
    show_default=True,
    type=click.Choice(GATE_RULES),
    help="Fail on a drop beyond the allowance when it is significant, on the drop alone, or "
    "(auto) significant where the queries can detect the allowance and the drop elsewhere.",
)
@significance_options
@seed_option
@runs_dir_option()
@config_option
@format_option(FORMATS)
def gate_command(candidate, baseline, max_drops, require, test, alpha, seed, runs_dir, config, fmt):
    """Exit 1 when the candidate drops by more than allowed (for CI); with --config, every
    gate of the experiment file (flags given here win over each gate's own)."""
    from rag_bench.analysis.gate import gate
    from rag_bench.cli.render import warn
    from rag_bench.cli.views import gate_output

    checks = _gates(click.get_current_context(), config, candidate, baseline, max_drops, require)
    passed, unstable = True, 0
    for label, (cand, base, drops, rule), store in checks:
        result = gate(store, cand, base, drops, test=test, alpha=alpha, seed=seed, require=rule)
        for warning in result.warnings:
            warn(f"warning: {warning}")
        click.echo(
            (f"{label}: {cand} against {base}\n" if label else "") + gate_output(result, fmt)
        )
        passed = passed and result.passed
        unstable += int((result.rows["verdict"] == "unstable").sum())
    noisy = f" ({unstable} unstable: within the run-to-run noise)" if unstable else ""
    click.echo("gate: " + ("passed" if passed else "FAILED") + noisy, err=True)
    if not passed:
        raise SystemExit(1)


def _gates(ctx, config, candidate, baseline, max_drops, require) -> list:
    """(label, (candidate, baseline, drops, rule), store) of each gate to check: the one the
    flags name, or each of the experiment file's with the flags given winning."""
    from rag_bench.analysis.gate import parse_drops
    from rag_bench.cli.options import UserMistake
    from rag_bench.errors import UsageError

    runs_dir = ctx.params["runs_dir"]
    if config is None:
        if candidate is None or baseline is None or not max_drops:
            raise UserMistake(
                UsageError(
                    "the gate needs a CANDIDATE, --baseline and --max-drop (or --config FILE)",
                    "e.g. rag-bench gate latest:hybrid --baseline latest:baseline "
                    "--max-drop recall@10=0.02",
                )
            )
        return [("", (candidate, baseline, parse_drops(max_drops), require), open_store(runs_dir))]
    from rag_bench.experiment.config import load_experiment

    experiment = load_experiment(config)
    if not experiment.gates:
        raise UserMistake(UsageError(f"{config} names no gate", "add a [gate.<name>] table"))
    given = ctx.get_parameter_source("require") == click.core.ParameterSource.COMMANDLINE
    store = open_store(runs_dir or experiment.options.get("runs_dir"))
    return [
        (
            entry.key,
            (
                candidate or entry.candidate,
                baseline or entry.baseline,
                parse_drops(max_drops) if max_drops else entry.max_drops,
                require if given else entry.require,
            ),
            store,
        )
        for entry in experiment.gates
    ]


@click.command("report")
@click.argument("runs", nargs=-1, required=True)
@slice_option
@click.option(
    "--metric",
    default="ndcg@10",
    show_default=True,
    help="Metric of what changed (the largest regressions and improvements) and of the scatter.",
)
@click.option("--metrics", default=None, help="Comma-separated metrics compared and averaged.")
@primary_option
@click.option(
    "--top", type=WHOLE, default=10, show_default=True, help="Changed queries listed each way."
)
@significance_options
@resampling_options
@click.option("--allow-mismatch", is_flag=True, help="Report runs made on different datasets.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default="report.html",
    show_default=True,
    help="Where to write the HTML file.",
)
@runs_dir_option()
def report_command(
    runs,
    slice_by,
    metric,
    metrics,
    primary,
    top,
    test,
    alpha,
    resamples,
    seed,
    allow_mismatch,
    output,
    runs_dir,
):
    """Write one self-contained HTML report of runs: paired comparison, what changed with both
    traces, diagnosis, means, failure classes; the first run is the baseline, the last the
    candidate."""
    from rag_bench.report.page import report

    report(
        open_store(runs_dir),
        runs,
        slice_by=slice_by,
        metric=metric,
        metrics=split_list(metrics) if metrics else None,
        primary=split_list(primary) if primary else None,
        top=top,
        test=test,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
        allow_mismatch=allow_mismatch,
        output=output,
    )
    click.echo(f"wrote {output}", err=True)


@click.command("robustness")
@click.argument("runs", nargs=-1, required=True)
@slice_option
@click.option("--metrics", default=None, help="Comma-separated metric names.")
@significance_options
@resampling_options
@runs_dir_option()
@format_option(FORMATS)
def robustness_command(runs, slice_by, metrics, test, alpha, resamples, seed, runs_dir, fmt):
    """What perturbed queries cost each run: every perturbed copy (run --perturb) paired with
    its original, per perturbation, slice and metric, with paired significance tests."""
    from rag_bench.analysis.robustness import robustness
    from rag_bench.cli.views import robustness_output

    result = robustness(
        open_store(runs_dir),
        runs,
        slice_by=slice_by,
        metrics=split_list(metrics) if metrics else None,
        test=test,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
    )
    click.echo(robustness_output(result, fmt))
