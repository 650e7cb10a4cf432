"""The ``rag-bench`` command line: each command parses, calls one library function, renders."""

from __future__ import annotations

import click

from rag_bench import __version__
from rag_bench.errors import RagBenchError


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
    from rag_bench.evaluation.measures import DEFAULT_EVAL_MEASURES
    from rag_bench.evaluation.retrieval import evaluate_run
    from rag_bench.views import evaluation_output

    result = evaluate_run(
        qrels_path,
        run_path,
        metrics or DEFAULT_EVAL_MEASURES,
        complete=complete,
        rel_level=rel_level,
    )
    click.echo(evaluation_output(result, fmt, per_query=per_query))


def main() -> None:
    cli(prog_name="rag-bench")


if __name__ == "__main__":
    main()
