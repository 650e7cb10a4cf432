"""The ``rag-bench`` command line: each command parses, calls one library function, renders."""

from __future__ import annotations

import json
from pathlib import Path

import click

from rag_bench import __version__
from rag_bench.errors import ParameterError, RagBenchError, UsageError
from rag_bench.pipeline.executors import EXECUTORS


class UserMistake(click.ClickException):
    """A :class:`RagBenchError` shown as one line on stderr, with its own exit code."""

    def __init__(self, error: RagBenchError):
        super().__init__(str(error))
        self.exit_code = error.exit_code

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


class Group(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ParameterError as error:
            flag = self.flag(ctx, error.parameter)
            raise UserMistake(error.as_flag(flag) if flag else error) from None
        except RagBenchError as error:
            raise UserMistake(error) from None

    def flag(self, ctx: click.Context, parameter: str) -> str | None:
        """The flag of the running command that sets a library parameter, if it has one."""
        command = self.get_command(ctx, ctx.invoked_subcommand or "")
        for option in command.params if command else ():
            if option.name == parameter and option.opts:
                return option.opts[0]
        return None


def format_option(choices: tuple[str, ...] = ("table", "json", "csv")):
    """--format, and --wide for tables wider than the terminal."""
    fmt = click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default="table",
        show_default=True,
        help="Output format.",
    )
    wide = click.option(
        "--wide",
        is_flag=True,
        expose_value=False,
        callback=_wide,
        help="Show every column of a table, however wide (tables fit the terminal otherwise).",
    )
    return lambda command: wide(fmt(command))


def _wide(context: click.Context, _, value: bool) -> None:
    from rag_bench.cli.render import WIDE

    if value:
        context.find_root().meta[WIDE] = True


def runs_dir_option():
    """--runs-dir, the same on every command that reads or writes runs."""
    return click.option(
        "--runs-dir",
        metavar="DIR|URL",
        default=None,
        envvar="RAG_BENCH_RUNS_DIR",
        help="Where runs are stored: a folder, file:///path or s3://bucket/prefix. "
        "Default: runs/ under the working directory.",
    )


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rag-bench")
def cli() -> None:
    """Evaluate RAG pipelines as experiments with persisted, queryable traces."""


@cli.command("eval")
@click.option(
    "--qrels",
    "qrels_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Relevance judgements: TREC qrels or BEIR qrels TSV.",
)
@click.option(
    "--run",
    "run_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="A TREC run file: qid Q0 docid rank score tag.",
)
@click.option(
    "--metrics", default=None, help="Comma-separated metric names, e.g. ndcg@10,recall@100,mrr."
)
@click.option(
    "--complete",
    is_flag=True,
    help="Score judged queries missing from the run as 0 (trec_eval -c).",
)
@click.option(
    "--rel-level",
    type=int,
    default=1,
    show_default=True,
    help="Lowest grade that counts as relevant (trec_eval -l).",
)
@click.option("--per-query", is_flag=True, help="Also print every query's values.")
@format_option()
def eval_command(qrels_path, run_path, metrics, complete, rel_level, per_query, fmt):
    """Score a TREC run against qrels exactly as trec_eval does."""
    from rag_bench.cli.views import evaluation_output
    from rag_bench.evaluation.measures import DEFAULT_EVAL_MEASURES
    from rag_bench.evaluation.retrieval import evaluate_run

    result = evaluate_run(
        qrels_path,
        run_path,
        metrics or DEFAULT_EVAL_MEASURES,
        complete=complete,
        rel_level=rel_level,
    )
    click.echo(evaluation_output(result, fmt, per_query=per_query))


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _cutoffs(value: str) -> list[int]:
    try:
        return [int(v) for v in _split(value) or [""]]
    except ValueError:
        raise UserMistake(
            UsageError(f"--k {value!r} is not a list of whole numbers", "e.g. --k 1,5,10")
        ) from None


PROGRESS_EVERY_S = 10.0  # off a terminal (a CI log), one progress line at most this often


