"""Options and helpers the commands share: formats, --wide, --runs-dir, tests, slices, progress."""

from __future__ import annotations

import click

from rag_bench.analysis import SLICES
from rag_bench.errors import RagBenchError, UsageError, shown_value
from rag_bench.evaluation import TEST_NAMES

MAX_WHOLE = 2**63 - 1  # the largest whole number a flag takes (numpy's and Arrow's int64)


class UserMistake(click.ClickException):
    """A :class:`RagBenchError` shown as one line on stderr, with its own exit code."""

    def __init__(self, error: RagBenchError):
        super().__init__(str(error))
        self.exit_code = error.exit_code  # type: ignore[misc]  # click's default is per class

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


class Number(click.ParamType):
    """A numeric option. A value that is no number of the kind (``abc``; ``1.5`` or ``nan`` for a
    whole number) is one line naming the flag; a whole number written as a float (``1e9``) is
    taken as one, so that the library's range check, which names the valid range, has the say."""

    def __init__(self, whole: bool):
        self.whole = whole
        self.name = "integer" if whole else "float"  # what --help shows, as click's own types

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        text = str(value).strip()
        flag = param.opts[0] if param is not None and param.opts else "the value"
        try:
            number = int(text) if self.whole else float(text)
        except ValueError:
            pass
        else:
            if self.whole and abs(number) > MAX_WHOLE:
                raise UserMistake(
                    UsageError(
                        f"{flag} {shown_value(number)} is beyond the whole numbers it takes",
                        f"give at most {MAX_WHOLE:,}",
                    )
                )
            return number
        try:
            number = float(text)
        except ValueError:
            number = None
        if self.whole and number is not None and number.is_integer():
            return int(number)
        kind = "a whole number" if self.whole else "a number"
        given = param is not None and param.default is not None
        example = f"e.g. {flag} {param.default}" if given else kind
        raise UserMistake(UsageError(f"{flag} {text!r} is not {kind}", example))


WHOLE, REAL = Number(whole=True), Number(whole=False)


def format_option(choices: tuple[str, ...] = ("table", "json", "csv")):
    """--format, and --wide for tables wider than the terminal."""
    fmt = click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default="table",
        show_default=True,
        help="Output format.",
    )
    wide = click.option(
        "--wide",
        is_flag=True,
        expose_value=False,
        callback=_wide,
        help="Show every column of a table, however wide (tables fit the terminal otherwise).",
    )
    return lambda command: wide(fmt(command))


def _wide(context: click.Context, _, value: bool) -> None:
    from rag_bench.cli.render import WIDE

    if value:
        context.find_root().meta[WIDE] = True


def runs_dir_option():
    """--runs-dir, the same on every command that reads or writes runs."""
    return click.option(
        "--runs-dir",
        metavar="DIR|URL",
        default=None,
        envvar="RAG_BENCH_RUNS_DIR",
        help="Where runs are stored: a folder, file:///path or s3://bucket/prefix. "
        "Default: runs/ under the working directory.",
    )


def split_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def cutoffs(value: str) -> list[int]:
    try:
        return [int(v) for v in split_list(value) or [""]]
    except ValueError:
        raise UserMistake(
            UsageError(f"--k {value!r} is not a list of whole numbers", "e.g. --k 1,5,10")
        ) from None


PROGRESS_EVERY_S = 10.0  # off a terminal (a CI log), one progress line at most this often


def progress(label: str):
    """A progress bar on a terminal; elsewhere a line on stderr every ``PROGRESS_EVERY_S``."""
    import sys

    if sys.stderr.isatty():

        def bar(items):
            with click.progressbar(items, label=label, file=sys.stderr) as shown:
                yield from shown

        return bar

    def lines(items):
        import time

        total = len(items) if hasattr(items, "__len__") else None
        what = getattr(items, "what", "answered")  # blocks of queries, or of corpus texts
        started = last = time.monotonic()
        for done, item in enumerate(items, start=1):
            yield item
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY_S:
                of = f"/{total}" if total is not None else ""
                click.echo(
                    f"rag-bench: {label}: {done}{of} blocks {what}, {now - started:.0f} s",
                    err=True,
                )
                last = now

    return lines


FORMATS = ("table", "json", "csv", "markdown")  # what render writes


def significance_options(command):
    """--test and --alpha, shared by the commands that test differences."""
    command = click.option(
        "--alpha",
        type=REAL,
        default=0.05,
        show_default=True,
        help="Significance level of the adjusted p-values (Holm: family-wise; compare's "
        "exploratory rows: Benjamini-Hochberg's false discovery rate).",
    )(command)
    return click.option(
        "--test",
        default="randomization",
        show_default=True,
        type=click.Choice(TEST_NAMES),
        help="Paired significance test.",
    )(command)


primary_option = click.option(
    "--primary",
    default=None,
    metavar="METRIC[,METRIC]",
    help="The confirmatory metric(s), over all queries: Holm across the compared runs; every "
    "other row is exploratory (Benjamini-Hochberg). Default: ndcg@10 when compared.",
)


seed_option = click.option(
    "--seed", type=WHOLE, default=0, show_default=True, help="Seed of the resampling."
)


def resampling_options(command):
    """--resamples and --seed, shared by the commands that resample."""
    command = seed_option(command)
    return click.option(
        "--resamples",
        type=WHOLE,
        default=10_000,
        show_default=True,
        help="Permutations / bootstrap resamples.",
    )(command)


NO_SLICES = "none"  # --slice none: the overall slice 'all' alone (the library's None)


def _no_slices(context, parameter, value: str) -> str | None:
    return None if value == NO_SLICES else value


slice_option = click.option(
    "--slice",
    "slice_by",
    default="category",
    show_default=True,
    callback=_no_slices,
    help=f"Group queries by {', '.join(SLICES)}, any field of the query records (e.g. "
    "difficulty), or id~REGEX (the ids matching, and the others); plus the overall slice "
    "'all'. none: 'all' alone.",
)


def open_store(runs_dir: str | None):
    """The run store of ``--runs-dir`` (a path or URL; unset: the default runs folder)."""
    from rag_bench.runs import open_runs

    return open_runs(runs_dir)


def warn_broken(store) -> None:
    """Report a missing runs folder, and each unreadable run once (for the commands that span
    all runs)."""
    from rag_bench.cli.render import warn

    if not store.exists:
        warn(f"warning: there is no runs folder {store} (nothing stored yet)")
    for problem in store.broken.values():
        warn(f"warning: skipped: {problem}")


def drop_unknown_option():
    """--drop-unknown, for the commands that read a dataset's qrels (and a system's outputs)."""
    return click.option(
        "--drop-unknown",
        is_flag=True,
        help="Leave out judgements naming documents or queries the dataset lacks (a published "
        "set's qrels may), and retrieved documents outside the corpus; each is counted and named.",
    )


def warn_dataset(data) -> None:
    """The dataset's warnings (a likely typo of a category, judgements dropped), on stderr."""
    from rag_bench.cli.render import warn

    for warning in data.warnings:
        warn(f"warning: {warning}")


config_option = click.option(
    "--config",
    type=click.Path(dir_okay=False),
    default=None,
    help="An experiment file (rag-bench.toml) naming variants, overrides, sweeps, the tier "
    "and gates; flags given here win over it.",
)
