"""`rag-bench runs`, `show`, `rm` and `sql`: the stored runs."""

from __future__ import annotations

import click

from rag_bench.analysis import SLICES
from rag_bench.cli.options import (
    FORMATS,
    UserMistake,
    format_option,
    open_store,
    runs_dir_option,
    split_list,
    warn_broken,
)
from rag_bench.errors import UsageError


@click.command("runs")
@click.option("--variant", default=None, help="Only runs of this variant.")
@click.option(
    "--dataset",
    default=None,
    help="Only runs on this dataset (its name, a unique prefix of it or of its sha256).",
)
@click.option(
    "--upgrade",
    is_flag=True,
    help="First rewrite runs stored in the first layout (runs/<run_id>/) into the current one.",
)
@runs_dir_option()
@format_option(FORMATS)
def runs_command(variant, dataset, upgrade, runs_dir, fmt):
    """List stored runs with their headline metrics."""
    from rag_bench.cli.views import runs_output

    store = open_store(runs_dir)
    if upgrade:
        for run_id in store.upgrade():
            click.echo(f"upgraded run {run_id}", err=True)
    warn_broken(store)
    click.echo(runs_output(store, fmt, variant, dataset))


@click.command("show")
@click.argument("run")
@click.option(
    "--slice",
    "slice_by",
    default="category",
    show_default=True,
    help=f"Group queries by {', '.join(SLICES)}, any field of the query records (e.g. "
    "difficulty) or id~REGEX (the ids matching, and the others).",
)
@click.option("--metrics", default=None, help="Comma-separated metric names.")
@runs_dir_option()
@format_option(FORMATS)
def show_command(run, slice_by, metrics, runs_dir, fmt):
    """Show one run: its manifest and its metrics per slice."""
    from rag_bench.cli.views import show_output

    store = open_store(runs_dir)
    click.echo(
        show_output(store, store.get(run), slice_by, split_list(metrics) if metrics else None, fmt)
    )


@click.command("rm")
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


@click.command("sql")
@click.argument("query", required=False)
@click.option("--schema", is_flag=True, help="List the views and their columns.")
@click.option(
    "--allow-files", is_flag=True, help="Let the query read files outside the runs folder."
)
@runs_dir_option()
@format_option(FORMATS)
def sql_command(query, schema, allow_files, runs_dir, fmt):
    """Read-only SQL over the views runs, queries, metrics, retrieved and claims."""
    from rag_bench.cli.render import render

    store = open_store(runs_dir)
    warn_broken(store)
    if schema:
        click.echo(render(store.schema(), fmt))
        return
    if not query:
        from rag_bench.runs.sql import EXAMPLE

        raise UserMistake(UsageError("no query given", f'e.g. rag-bench sql "{EXAMPLE}"'))
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
