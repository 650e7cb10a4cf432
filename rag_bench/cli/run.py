"""`rag-bench run`: variants over a dataset, resumed runs and sweeps."""

from __future__ import annotations

import click

from rag_bench.cli.options import (
    FORMATS,
    WHOLE,
    UserMistake,
    config_option,
    cutoffs,
    drop_unknown_option,
    format_option,
    open_store,
    progress,
    runs_dir_option,
    split_list,
    warn_dataset,
)
from rag_bench.data import TIERS
from rag_bench.errors import UnknownNameError, UsageError
from rag_bench.pipeline.executors import EXECUTORS


@click.command("run")
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
    help="Dataset folder (BEIR layout) or a shipped dataset's name. Default: kestrel-kb.",
)
@runs_dir_option()
@click.option("--k", "ks", default="1,3,5,10,20,100", show_default=True, help="Metric cutoffs.")
@click.option(
    "--depth", type=WHOLE, default=100, show_default=True, help="Candidates kept per retriever."
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="SLOT.PARAM=VALUE",
    help="Override a component parameter, e.g. retriever.k1=1.2 or chunker.name=none.",
)
@click.option(
    "--sweep",
    "sweeps",
    multiple=True,
    metavar="slot.param=V1,V2,…",
    help="Run the variant at every combination of these values and compare the runs "
    "(repeatable: a grid).",
)
@click.option(
    "--max-points",
    "max_points",
    type=WHOLE,
    default=100,
    show_default=True,
    help="The most grid points a --sweep may have (checked before any point runs).",
)
@click.option("--judge", default=None, help="Judge of the claims (same as --set judge.name=NAME).")
@click.option("--name", default=None, help="Name the run: the name works wherever a run id does.")
@click.option("--note", default=None, help="A note kept in the run's manifest.")
@click.option(
    "--tier",
    type=click.Choice(TIERS),
    default=None,
    help="Run one tier: smoke (tagged smoke), regression (tagged regression, else all), "
    "deep (all).",
)
@click.option("--tag", default=None, help="Run only the queries carrying this tag (e.g. smoke).")
@click.option("--sample", type=WHOLE, default=None, help="Run a seeded random subset of N queries.")
@click.option(
    "--perturb",
    default=None,
    metavar="KINDS",
    help="Also run perturbed copies of each query that keep its labels: comma-separated of "
    "typo, colloquial, synonym, reorder (see rag-bench robustness).",
)
@click.option(
    "--seed", type=WHOLE, default=0, show_default=True, help="Seed for --sample and --perturb."
)
@click.option("--split", default="test", show_default=True, help="Which qrels/<split>.tsv to use.")
@click.option(
    "--qrels",
    default=None,
    metavar="VERSION|FILE",
    help="Score on these qrels: a version of the dataset's (latest, base, a number, a hash "
    "prefix; see rag-bench qrels log) or a qrels file. Default: the dataset's own.",
)
@click.option(
    "--queries",
    type=click.Path(dir_okay=False),
    default=None,
    help="Run these queries (JSONL with _id and text, or one query a line) in place of the "
    "dataset's: unlabelled ones get answer-side metrics, NULL ranking metrics.",
)
@drop_unknown_option()
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
    type=WHOLE,
    default=None,
    help="Local: threads (default 1). Ray without --address: CPUs of the local instance.",
)
@click.option(
    "--repeats",
    type=WHOLE,
    default=1,
    show_default=True,
    help="Answer each query N times, each sampling component (temperature > 0) with its own "
    "seed per repeat, and store every repeat (see docs/noise.md).",
)
@config_option
@format_option(FORMATS)
def run_command(
    variants,
    resume,
    dataset,
    runs_dir,
    ks,
    depth,
    overrides,
    sweeps,
    max_points,
    judge,
    name,
    note,
    tier,
    tag,
    sample,
    perturb,
    seed,
    split,
    qrels,
    queries,
    drop_unknown,
    executor,
    address,
    workers,
    repeats,
    config,
    fmt,
):
    """Run pipeline variants over a dataset and store every query's trace.

    Ctrl-C (or kill) stores nothing: the queries answered so far stay checkpointed, and
    `--resume RUN_ID` finishes the run from there.
    """
    results, signals = [], []
    try:
        from rag_bench.io.signals import interruptible

        with interruptible(signals):
            _run_or_resume(click.get_current_context(), results)
    except KeyboardInterrupt as error:
        from rag_bench.io.signals import interrupted_status

        click.echo(interruption_message(error, results), err=True)
        raise SystemExit(interrupted_status(signals)) from None
    from rag_bench.cli.views import run_summary

    if not sweeps or config:
        click.echo(run_summary(results, fmt))
    else:
        from rag_bench.analysis.compare import compare
        from rag_bench.cli.views import comparison_output

        comparison = compare(open_store(runs_dir), [r.run_id for r in results], resamples=2_000)
        click.echo(comparison_output(comparison, fmt))
    if any((r.manifest.get("generator") or {}).get("name") == "extractive" for r in results):
        from rag_bench.cli.render import warn
        from rag_bench.components.generate import EXTRACTIVE_NOTE

        warn(f"note: {EXTRACTIVE_NOTE}")


