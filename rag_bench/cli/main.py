"""The ``rag-bench`` command line: each command parses, calls one library function, renders."""

from __future__ import annotations

import click

from rag_bench import __version__
from rag_bench.errors import RagBenchError, UsageError
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
        except RagBenchError as error:
            raise UserMistake(error) from None


def format_option(choices: tuple[str, ...] = ("table", "json", "csv")):
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default="table",
        show_default=True,
        help="Output format.",
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
        return [int(v) for v in _split(value)]
    except ValueError:
        raise UserMistake(
            UsageError(f"--k {value!r} is not a list of whole numbers", "e.g. --k 1,5,10")
        ) from None


def _progress(label: str):
    """A progress bar on a terminal; nothing otherwise."""
    import sys

    if not sys.stderr.isatty():
        return None

    def wrap(items):
        with click.progressbar(items, label=label, file=sys.stderr) as bar:
            yield from bar

    return wrap


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
    help="Dataset folder (BEIR layout). Default: the shipped kestrel-kb.",
)
@click.option(
    "--runs-dir",
    metavar="DIR|URL",
    default=None,
    envvar="RAG_BENCH_RUNS_DIR",
    help="Where runs are stored: a folder, file:///path or s3://bucket/prefix. "
    "Default: runs/ under the working directory.",
)
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
@click.option("--judge", default=None, help="Judge of the claims (same as --set judge.name=NAME).")
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
    judge,
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

    click.echo(run_summary(results, fmt))


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


def _encoder_of(variant: str, overrides) -> str | None:
    """The name of the encoder a variant runs with (after ``--set``), if it has one."""
    from rag_bench.components.registry import registry, resolve

    return resolve(registry().variant(variant), overrides).get("encoder", {}).get("name")


def _run_with(ctx: click.Context, results: list, executor) -> None:
    from rag_bench.components.registry import registry
    from rag_bench.data.dataset import load_dataset
    from rag_bench.experiment.runner import SHIPPED_DATASET, Selection, resume_run, run_variant

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
        click.echo(
            f"stored run {result.run_id} ({len(result.queries)} queries) in {result.path}", err=True
        )
        results.append(result)
        return
    if not variants:
        raise UserMistake(
            UsageError("no --variant given", "e.g. --variant baseline, or --resume RUN_ID")
        )
    names = list(registry().variants) if variants.strip() == "all" else _split(variants)
    for name in names:
        registry().variant(name)  # fail on a misspelt name before any work
    data = load_dataset(p["dataset"] or SHIPPED_DATASET, split=p["split"])
    for warning in data.warnings:
        click.echo(f"warning: {warning}", err=True)
    selection = Selection(tag=p["tag"], sample=p["sample"], seed=p["seed"])
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
        )
        if name in stand_in:
            from rag_bench.components.dense import STAND_IN_NOTE

            click.echo(f"note: {STAND_IN_NOTE}", err=True)
            stand_in = set()
        click.echo(
            f"stored run {result.run_id} ({len(result.queries)} queries) in {result.path}", err=True
        )
        results.append(result)


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


@cli.command("judge-agreement")
@click.option("--judge", default="lexical", show_default=True, help="The judge to assess.")
@click.option(
    "--set", "overrides", multiple=True, metavar="judge.PARAM=VALUE", help="Judge parameters."
)
@click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="Dataset with labelled claims in answers.jsonl. Default: the shipped kestrel-kb.",
)
@click.option(
    "--run",
    "run_ref",
    default=None,
    help="Also estimate this run's true supported-claim share (prediction-powered interval).",
)
@click.option("--runs-dir", metavar="DIR|URL", default=None, envvar="RAG_BENCH_RUNS_DIR")
@click.option("--alpha", type=float, default=0.05, show_default=True)
@format_option(("table", "json"))
def judge_agreement_command(judge, overrides, dataset, run_ref, runs_dir, alpha, fmt):
    """How well a judge agrees with the human claim labels of answers.jsonl."""
    from rag_bench.analysis.agreement import assess_judge
    from rag_bench.cli.views import agreement_output
    from rag_bench.data.dataset import load_dataset
    from rag_bench.experiment.runner import SHIPPED_DATASET

    claims = None
    if run_ref:
        from rag_bench.runs.store import read_table

        claims = read_table(open_store(runs_dir).get(run_ref).path, "claims")
    report = assess_judge(load_dataset(dataset or SHIPPED_DATASET), judge, overrides, claims, alpha)
    click.echo(agreement_output(report, fmt))


def runs_dir_option():
    return click.option(
        "--runs-dir",
        metavar="DIR|URL",
        default=None,
        envvar="RAG_BENCH_RUNS_DIR",
        help="Where runs are stored: a folder, file:///path or s3://bucket/prefix. "
        "Default: runs/ under the working directory.",
    )


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
    from rag_bench.cli.views import runs_table

    if upgrade:
        from rag_bench.runs.upgrade import upgrade_runs

        for run_id in upgrade_runs(runs_dir):
            click.echo(f"upgraded run {run_id}", err=True)
    click.echo(render(runs_table(open_store(runs_dir, warn=True), variant), fmt))


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


@cli.command("rm")
@click.argument("runs", nargs=-1, required=True)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@runs_dir_option()
def rm_command(runs, yes, runs_dir):
    """Delete runs (the only command that deletes anything)."""
    from rag_bench.runs.store import remove_run

    store = open_store(runs_dir)
    chosen = list(dict.fromkeys(store.folder(ref) for ref in runs))
    names = ", ".join(folder.name for folder in chosen)
    if not yes and not click.confirm(
        f"Delete {len(chosen)} run(s): {names}?", default=False, err=True
    ):
        raise click.Abort()
    for folder in chosen:
        remove_run(folder)
        click.echo(f"deleted {folder.name}", err=True)


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
@runs_dir_option()
@format_option(ALL_FORMATS)
def compare_command(
    runs, slice_by, metrics, test, alpha, resamples, seed, allow_mismatch, runs_dir, fmt
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
    from rag_bench.cli.render import render

    click.echo(render(diff(open_store(runs_dir), run, against, metric, top), fmt))


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
@significance_options
@click.option("--seed", type=int, default=0, show_default=True)
@runs_dir_option()
@format_option(ALL_FORMATS)
def gate_command(candidate, baseline, max_drops, test, alpha, seed, runs_dir, fmt):
    """Exit 1 when the candidate drops significantly by more than allowed (for CI)."""
    from rag_bench.analysis.compare import gate, parse_drops
    from rag_bench.cli.render import render

    result = gate(
        open_store(runs_dir),
        candidate,
        baseline,
        parse_drops(max_drops),
        test=test,
        alpha=alpha,
        seed=seed,
    )
    click.echo(render(result.rows, fmt))
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

    store = open_store(runs_dir, warn=True)
    if schema:
        click.echo(render(store.schema(), fmt))
        return
    if not query:
        raise UserMistake(UsageError("no query given", 'e.g. rag-bench sql "SELECT * FROM runs"'))
    click.echo(render(store.sql(query, allow_files=allow_files), fmt))


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


def open_store(runs_dir: str | None, warn: bool = False):
    """The runs folder; ``warn`` reports each unreadable run (for commands spanning all runs)."""
    from rag_bench.runs.reader import Store

    store = Store.open(runs_dir)
    if warn:
        for problem in store.broken.values():
            click.echo(f"warning: skipped: {problem}", err=True)
    return store


def main() -> None:
    cli(prog_name="rag-bench")


if __name__ == "__main__":
    main()