def _progress(label: str):
    """A progress bar on a terminal; elsewhere a line on stderr every ``PROGRESS_EVERY_S``."""
    import sys

    if sys.stderr.isatty():

        def bar(items):
            with click.progressbar(items, label=label, file=sys.stderr) as shown:
                yield from shown

        return bar

    def lines(items):
        import time

        total = len(items) if hasattr(items, "__len__") else None
        started = last = time.monotonic()
        for done, item in enumerate(items, start=1):
            yield item
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY_S:
                of = f"/{total}" if total is not None else ""
                click.echo(
                    f"rag-bench: {label}: {done}{of} blocks answered, {now - started:.0f} s",
                    err=True,
                )
                last = now

    return lines


@cli.command("run")
@click.option(
    "--variant",
    "variants",
    default=None,
    help="Variant name(s), comma-separated, or 'all'. See `rag-bench variants`.",
)
@click.option(
    "--resume",
    default=None,
    metavar="RUN_ID",
    help="Finish an interrupted run from its checkpoint (id or unique prefix); options left "
    "out are taken from the run, options given must match it.",
)
@click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="Dataset folder (BEIR layout) or a shipped dataset's name. Default: kestrel-kb.",
)
@runs_dir_option()
@click.option("--k", "ks", default="1,3,5,10,20,100", show_default=True, help="Metric cutoffs.")
@click.option(
    "--depth", type=int, default=100, show_default=True, help="Candidates kept per retriever."
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="SLOT.PARAM=VALUE",
    help="Override a component parameter, e.g. retriever.k1=1.2 or chunker.name=none.",
)
@click.option(
    "--sweep",
    "sweeps",
    multiple=True,
    metavar="slot.param=V1,V2,…",
    help="Run the variant at every combination of these values and compare the runs "
    "(repeatable: a grid).",
)
@click.option("--judge", default=None, help="Judge of the claims (same as --set judge.name=NAME).")
@click.option("--name", default=None, help="Name the run: the name works wherever a run id does.")
@click.option("--note", default=None, help="A note kept in the run's manifest.")
@click.option("--tag", default=None, help="Run only the queries carrying this tag (e.g. smoke).")
@click.option("--sample", type=int, default=None, help="Run a seeded random subset of N queries.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for --sample.")
@click.option("--split", default="test", show_default=True, help="Which qrels/<split>.tsv to use.")
@click.option(
    "--executor",
    type=click.Choice(EXECUTORS),
    default="local",
    show_default=True,
    help="Where the per-query work runs: this process, or Ray tasks (needs rag-bench[ray]).",
)
@click.option(
    "--address",
    default=None,
    help="Ray cluster to join (e.g. auto or ray://head:10001). Default: start Ray here.",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Local: threads (default 1). Ray without --address: CPUs of the local instance.",
)
@format_option(("table", "json", "csv", "markdown"))
def run_command(
    variants,
    resume,
    dataset,
    runs_dir,
    ks,
    depth,
    overrides,
    sweeps,
    judge,
    name,
    note,
    tag,
    sample,
    seed,
    split,
    executor,
    address,
    workers,
    fmt,
):
    """Run pipeline variants over a dataset and store every query's trace.

    Ctrl-C (or kill) stores nothing: the queries answered so far stay checkpointed, and
    `--resume RUN_ID` finishes the run from there.
    """
    results, signals = [], []
    try:
        from rag_bench.experiment.runner import interruptible

        with interruptible(signals):
            _run_or_resume(click.get_current_context(), results)
    except KeyboardInterrupt as error:
        from rag_bench.experiment.runner import interrupted_status, interruption_message

        click.echo(interruption_message(error, results), err=True)
        raise SystemExit(interrupted_status(signals)) from None
    from rag_bench.cli.views import run_summary

    if not sweeps:
        click.echo(run_summary(results, fmt))
        return
    from rag_bench.analysis.compare import compare
    from rag_bench.cli.views import comparison_output

    comparison = compare(open_store(runs_dir), [r.run_id for r in results], resamples=2_000)
    click.echo(comparison_output(comparison, fmt))


RESUME_CHECKED = ("ks", "depth", "overrides", "judge", "tag", "sample", "seed", "split")