def _selection(p: dict):
    """The query selection the options make (``--tier``, ``--tag``, ``--sample``,
    ``--perturb``, ``--seed``)."""
    from rag_bench.data.selection import Selection

    perturb = tuple(split_list(p["perturb"])) if p["perturb"] is not None else ()
    if p["perturb"] is not None and not perturb:
        raise UserMistake(UsageError("--perturb names no perturbation", "e.g. --perturb typo"))
    return Selection(
        tag=p["tag"], sample=p["sample"], seed=p["seed"], tier=p["tier"], perturb=perturb
    )


def interruption_message(error: KeyboardInterrupt, stored: list) -> str:
    """The one line printed when a run command is interrupted (``stored``: the runs stored
    before)."""
    from rag_bench.experiment.runner import RunInterrupted

    if isinstance(error, RunInterrupted):
        text = error.message()
    else:
        text = "interrupted; nothing more stored" if stored else "interrupted; nothing stored"
    if stored:
        text += "; stored before: " + ", ".join(r.run_id for r in stored)
    return text


RESUME_CHECKED = (
    "ks",
    "depth",
    "overrides",
    "judge",
    "tier",
    "tag",
    "sample",
    "perturb",
    "seed",
    "split",
)
SELECTING = {"tier", "tag", "sample", "perturb", "seed"}


def _run_or_resume(ctx: click.Context, results: list) -> None:
    """The work of `rag-bench run`; each stored run is appended to ``results`` at once."""
    from rag_bench.pipeline.executors import make_executor

    p = ctx.params
    executor = make_executor(p["executor"], p["address"], p["workers"])
    try:
        if not p["config"]:
            _run_with(ctx, results, executor)
        for params in _config_runs(ctx) if p["config"] else []:
            _run_with(ctx, results, executor, params)
    finally:
        executor.close()


# the run options an experiment file may set; a flag on the command line wins over it
CONFIG_OPTIONS = ("dataset", "tier", "tag", "sample", "seed", "ks", "depth", "split", "runs_dir")


def _config_runs(ctx: click.Context) -> list[dict]:
    """The parameters of each run an experiment file names (its variants, or those of them
    --variant picks), flags winning over the file."""
    from rag_bench.experiment.config import load_experiment

    p = ctx.params
    if p["resume"]:
        raise UserMistake(UsageError("--config starts runs", "resume without --config"))
    experiment = load_experiment(p["config"])
    picked = split_list(p["variants"]) if p["variants"] else [v.key for v in experiment.variants]
    known = [v.key for v in experiment.variants]
    for key in picked:
        if key not in known:
            raise UserMistake(UnknownNameError(f"variant of {p['config']}", key, known))
    given = {
        name
        for name in p
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    }
    shared = {k: v for k, v in experiment.options.items() if k in CONFIG_OPTIONS}
    base = {**p, **{k: v for k, v in shared.items() if k not in given}}
    return [
        {
            **base,
            "variants": entry.variant,
            "overrides": (*entry.overrides, *p["overrides"]),
            "sweeps": p["sweeps"] if "sweeps" in given else entry.sweeps,
            "name": p["name"] if "name" in given else (None if entry.sweeps else entry.name),
            "note": p["note"] if "note" in given else entry.note,
        }
        for entry in experiment.variants
        if entry.key in picked
    ]


def _stored(result, results: list) -> None:
    """Say where a finished run was stored, and keep it for the summary."""
    repeats = result.manifest.get("repeats", {}).get("n", 1)
    times = f" × {repeats} repeats" if repeats > 1 else ""
    queries = result.queries["query_id"].nunique()
    shown = f"stored run {result.run_id} ({queries} queries{times}) in {result.store}"
    click.echo(shown, err=True)
    unlabelled = result.manifest.get("dataset", {}).get("unlabelled")
    if unlabelled:  # a queries file, or a dataset without qrels
        from rag_bench.data.user_queries import unlabelled_note

        click.echo(f"note: {unlabelled_note(unlabelled)}", err=True)
    results.append(result)


