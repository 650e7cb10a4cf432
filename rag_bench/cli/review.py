"""`rag-bench pool` and `rag-bench review`: review items for a person, and the page to label
them on."""

from __future__ import annotations

import click

from rag_bench.cli.options import WHOLE, open_store, runs_dir_option
from rag_bench.errors import UsageError


@click.command("pool")
@click.argument("runs", nargs=-1)
@click.option(
    "--depth",
    type=WHOLE,
    default=10,
    show_default=True,
    help="Pool the top DEPTH documents of each run (and rank pairs by nDCG@DEPTH).",
)
@click.option(
    "--claims",
    "claims_run",
    metavar="RUN",
    default=None,
    help="Instead of pairs: a stratified sample of this run's claim verdicts (with --sample).",
)
@click.option(
    "--sample",
    type=WHOLE,
    default=None,
    help="With --claims: how many claims (one at least of each verdict × failure class).",
)
@click.option("--seed", type=WHOLE, default=0, show_default=True, help="Seed of --sample.")
@click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="The runs' dataset folder (default: the shipped dataset they name).",
)
@runs_dir_option()
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="The pool file to write (JSONL review items).",
)
def pool_command(runs, depth, claims_run, sample, seed, dataset, runs_dir, output):
    """Write review items for `rag-bench review`: the unjudged (query, document) pairs of the
    RUNS' top --depth, those that could change a comparison most first; or, with --claims RUN
    --sample N, a seeded sample of a run's claim verdicts stratified by verdict and failure
    class."""
    from rag_bench.analysis.pool import pool_pairs, sample_claims
    from rag_bench.data.review import write_items

    store = open_store(runs_dir)
    store.check_output(output, "pool file")
    if claims_run:
        if runs:
            raise UsageError("--claims samples one run", "leave out the RUNS arguments")
        if sample is None:
            raise UsageError("--claims needs --sample", "give --sample N: how many to review")
        items = sample_claims(store, claims_run, sample, seed, dataset)
        what = f"{len(items)} claims of {store.resolve(claims_run)}"
    else:
        if sample is not None:
            raise UsageError("--sample goes with --claims", "add --claims RUN or drop --sample")
        if not runs:
            raise UsageError("no runs to pool", "name the runs to pool (or --claims RUN)")
        items = pool_pairs(store, runs, depth, dataset)
        what = f"{len(items)} unjudged pairs from the top {depth} of {len(runs)} run(s)"
    write_items(items, output)
    click.echo(f"wrote {what} to {output}")


@click.command("review")
@click.argument("pool_file", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "labels",
    required=True,
    type=click.Path(dir_okay=False),
    help="The labels file: each decision is appended; an existing one resumes.",
)
@click.option("--labeller", required=True, help="Who labels (a name or handle), kept per label.")
@click.option(
    "--port", type=WHOLE, default=0, show_default=True, help="Port on 127.0.0.1 (0: a free one)."
)
def review_command(pool_file, labels, labeller, port):
    """Serve the review page of POOL_FILE on 127.0.0.1 until Ctrl-C: grade pairs 0-3, label
    claims s/u, accept or reject generated queries a/r, move with j/k; each decision is
    appended to the labels file at once."""
    from rag_bench.report.review import ReviewServer, ReviewSession

    session = ReviewSession(pool_file, labels, labeller)
    server = ReviewServer(
        session,
        port,
        on_label=lambda label: click.echo(
            f"{session.labelled()}/{len(session.items)} labelled", err=True
        ),
    )
    click.echo(f"{session.labelled()}/{len(session.items)} items already labelled in {labels}")
    click.echo(f"review page: {server.url}  (Ctrl-C ends; every label is saved as it is made)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    click.echo(f"{session.labelled()}/{len(session.items)} labelled in {labels}")