def _run_or_resume(ctx: click.Context, results: list) -> None:
    """The work of `rag-bench run`; each stored run is appended to ``results`` at once."""
    from rag_bench.pipeline.executors import make_executor

    p = ctx.params
    executor = make_executor(p["executor"], p["address"], p["workers"])
    try:
        _run_with(ctx, results, executor)
    finally:
        executor.close()


def _stored(result, results: list) -> None:
    """Say where a finished run was stored, and keep it for the summary."""
    shown = f"stored run {result.run_id} ({len(result.queries)} queries) in {result.store}"
    click.echo(shown, err=True)
    results.append(result)


def _encoder_of(variant: str, overrides) -> str | None:
    """The name of the encoder a variant runs with (after ``--set``), if it has one."""
    from rag_bench.components.registry import registry, resolve

    return resolve(registry().variant(variant), overrides).get("encoder", {}).get("name")


def _run_with(ctx: click.Context, results: list, executor) -> None:
    from rag_bench.components.registry import registry
    from rag_bench.data.dataset import load_dataset
    from rag_bench.experiment.runner import Selection, resume_run, run_variant

    p = ctx.params
    variants, overrides = p["variants"], p["overrides"]
    if p["judge"]:
        overrides = (*overrides, f"judge.name={p['judge']}")
    if p["resume"]:
        # options left out come from the interrupted run; the ones given must match it
        given = {
            name
            for name in RESUME_CHECKED
            if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        }
        if variants and (variants.strip() == "all" or len(_split(variants)) > 1):
            raise UserMistake(UsageError("--resume finishes one run", "give one --variant or none"))
        selection = Selection(tag=p["tag"], sample=p["sample"], seed=p["seed"])
        result = resume_run(
            p["resume"],
            runs_dir=p["runs_dir"],
            variant=variants.strip() if variants else None,
            dataset=p["dataset"],
            split=p["split"] if "split" in given else None,
            overrides=overrides if given & {"overrides", "judge"} else None,
            ks=_cutoffs(p["ks"]) if "ks" in given else None,
            depth=p["depth"] if "depth" in given else None,
            selection=selection if given & {"tag", "sample", "seed"} else None,
            progress=_progress("resume"),
            executor=executor,
        )
        _stored(result, results)
        return
    if not variants:
        raise UserMistake(
            UsageError("no --variant given", "e.g. --variant baseline, or --resume RUN_ID")
        )
    names = _split(variants)
    if variants.strip() == "all":  # every variant that needs nothing but the dataset
        names = [n for n, spec in registry().variants.items() if spec.service is None]
    for name in names:
        registry().variant(name)  # fail on a misspelt name before any work
    data = load_dataset(p["dataset"], split=p["split"])
    for warning in data.warnings:
        click.echo(f"warning: {warning}", err=True)
    selection = Selection(tag=p["tag"], sample=p["sample"], seed=p["seed"])
    if p["name"] is not None and (len(names) > 1 or p["sweeps"]):
        raise UserMistake(
            UsageError("--name names one run", "give one --variant and no --sweep, or no --name")
        )
    if p["sweeps"]:
        _sweep(p, names, data, overrides, selection, executor, results)
        return
    annotations = {k: p[k] for k in ("name", "note") if p[k] is not None}
    # said once, with the first stored run that uses it (an error stays one line)
    stand_in = {name for name in names if _encoder_of(name, overrides) == "lsa"}
    for name in names:
        result = run_variant(
            name,
            data,
            overrides=overrides,
            ks=_cutoffs(p["ks"]),
            depth=p["depth"],
            selection=selection,
            runs_dir=p["runs_dir"],
            progress=_progress(name),
            executor=executor,
            annotations=annotations,
        )
        if name in stand_in:
            from rag_bench.components.dense import STAND_IN_NOTE

            click.echo(f"note: {STAND_IN_NOTE}", err=True)
            stand_in = set()
        _stored(result, results)


