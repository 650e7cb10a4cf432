"""`rag-bench import` and `export`: a system's outputs in, a run's rankings and outputs out."""

from __future__ import annotations

import json

import click

from rag_bench.analysis import EXPORT_FORMATS
from rag_bench.cli.options import (
    FORMATS,
    UserMistake,
    cutoffs,
    drop_unknown_option,
    format_option,
    open_store,
    runs_dir_option,
    warn_dataset,
)
from rag_bench.data.scores import PEERS
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
@drop_unknown_option()
@click.option(
    "--from",
    "tool",
    type=click.Choice(PEERS),
    default=None,
    help="The file holds another tool's scores: a ragas result CSV, a DeepEval test run "
    "JSON or a promptfoo output JSON; each score becomes a metric <tool>:<name>.",
)
@click.option(
    "--system",
    default=None,
    help="The provider · prompt of a promptfoo file that holds several (as the error lists).",
)
@runs_dir_option()
@format_option(FORMATS)
def import_command(
    outputs, dataset, name, judge, note, ks, drop_unknown, tool, system, runs_dir, fmt
):
    """Score a system's outputs (JSONL, CSV or Parquet: per query what it retrieved and
    answered) like a pipeline run, and store them as a run; or, with --from, store the scores
    ragas, DeepEval or promptfoo gave it (queries matched to --dataset by id or question; with
    no --dataset, the file's questions are the queries)."""
    from rag_bench.cli.render import warn
    from rag_bench.cli.views import run_summary
    from rag_bench.data.dataset import load_dataset
    from rag_bench.experiment.importer import import_outputs

    if tool is not None:
        return _import_scores(
            outputs, dataset, name, tool, system, note, drop_unknown, runs_dir, fmt
        )
    data = load_dataset(dataset, drop_unknown=drop_unknown)
    warn_dataset(data)
    result, read = import_outputs(
        outputs,
        data,
        name=name,
        judge=judge,
        note=note,
        ks=cutoffs(ks),
        runs_dir=runs_dir,
        drop_unknown=drop_unknown,
    )
    if read.dropped:
        shown = ", ".join(sorted(read.dropped)[:5]) + (" …" if len(read.dropped) > 5 else "")
        warn(
            f"warning: dropped {sum(read.dropped.values())} retrieved entries naming "
            f"{len(read.dropped)} documents not in the corpus: {shown}"
        )
    if read.missing:
        shown = ", ".join(read.missing[:5]) + (" …" if len(read.missing) > 5 else "")
        warn(
            f"warning: {len(read.missing)} evaluated queries have no record in {outputs} and are "
            f"left out: {shown}"
        )
    click.echo(f"stored run {result.run_id} ({len(read.answers)} queries)", err=True)
    click.echo(run_summary([result], fmt))


def _import_scores(path, dataset, name, tool, system, note, drop_unknown, runs_dir, fmt) -> None:
    from rag_bench.cli.render import render, warn
    from rag_bench.data.dataset import load_dataset
    from rag_bench.evaluation.summary import slice_means
    from rag_bench.experiment.importer import import_scores

    data = load_dataset(dataset, drop_unknown=drop_unknown) if dataset else None
    if data is not None:
        warn_dataset(data)
    result = import_scores(
        path, data, name=name, tool=tool, system=system, note=note, runs_dir=runs_dir,
        drop_unknown=drop_unknown,
    )  # fmt: skip
    about = result.manifest["scores"]
    if about["unmatched_records"]:
        rows = ", ".join(str(r) for r in about["unmatched_records"][:5])
        warn(
            f"warning: dropped {len(about['unmatched_records'])} records naming no query of the "
            f"dataset (rows {rows}{' …' if len(about['unmatched_records']) > 5 else ''})"
        )
    if about["missing"]:
        warn(f"warning: {len(about['missing'])} queries have no record in {path}")
    click.echo(f"stored run {result.run_id} ({about['n_records']} queries)", err=True)
    click.echo(render(slice_means(result.metrics, about["metrics"], "category"), fmt))


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
    from rag_bench.analysis.export import (
        outputs_records,
        passage_texts,
        trec_lines,
        unanswerable_note,
    )

    store = open_store(runs_dir)
    store.check_output(output, "export")
    stored = store.get(run)
    retrieved = store.retrieved([stored.run_id])
    queries = store.queries([stored.run_id])
    note = unanswerable_note(queries)  # said once the export is written, not before a failure
    if fmt == "trec":
        text = "\n".join(trec_lines(retrieved, stored.run_id, stage)) + "\n"
        return _emit(text.encode(), output, note)
    from rag_bench.data.dataset import load_dataset

    recorded = stored.manifest["dataset"]
    data = load_dataset(dataset or recorded["path"], drop_unknown="dropped" in recorded)
    records = outputs_records(
        stored.manifest,
        queries,
        retrieved,
        passage_texts(stored.manifest, data),
    )
    if fmt == "jsonl":
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        return _emit(body.encode(), output, note)
    if output is None:
        raise UserMistake(UsageError("Parquet is not written to a terminal", "give -o FILE"))
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = pa.BufferOutputStream()  # written whole, then placed: a failure keeps the old file
    pq.write_table(pa.Table.from_pylist(records), buffer)
    _emit(buffer.getvalue().to_pybytes(), output, note)


def _emit(data: bytes, output: str | None, note: str | None = None) -> None:
    """Write the export to ``output`` (stdout when None), then say ``note`` on stderr."""
    from rag_bench.io.durable import write_output

    if output is None:
        click.echo(data.decode(), nl=False)
    else:
        write_output(output, data, "the export")
    if note:
        click.echo(f"note: {note}", err=True)