def _encoder_of(variant: str, overrides) -> str | None:
    """The name of the encoder a variant runs with (after ``--set``), if it has one."""
    from rag_bench.components.registry import registry, resolve

    return resolve(registry().variant(variant), overrides).get("encoder", {}).get("name")


def _run_with(ctx: click.Context, results: list, executor, params: dict | None = None) -> None:
    from rag_bench.components.registry import ALL_VARIANTS, registry
    from rag_bench.data.dataset import load_dataset
    from rag_bench.experiment.runner import resume_run, run_variant

    p = params if params is not None else ctx.params
    variants, overrides = p["variants"], p["overrides"]
    if variants is not None and not split_list(variants):
        raise UserMistake(
            UsageError(f"--variant {variants!r} names no variant", "e.g. --variant baseline")
        )
    if p["judge"]:
        overrides = (*overrides, f"judge.name={p['judge']}")
    if p["resume"]:
        # options left out come from the interrupted run; the ones given must match it
        given = {
            name
            for name in RESUME_CHECKED
            if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        }
        if variants and (variants.strip() == ALL_VARIANTS or len(split_list(variants)) > 1):
            raise UserMistake(UsageError("--resume finishes one run", "give one --variant or none"))
        selection = _selection(p)
        result = resume_run(
            p["resume"],
            runs_dir=p["runs_dir"],
            variant=variants.strip() if variants else None,
            dataset=p["dataset"],
            split=p["split"] if "split" in given else None,
            overrides=overrides if given & {"overrides", "judge"} else None,
            ks=cutoffs(p["ks"]) if "ks" in given else None,
            depth=p["depth"] if "depth" in given else None,
            selection=selection if given & SELECTING else None,
            progress=progress("resume"),
            executor=executor,
        )
        _stored(result, results)
        return
    if not variants:
        raise UserMistake(
            UsageError("no --variant given", "e.g. --variant baseline, or --resume RUN_ID")
        )
    all_of_them = variants.strip() == ALL_VARIANTS
    names = registry().variants_named(ALL_VARIANTS if all_of_them else split_list(variants))
    data = load_dataset(p["dataset"], split=p["split"], drop_unknown=p["drop_unknown"])
    data = _on_qrels_and_queries(data, p)
    warn_dataset(data)
    selection = _selection(p)
    if p["name"] is not None and (len(names) > 1 or p["sweeps"]):
        raise UserMistake(
            UsageError("--name names one run", "give one --variant and no --sweep, or no --name")
        )
    if p["sweeps"]:
        _sweep(p, names, data, overrides, selection, executor, results)
        return
    annotations = {k: p[k] for k in ("name", "note") if p[k] is not None}
    # said once, with the first stored run that uses it (an error stays one line)
    stand_in = {name for name in names if _encoder_of(name, overrides) == "lsa"}
    for name in names:
        result = run_variant(
            name,
            data,
            overrides=overrides,
            ks=cutoffs(p["ks"]),
            depth=p["depth"],
            selection=selection,
            runs_dir=p["runs_dir"],
            progress=progress(name),
            executor=executor,
            annotations=annotations,
            repeats=p["repeats"],
        )
        if name in stand_in:
            from rag_bench.cli.render import warn
            from rag_bench.components.dense import STAND_IN_NOTE

            warn(f"note: {STAND_IN_NOTE}")
            stand_in = set()
        _stored(result, results)


def _on_qrels_and_queries(data, p: dict):
    """The dataset on the qrels of ``--qrels`` and with the queries of ``--queries``; when some
    queries have no labels, one line says what that means for their metrics."""
    from rag_bench.data.qrels_versions import use_qrels
    from rag_bench.data.user_queries import with_user_queries

    if p.get("qrels") is not None:
        data = use_qrels(data, p["qrels"], p["split"], p["drop_unknown"])
    if p.get("queries") is not None:
        data = with_user_queries(data, p["queries"])
    return data


def _sweep(p: dict, names: list[str], data, overrides, selection, executor, results) -> None:
    from rag_bench.experiment.sweep import run_sweep

    if len(names) != 1:
        raise UserMistake(UsageError("--sweep runs one variant", "give one --variant"))

    def stored(result) -> None:
        click.echo(f"stored run {result.run_id} ({result.manifest['name']})", err=True)
        results.append(result)

    run_sweep(
        names[0],
        p["sweeps"],
        data,
        overrides=overrides,
        on_stored=stored,
        max_points=p["max_points"],
        ks=cutoffs(p["ks"]),
        depth=p["depth"],
        selection=selection,
        runs_dir=p["runs_dir"],
        progress=progress(names[0]),
        executor=executor,
        repeats=p["repeats"],
    )