def _sweep(p: dict, names: list[str], data, overrides, selection, executor, results) -> None:
    from rag_bench.experiment.sweep import run_sweep

    if len(names) != 1:
        raise UserMistake(UsageError("--sweep runs one variant", "give one --variant"))

    def stored(result) -> None:
        click.echo(f"stored run {result.run_id} ({result.manifest['name']})", err=True)
        results.append(result)

    run_sweep(
        names[0],
        p["sweeps"],
        data,
        overrides=overrides,
        on_stored=stored,
        ks=_cutoffs(p["ks"]),
        depth=p["depth"],
        selection=selection,
        runs_dir=p["runs_dir"],
        progress=_progress(names[0]),
        executor=executor,
    )


@cli.command("variants")
@format_option(("table", "json", "csv", "markdown"))
def variants_command(fmt):
    """List the registered variants with their components, parameters and origin."""
    from rag_bench.cli.render import render
    from rag_bench.cli.views import variants_table
    from rag_bench.components.registry import registry, resolve

    reg = registry()
    resolved = {name: (spec, resolve(spec)) for name, spec in reg.variants.items()}
    click.echo(render(variants_table(resolved), fmt))
    if fmt in ("table", "markdown") and any(
        r.get("encoder", {}).get("name") == "lsa" for _, r in resolved.values()
    ):
        from rag_bench.components.dense import STAND_IN_NOTE

        click.echo(f"\nnote: {STAND_IN_NOTE}")


@cli.command("metrics")
@format_option(("table", "json", "csv", "markdown"))
def metrics_command(fmt):
    """List every metric: its forms, group, which way is better, whether unanswerable queries
    have it, other tools' spellings, and its definition."""
    import pandas as pd

    from rag_bench.cli.render import render
    from rag_bench.evaluation.measures import catalogue_rows

    click.echo(render(pd.DataFrame(catalogue_rows()), fmt))


@cli.command("judge-agreement")
@click.option("--judge", default="lexical", show_default=True, help="The judge to assess.")
@click.option(
    "--set", "overrides", multiple=True, metavar="judge.PARAM=VALUE", help="Judge parameters."
)
@click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="Dataset (folder or shipped name) with labelled claims in answers.jsonl. "
    "Default: kestrel-kb.",
)
@click.option(
    "--run",
    "run_ref",
    default=None,
    help="Also estimate this run's true supported-claim share (prediction-powered interval).",
)
@runs_dir_option()
@click.option("--alpha", type=float, default=0.05, show_default=True)
@format_option(("table", "json"))
def judge_agreement_command(judge, overrides, dataset, run_ref, runs_dir, alpha, fmt):
    """How well a judge agrees with the human claim labels of answers.jsonl."""
    from rag_bench.analysis.agreement import assess_judge
    from rag_bench.cli.views import agreement_output
    from rag_bench.data.dataset import load_dataset

    claims = None
    if run_ref:
        claims = open_store(runs_dir).claims([run_ref])
    report = assess_judge(load_dataset(dataset), judge, overrides, claims, alpha)
    click.echo(agreement_output(report, fmt))


ALL_FORMATS = ("table", "json", "csv", "markdown")


def significance_options(command):
    """--test and --alpha, shared by the commands that test differences."""
    command = click.option("--alpha", type=float, default=0.05, show_default=True)(command)
    return click.option(
        "--test",
        default="randomization",
        show_default=True,
        type=click.Choice(["randomization", "ttest", "bootstrap"]),
        help="Paired significance test.",
    )(command)


slice_option = click.option(
    "--slice",
    "slice_by",
    default="category",
    show_default=True,
    type=click.Choice(["category", "tag", "failure_class", "none"]),
    help="Group queries by (plus the overall slice 'all').",
)


@cli.command("runs")
@click.option("--variant", default=None, help="Only runs of this variant.")
@click.option(
    "--upgrade",
    is_flag=True,
    help="First rewrite runs stored in the first layout (runs/<run_id>/) into the current one.",
)
@runs_dir_option()
@format_option(ALL_FORMATS)
def runs_command(variant, upgrade, runs_dir, fmt):
    """List stored runs with their headline metrics."""
    from rag_bench.cli.render import render
    from rag_bench.cli.views import RUNS_HIDDEN_FIRST, runs_table

    store = open_store(runs_dir)
    if upgrade:
        for run_id in store.upgrade():
            click.echo(f"upgraded run {run_id}", err=True)
    warn_broken(store)
    click.echo(render(runs_table(store, variant), fmt, drop=RUNS_HIDDEN_FIRST))


