"""`rag-bench generate`: queries proposed from a corpus, their quality report, and people's
review of them applied."""

from __future__ import annotations

import json

import click

from rag_bench.cli.options import WHOLE, runs_dir_option, split_list


@click.command("generate")
@click.option(
    "--dataset",
    type=click.Path(file_okay=False),
    default=None,
    help="The corpus's dataset (folder or shipped name); with --accept, the generated set.",
)
@click.option(
    "-o", "--out", "out_dir", type=click.Path(), default=None, help="New folder to write."
)
@click.option("--n", "n", type=WHOLE, default=40, show_default=True, help="Queries to propose.")
@click.option("--seed", type=WHOLE, default=0, show_default=True, help="Seed of every draw.")
@click.option(
    "--categories",
    default="literal,paraphrase,multi-hop,unanswerable",
    show_default=True,
    help="Comma-separated categories, shared out evenly.",
)
@click.option(
    "--llm",
    default=None,
    metavar="GENERATOR",
    help="Word the questions with this generator component: llama_cpp (the packaged SmolLM2) "
    "or openai. Default: the offline rules.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="generator.PARAM=VALUE",
    help="A parameter of the --llm generator, e.g. generator.model=gpt-4o-mini.",
)
@click.option(
    "--runs",
    "runs",
    default=None,
    metavar="RUN_A,RUN_B",
    help="Two runs (e.g. baseline and hybrid over the source dataset): their per-query "
    "differences of --metric size the power rows. Default: an assumed spread, stated.",
)
@click.option("--metric", default="ndcg@10", show_default=True, help="The metric of --runs.")
@click.option(
    "--effect",
    "effects",
    default="0.05,0.02",
    show_default=True,
    help="Effects to size a tier for (comma-separated).",
)
@runs_dir_option()
@click.option(
    "--accept",
    "labels",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Apply a labels file's accept/reject/edited wording to the generated set --dataset.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("text", "json")),
    default="text",
    show_default=True,
    help="The quality report as lines, or as the JSON written to quality.json.",
)
def generate_command(
    dataset,
    out_dir,
    n,
    seed,
    categories,
    llm,
    overrides,
    runs,
    metric,
    effects,
    runs_dir,
    labels,
    fmt,
):
    """Propose queries from a corpus (literal, paraphrase, multi-hop, unanswerable) as a new
    dataset marked generated and unreviewed, with a review file and a quality report.

    `rag-bench generate --accept LABELS --dataset OUT` applies the review: accepted queries
    become labelled, rejected ones leave the set.
    """
    from rag_bench.errors import UsageError

    if labels is not None:
        from rag_bench.testsets.generate import accept

        if dataset is None:
            raise UsageError("--accept needs --dataset", "give the generated set's folder")
        done = accept(dataset, labels)
        click.echo(
            f"accepted {len(done.accepted)} ({len(done.edited)} edited), rejected "
            f"{len(done.rejected)}, not yet labelled {len(done.unlabelled)}"
            + (f"; {len(done.unknown)} labels name no query of the set" if done.unknown else "")
        )
        return
    if out_dir is None:
        raise UsageError("generate needs -o OUT_DIR", "e.g. -o my-generated-set")
    differences, source = None, ""
    if runs is not None:
        from rag_bench.cli.options import open_store
        from rag_bench.testsets.quality import run_differences

        refs = split_list(runs)
        if len(refs) != 2:
            raise UsageError("--runs names two runs", "e.g. --runs baseline-1,hybrid-1")
        differences, source = run_differences(open_store(runs_dir), *refs, metric=metric)
    from rag_bench.testsets.generate import generate

    result = generate(
        dataset,
        out_dir,
        n=n,
        seed=seed,
        categories=split_list(categories),
        llm=llm,
        llm_overrides=overrides,
        differences=differences,
        differences_source=source,
        effects=[_effect(e) for e in split_list(effects)],
    )
    if fmt == "json":
        click.echo(json.dumps(result.quality, indent=2))
    else:
        click.echo(quality_text(result))
    click.echo(
        f"wrote {len(result.queries)} generated queries (tagged unreviewed) to {result.folder}; "
        f"review them from {result.folder / 'review.jsonl'}, then "
        f"`rag-bench generate --accept LABELS --dataset {result.folder}`",
        err=True,
    )


def _effect(text: str) -> float:
    from rag_bench.errors import UsageError

    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise UsageError(f"--effect {text!r} is no positive number", "e.g. --effect 0.05,0.02")
    return value


def quality_text(result) -> str:
    """The quality report as lines for a terminal."""
    q = result.quality
    methods = ", ".join(f"{m} {c}" for m, c in result.methods.items())
    lines = [f"queries: {q['queries']} ({methods})"]
    if result.llm_unusable:
        lines.append(
            f"llm: {result.llm_unusable} replies were no usable question; those queries keep "
            "the offline wording (their method says so)"
        )
    a = q["answerability"]
    lines.append(
        f"answerability: {_pct(a['share'])} of {a['checked']} answerable queries (the "
        "extractive generator finds the gold answer in the source documents); "
        + ", ".join(f"{c} {_pct(s)}" for c, s in a["by_category"].items())
    )
    d = q["near_duplicates"]
    lines.append(f"near-duplicates: {d['pairs']} pairs at 5-gram Jaccard >= {d['threshold']}")
    for example in d["examples"]:
        lines.append(f"  {example['jaccard']:.2f}  {example['text_a']}  |  {example['text_b']}")
    s = q["spread"]
    lines.append(
        f"spread: {s['documents_used']} of {s['corpus']} documents, the top one behind "
        f"{_pct(s['top_document_share'])} of the queries, entropy {s['entropy_bits']:.2f} of "
        f"{s['max_entropy_bits']:.2f} bits"
    )
    r = q["difficulty"]
    lines.append(
        f"difficulty (BM25 rank of the best relevant document): median {r['median_rank']}, "
        f"rank 1 {_pct(r['share_rank_1'])}, top 10 {_pct(r['share_top_10'])}, not retrieved "
        f"{_pct(r['share_not_retrieved'])}"
    )
    for category, row in r["by_category"].items():
        lines.append(
            f"  {category}: median {row['median_rank']}, rank 1 {_pct(row['share_rank_1'])}"
        )
    p = q["power"]
    needed = ", ".join(
        f"{e}: {c if c is not None else '-'}" for e, c in p["queries_needed"].items()
    )
    lines.append(
        f"power: detectable effect at {p['n']} queries {p['detectable_effect']}; queries a "
        f"tier needs per effect {needed} ({p['spread_from']})"
    )
    lines += [f"flag: {f}" for f in q["flags"]]
    return "\n".join(lines)


def _pct(share) -> str:
    return "-" if share is None else f"{share:.0%}"
