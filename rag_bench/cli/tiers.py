"""`rag-bench tiers`: the query tiers of a dataset, and sampling one into its tag."""

from __future__ import annotations

import click

from rag_bench.cli.options import FORMATS, WHOLE, format_option
from rag_bench.data import SAMPLED_TIERS


@click.command("tiers")
@click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="Dataset folder (BEIR layout) or a shipped dataset's name. Default: kestrel-kb.",
)
@click.option("--split", default="test", show_default=True, help="Which qrels/<split>.tsv to use.")
@click.option(
    "--sample",
    "tier",
    type=click.Choice(SAMPLED_TIERS),
    default=None,
    help="Draw this tier (stratified by category, keeping the smaller tiers' queries) and "
    "write its tag into queries.jsonl.",
)
@click.option("--size", type=WHOLE, default=None, help="Queries in the sampled tier.")
@click.option("--seed", type=WHOLE, default=0, show_default=True, help="Seed of the draw.")
@format_option(FORMATS)
def tiers_command(dataset, split, tier, size, seed, fmt):
    """Show a dataset's tiers (smoke, regression, deep) per category, or sample one.

    A tier is a tag: smoke is the queries tagged smoke, regression those tagged regression
    (every labelled query while none is), deep every labelled query. Run one with
    `rag-bench run --tier NAME`.
    """
    from rag_bench.cli.render import render
    from rag_bench.data.dataset import load_dataset
    from rag_bench.data.tiers import sample_tier, tier_sizes, write_tier
    from rag_bench.errors import UsageError

    data = load_dataset(dataset, split=split)
    if (tier is None) != (size is None):
        raise UsageError("--sample and --size go together", "e.g. --sample regression --size 200")
    if tier is not None:
        ids = sample_tier(data.queries, tier, size, seed)
        changed = write_tier(data, tier, ids)
        click.echo(
            f"tagged {len(ids)} queries {tier} ({changed} lines changed) in "
            f"{data.path / 'queries.jsonl'}",
            err=True,
        )
        data = load_dataset(dataset, split=split)
    click.echo(render(tier_sizes(data.queries), fmt))