@cli.command("show")
@click.argument("run")
@click.option(
    "--slice",
    "slice_by",
    default="category",
    show_default=True,
    type=click.Choice(["category", "tag", "failure_class"]),
    help="Group queries by.",
)
@click.option("--metrics", default=None, help="Comma-separated metric names.")
@runs_dir_option()
@format_option(ALL_FORMATS)
def show_command(run, slice_by, metrics, runs_dir, fmt):
    """Show one run: its manifest and its metrics per slice."""
    from rag_bench.cli.views import show_output

    store = open_store(runs_dir)
    click.echo(
        show_output(store, store.get(run), slice_by, _split(metrics) if metrics else None, fmt)
    )


@cli.command("diagnose")
@click.argument("run")
@click.option("--against", default=None, metavar="RUN", help="Pair with this run's symptoms.")
@click.option(
    "--slice",
    "slice_by",
    default="category",
    show_default=True,
    type=click.Choice(["category", "tag", "failure_class", "none"]),
    help="Group queries by (plus the overall slice 'all').",
)
@runs_dir_option()
@format_option(ALL_FORMATS)
def diagnose_command(run, against, slice_by, runs_dir, fmt):
    """Which symptoms a run shows, per slice: count, share, likely culprit stage, what to try
    and example queries; with --against, which symptoms grew or shrank over the same queries."""
    from rag_bench.analysis.diagnose import diagnose
    from rag_bench.cli.render import render

    store = open_store(runs_dir)
    table = diagnose(store, run, against, slice_by)
    click.echo(render(table, fmt))


@cli.command("rm")
@click.argument("runs", nargs=-1, required=True)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@runs_dir_option()
def rm_command(runs, yes, runs_dir):
    """Delete runs (the only command that deletes anything)."""
    store = open_store(runs_dir)
    chosen = list(dict.fromkeys(store.resolve(ref, include_broken=True) for ref in runs))
    if not yes and not click.confirm(
        f"Delete {len(chosen)} run(s): {', '.join(chosen)}?", default=False, err=True
    ):
        raise click.Abort()
    for run_id in chosen:
        store.remove(run_id)
        click.echo(f"deleted {run_id}", err=True)


@cli.command("compare")
@click.argument("runs", nargs=-1, required=True)
@slice_option
@click.option("--metrics", default=None, help="Comma-separated metric names.")
@significance_options
@click.option(
    "--resamples",
    type=int,
    default=10_000,
    show_default=True,
    help="Permutations / bootstrap resamples.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--allow-mismatch", is_flag=True, help="Compare runs made on different datasets.")
@click.option(
    "--mde",
    type=float,
    default=None,
    metavar="DELTA",
    help="Also give, per row, the queries needed to detect a delta of DELTA (80 % power).",
)
@runs_dir_option()
@format_option(ALL_FORMATS)
def compare_command(
    runs, slice_by, metrics, test, alpha, resamples, seed, allow_mismatch, mde, runs_dir, fmt
):
    """Compare runs with paired significance tests; the first run is the baseline."""
    from rag_bench.analysis.compare import compare
    from rag_bench.cli.views import comparison_output

    result = compare(
        open_store(runs_dir),
        runs,
        slice_by=None if slice_by == "none" else slice_by,
        metrics=_split(metrics) if metrics else None,
        test=test,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
        allow_mismatch=allow_mismatch,
        mde=mde,
    )
    click.echo(comparison_output(result, fmt))


@cli.command("diff")
@click.argument("run")
@click.option(
    "--against",
    default="previous",
    show_default=True,
    help="The run to diff against; 'previous' is the latest earlier run of the same variant.",
)
@click.option("--metric", default="ndcg@10", show_default=True)
@click.option("--top", type=int, default=20, show_default=True, help="Queries listed each way.")
@runs_dir_option()
@format_option(ALL_FORMATS)
def diff_command(run, against, metric, top, runs_dir, fmt):
    """The queries that got worse and better, with what changed in their rankings."""
    from rag_bench.analysis.compare import diff
    from rag_bench.cli.views import diff_output

    click.echo(diff_output(diff(open_store(runs_dir), run, against, metric, top), metric, fmt))


