"""`rag-bench eval` and `judge-agreement`: scoring without a pipeline."""

from __future__ import annotations

import click

from rag_bench.cli.options import (
    FORMATS,
    REAL,
    WHOLE,
    format_option,
    open_store,
    resampling_options,
    runs_dir_option,
)


@click.command("eval")
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
    type=WHOLE,
    default=1,
    show_default=True,
    help="Lowest grade that counts as relevant (trec_eval -l).",
)
@click.option("--per-query", is_flag=True, help="Also print every query's values.")
@format_option(FORMATS)
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


@click.command("judge-agreement")
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
@click.option(
    "--alpha",
    type=REAL,
    default=0.05,
    show_default=True,
    help="1 - the confidence of the run's prediction-powered interval.",
)
@click.option(
    "--labels",
    type=click.Path(dir_okay=False),
    default=None,
    help="A labels JSONL file (answers or claims with a human label, see docs/judges.md): "
    "measure the judge on it beside the constant and unigram-overlap baselines. With --run, "
    "the labels file of `rag-bench review`: the run's stored verdicts against its claim labels.",
)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False),
    default=None,
    help="With --labels: another labels file that sets overlap's threshold "
    "(else cross-fitted on the labels themselves).",
)
@resampling_options
@format_option(("table", "json"))
def judge_agreement_command(
    judge, overrides, dataset, run_ref, runs_dir, alpha, labels, calibration, seed, resamples, fmt
):
    """How well a judge agrees with human labels: the claim labels of a dataset's answers.jsonl,
    or with --labels any labelled answers or claims (balanced accuracy, kappa, ROC-AUC,
    precision/recall of unsupported, share flagged, with bootstrap intervals and baselines),
    or with --run RUN --labels LABELS the run's stored verdicts against a person's labels of
    them (rag-bench pool --claims, then rag-bench review)."""
    from rag_bench.analysis.agreement import assess_judge, assess_labels, assess_run_labels
    from rag_bench.cli.views import agreement_output, meta_output, run_labels_output
    from rag_bench.data.dataset import load_dataset
    from rag_bench.data.review import is_review_labels
    from rag_bench.errors import UsageError

    if labels and is_review_labels(labels):
        if dataset or calibration or not run_ref:
            raise UsageError(
                f"{labels} is a review labels file (rag-bench review)",
                "name the run whose claim verdicts were labelled with --run, "
                "and leave out --dataset and --calibration",
            )
        report = assess_run_labels(open_store(runs_dir), run_ref, labels, resamples, seed)
        click.echo(run_labels_output(report, fmt))
        return
    if labels:
        if dataset or run_ref:
            raise click.UsageError("--labels measures on its own file: leave out --dataset/--run")
        report = assess_labels(labels, judge, overrides, calibration, resamples, seed)
        click.echo(meta_output(report, fmt))
        return
    if calibration:
        raise click.UsageError("--calibration goes with --labels")
    claims = None
    if run_ref:
        claims = open_store(runs_dir).claims([run_ref])
    report = assess_judge(load_dataset(dataset), judge, overrides, claims, alpha, resamples, seed)
    click.echo(agreement_output(report, fmt))
