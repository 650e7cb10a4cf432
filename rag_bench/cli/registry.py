"""`rag-bench variants` and `metrics`: what is registered and what is measured."""

from __future__ import annotations

import click

from rag_bench.cli.options import FORMATS, format_option


@click.command("variants")
@format_option(FORMATS)
def variants_command(fmt):
    """List the registered variants with their descriptions, components, parameters and
    origin."""
    from rag_bench.cli.render import fit_line
    from rag_bench.cli.views import variants_output, variants_table
    from rag_bench.components.registry import registry, resolve

    reg = registry()
    resolved = {name: (spec, resolve(spec)) for name, spec in reg.variants.items()}
    click.echo(variants_output(variants_table(resolved), fmt))
    if fmt in ("table", "markdown") and any(
        r.get("encoder", {}).get("name") == "lsa" for _, r in resolved.values()
    ):
        from rag_bench.components.dense import STAND_IN_NOTE

        click.echo("\n" + fit_line(f"note: {STAND_IN_NOTE}"))


@click.command("components")
@click.argument("slot", required=False)
@format_option(FORMATS)
def components_command(slot, fmt):
    """List the registered components (built-in and from plugins) of every slot, or of SLOT:
    their parameters with types and defaults, what each does, and where it comes from."""
    from rag_bench.cli.views import components_output
    from rag_bench.components.catalog import components

    click.echo(components_output(components(slot), fmt))


@click.command("metrics")
@format_option(FORMATS)
def metrics_command(fmt):
    """List every metric: its forms, group, which way is better, whether unanswerable queries
    have it, other tools' spellings, and its definition."""
    import pandas as pd

    from rag_bench.cli.render import render
    from rag_bench.evaluation.measures import catalogue_rows

    click.echo(render(pd.DataFrame(catalogue_rows()), fmt))