@cli.command("gate")
@click.argument("candidate")
@click.option("--baseline", required=True, help="The run the candidate must not regress from.")
@click.option(
    "--max-drop",
    "max_drops",
    multiple=True,
    required=True,
    metavar="METRIC=AMOUNT",
    help="Largest tolerated drop, e.g. recall@10=0.02 (repeatable).",
)
@click.option(
    "--require",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "significant", "drop"]),
    help="Fail on a drop beyond the allowance when it is significant, on the drop alone, or "
    "(auto) significant where the queries can detect the allowance and the drop elsewhere.",
)
@significance_options
@click.option("--seed", type=int, default=0, show_default=True)
@runs_dir_option()
@format_option(ALL_FORMATS)
def gate_command(candidate, baseline, max_drops, require, test, alpha, seed, runs_dir, fmt):
    """Exit 1 when the candidate drops by more than allowed (for CI)."""
    from rag_bench.analysis.compare import gate, parse_drops
    from rag_bench.cli.views import gate_output

    result = gate(
        open_store(runs_dir),
        candidate,
        baseline,
        parse_drops(max_drops),
        test=test,
        alpha=alpha,
        seed=seed,
        require=require,
    )
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(gate_output(result, fmt))
    click.echo("gate: " + ("passed" if result.passed else "FAILED"), err=True)
    if not result.passed:
        raise SystemExit(1)


@cli.command("sql")
@click.argument("query", required=False)
@click.option("--schema", is_flag=True, help="List the views and their columns.")
@click.option(
    "--allow-files", is_flag=True, help="Let the query read files outside the runs folder."
)
@runs_dir_option()
@format_option(ALL_FORMATS)
def sql_command(query, schema, allow_files, runs_dir, fmt):
    """Read-only SQL over the views runs, queries, metrics, retrieved and claims."""
    from rag_bench.cli.render import render

    store = open_store(runs_dir)
    warn_broken(store)
    if schema:
        click.echo(render(store.schema(), fmt))
        return
    if not query:
        raise UserMistake(UsageError("no query given", 'e.g. rag-bench sql "SELECT * FROM runs"'))
    try:
        _echo_result(store.sql_chunks(query, allow_files=allow_files), fmt)
    except KeyboardInterrupt:
        click.echo("interrupted; nothing was changed", err=True)
        raise SystemExit(130) from None


ROWS_SHOWN = 1000  # the text formats show this many rows of an SQL result


def _echo_result(chunks, fmt: str) -> None:
    """Print an SQL result as it arrives: CSV and JSON whole, the text formats the first
    ``ROWS_SHOWN`` rows with a note saying how many more there are."""
    from rag_bench.cli.render import head, render, stream_rows

    if fmt in ("csv", "json"):
        for piece in stream_rows(chunks, fmt):
            click.echo(piece, nl=False)
        return
    shown, left_out = head(chunks, ROWS_SHOWN)
    click.echo(render(shown, fmt))
    if left_out:
        click.echo(
            f"note: {left_out} more rows not shown; --format csv or json prints every row",
            err=True,
        )


@cli.command("report")
@click.argument("runs", nargs=-1, required=True)
@slice_option
@click.option(
    "--metric",
    default="ndcg@10",
    show_default=True,
    help="Metric of the per-query scatter and of the worst-queries list.",
)
@click.option("--metrics", default=None, help="Comma-separated metrics of the means section.")
@click.option("--top", type=int, default=10, show_default=True, help="Worst queries listed.")
@click.option(
    "--resamples", type=int, default=10_000, show_default=True, help="Bootstrap resamples."
)
@click.option("--seed", type=int, default=0, show_default=True)
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
    runs, slice_by, metric, metrics, top, resamples, seed, allow_mismatch, output, runs_dir
):
    """Write one self-contained HTML report of runs; the first is the baseline, the last the
    candidate."""
    from rag_bench.report.page import report

    report(
        open_store(runs_dir),
        runs,
        slice_by=None if slice_by == "none" else slice_by,
        metric=metric,
        metrics=_split(metrics) if metrics else None,
        top=top,
        resamples=resamples,
        seed=seed,
        allow_mismatch=allow_mismatch,
        output=output,
    )
    click.echo(f"wrote {output}", err=True)


