"""`rag-bench qrels merge|log` (reviewed grades in, as qrels versions) and `rag-bench rescore`
(a stored run scored again on other qrels)."""

from __future__ import annotations

import click

from rag_bench.cli.options import FORMATS, drop_unknown_option, format_option, runs_dir_option

DATASET = click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="Dataset folder (BEIR layout) or a shipped dataset's name. Default: kestrel-kb.",
)
SPLIT = click.option("--split", default="test", show_default=True, help="Which qrels/<split>.tsv.")


@click.group("qrels")
def qrels_group() -> None:
    """Versions of a dataset's qrels: merge reviewed grades in, list the versions."""


@qrels_group.command("merge")
@DATASET
@SPLIT
@click.argument("labels", type=click.Path(dir_okay=False))
@drop_unknown_option()
def merge_command(dataset, split, labels, drop_unknown):
    """Merge the pair grades of LABELS (the review page's labels file) into the dataset's
    latest qrels as a new version (the last line per query and document wins)."""
    from rag_bench.data.qrels_versions import merge_labels

    result = merge_labels(dataset, labels, split=split, drop_unknown=drop_unknown)
    for note in result.notes:
        click.echo(f"warning: {note}", err=True)
    counts = (
        f"{len(result.added)} added, {len(result.changed)} changed, "
        f"{len(result.unchanged)} unchanged"
    )
    people = ", ".join(f"{name} ({n})" for name, n in result.labellers.items())
    parent = f"{result.parent.label} {result.parent.sha256[:12]}"
    if result.version is None:
        click.echo(f"no grade changes version {parent} ({counts}): nothing written")
        return
    v = result.version
    click.echo(
        f"qrels version {v.label} {v.sha256[:12]} ({v.n_judgements} judgements; parent {parent}): "
        f"{counts}; labelled by {people}"
    )


@qrels_group.command("log")
@DATASET
@SPLIT
@format_option(FORMATS)
def log_command(dataset, split, fmt):
    """List the qrels versions of a dataset, oldest first (base: its own qrels file)."""
    import pandas as pd

    from rag_bench.cli.render import render
    from rag_bench.data.qrels_versions import qrels_log

    rows = []
    for v in qrels_log(dataset, split):
        record, counts = v.record, v.record.get("counts", {})
        rows.append(
            {
                "version": v.label,
                "sha256": v.sha256[:12],
                "parent": (record.get("parent") or {}).get("version"),
                "judgements": v.n_judgements,
                "added": counts.get("added"),
                "changed": counts.get("changed"),
                "unchanged": counts.get("unchanged"),
                "labellers": ", ".join(record.get("labellers", {})) or None,
                "created_at": record.get("created_at"),
                "labels": (record.get("labels") or {}).get("file"),
            }
        )
    frame = pd.DataFrame(rows)
    for column in ("added", "changed", "unchanged"):
        frame[column] = frame[column].astype("Int64")
    click.echo(render(frame, fmt, wrap=("labellers",)))


@click.command("rescore")
@click.argument("run")
@click.option(
    "--qrels",
    "qrels",
    default=None,
    metavar="VERSION|FILE",
    help="The qrels: a version of the dataset's (latest, base, a number, a hash prefix; see "
    "rag-bench qrels log) or a qrels file. Default: the dataset's own.",
)
@click.option(
    "--answers",
    type=click.Path(dir_okay=False),
    default=None,
    help="New gold answers: JSONL of {_id, answer and/or answers} for the dataset's queries.",
)
@click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="Where the run's data is now (a copy is fine). Default: where the run recorded it.",
)
@click.option(
    "--queries",
    type=click.Path(dir_okay=False),
    default=None,
    help="The queries file of a run made with --queries.",
)
@runs_dir_option()
@drop_unknown_option()
@click.option("--name", default=None, help="Name the new run.")
@click.option("--note", default=None, help="A note kept in the new run's manifest.")
@format_option(FORMATS)
def rescore_command(run, qrels, answers, dataset, queries, runs_dir, drop_unknown, name, note, fmt):
    """Score a stored run again on other qrels (or gold answers), without running its
    pipeline: its stored rankings, answers and verdicts are evaluated anew and stored as a new
    run naming its source and the qrels version."""
    from rag_bench.cli.views import run_summary
    from rag_bench.experiment.rescore import rescore_run

    result = rescore_run(
        run,
        qrels=qrels,
        answers=answers,
        dataset=dataset,
        queries=queries,
        runs_dir=runs_dir,
        drop_unknown=drop_unknown,
        name=name,
        note=note,
    )
    version = result.manifest["qrels"]
    click.echo(
        f"stored run {result.run_id} (run {result.manifest['rescored_from']['run_id']} rescored "
        f"on qrels {version['version']} {version['sha256'][:12]}) in {result.store}",
        err=True,
    )
    reranker = result.manifest["params"].get("reranker") or {}
    if reranker.get("train_qrels", "evaluated") != "evaluated":
        click.echo(
            f"note: the reranker keeps the model it learnt from qrels "
            f"{reranker['train_qrels'][:12]}; a fresh run equal to this one: rag-bench run "
            f"--variant {result.manifest['variant']} --qrels {version['sha256'][:12]} "
            f"--set reranker.train_qrels={reranker['train_qrels'][:12]}",
            err=True,
        )
    click.echo(run_summary([result], fmt))
