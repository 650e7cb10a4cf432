"""`rag-bench import` and `export`: a system's outputs in, a run's rankings and outputs out."""

from __future__ import annotations

import json
from pathlib import Path

import click

from rag_bench.analysis import EXPORT_FORMATS
from rag_bench.cli.options import (
    FORMATS,
    UserMistake,
    cutoffs,
    format_option,
    open_store,
    runs_dir_option,
)
from rag_bench.errors import UsageError
from rag_bench.pipeline import DOCUMENTS_STAGE


@click.command("import")
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
@format_option(FORMATS)
def import_command(outputs, dataset, name, judge, note, ks, runs_dir, fmt):
    """Score a system's outputs (JSONL, CSV or Parquet: per query what it retrieved and
    answered) like a pipeline run, and store them as a run."""
    from rag_bench.cli.views import run_summary
    from rag_bench.experiment.importer import import_outputs

    result, read = import_outputs(
        outputs, dataset, name=name, judge=judge, note=note, ks=cutoffs(ks), runs_dir=runs_dir
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


@click.command("export")
@click.argument("run")
@click.option(
    "--format",
    "fmt",
    default="trec",
    show_default=True,
    type=click.Choice(EXPORT_FORMATS),
    help="trec: a run file for trec_eval; jsonl/parquet: outputs records for `rag-bench import`.",
)
@click.option(
    "--stage", default=DOCUMENTS_STAGE, show_default=True, help="The ranking a TREC file holds."
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