@cli.command("import")
@click.argument("outputs", type=click.Path(dir_okay=False))
@click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="The dataset the system answered (default: the shipped kestrel-kb).",
)
@click.option("--name", required=True, help="The variant name the run is stored under.")
@click.option("--judge", default="lexical", show_default=True, help="Judge of the claims.")
@click.option("--note", default=None, help="A note kept in the run's manifest.")
@click.option("--k", "ks", default="1,3,5,10,20,100", show_default=True, help="Metric cutoffs.")
@runs_dir_option()
@format_option(ALL_FORMATS)
def import_command(outputs, dataset, name, judge, note, ks, runs_dir, fmt):
    """Score a system's outputs (JSONL, CSV or Parquet: per query what it retrieved and
    answered) like a pipeline run, and store them as a run."""
    from rag_bench.cli.views import run_summary
    from rag_bench.experiment.importer import import_outputs

    result, read = import_outputs(
        outputs, dataset, name=name, judge=judge, note=note, ks=_cutoffs(ks), runs_dir=runs_dir
    )
    if read.missing:
        shown = ", ".join(read.missing[:5]) + (" …" if len(read.missing) > 5 else "")
        click.echo(
            f"warning: {len(read.missing)} evaluated queries have no record in {outputs} and are "
            f"left out: {shown}",
            err=True,
        )
    click.echo(f"stored run {result.run_id} ({len(read.answers)} queries)", err=True)
    click.echo(run_summary([result], fmt))


@cli.command("export")
@click.argument("run")
@click.option(
    "--format",
    "fmt",
    default="trec",
    show_default=True,
    type=click.Choice(["trec", "jsonl", "parquet"]),
    help="trec: a run file for trec_eval; jsonl/parquet: outputs records for `rag-bench import`.",
)
@click.option(
    "--stage", default="documents", show_default=True, help="The ranking a TREC file holds."
)
@click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="The run's dataset, for the passages' texts (default: where the run read it).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Default: stdout (trec, jsonl).",
)
@runs_dir_option()
def export_command(run, fmt, stage, dataset, output, runs_dir):
    """Export a run's rankings as a TREC run file, or its outputs for `rag-bench import`."""
    from rag_bench.analysis.export import outputs_records, passage_texts, trec_lines

    store = open_store(runs_dir)
    stored = store.get(run)
    retrieved = store.retrieved([stored.run_id])
    if fmt == "trec":
        text = "\n".join(trec_lines(retrieved, stored.run_id, stage)) + "\n"
        return _emit(text.encode(), output)
    from rag_bench.data.dataset import load_dataset

    data = load_dataset(dataset or stored.manifest["dataset"]["path"])
    records = outputs_records(
        stored.manifest,
        store.queries([stored.run_id]),
        retrieved,
        passage_texts(stored.manifest, data),
    )
    if fmt == "jsonl":
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        return _emit(body.encode(), output)
    if output is None:
        raise UserMistake(UsageError("Parquet is not written to a terminal", "give -o FILE"))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(records), output)


def _emit(data: bytes, output: str | None) -> None:
    if output is None:
        click.echo(data.decode(), nl=False)
    else:
        Path(output).write_bytes(data)


def open_store(runs_dir: str | None):
    """The run store of ``--runs-dir`` (a path or URL; unset: the default runs folder)."""
    from rag_bench.runs import open_runs

    return open_runs(runs_dir)


def warn_broken(store) -> None:
    """Report a missing runs folder, and each unreadable run once (for the commands that span
    all runs)."""
    if not store.exists:
        click.echo(f"warning: there is no runs folder {store} (nothing stored yet)", err=True)
    for problem in store.broken.values():
        click.echo(f"warning: skipped: {problem}", err=True)


def main() -> None:
    cli(prog_name="rag-bench")


if __name__ == "__main__":
    main()
