"""The ``rag-bench`` command line: each command parses its flags, calls one library function and
renders the result; the commands live one group to a module beside this one."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import traceback

import click

from rag_bench import __version__
from rag_bench.cli import (
    analysis,
    exchange,
    generate,
    qrels,
    registry,
    review,
    run,
    scoring,
    store,
    tiers,
)
from rag_bench.cli.options import UserMistake
from rag_bench.errors import ParameterError, RagBenchError

OUTPUT_ERRORS = (errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EBADF)


class Group(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ParameterError as error:
            flag = self.flag(ctx, error.parameter)
            raise UserMistake(error.as_flag(flag) if flag else error) from None
        except RagBenchError as error:
            raise UserMistake(error) from None

    def flag(self, ctx: click.Context, parameter: str) -> str | None:
        """The flag of the running command that sets a library parameter, if it has one."""
        command = self.get_command(ctx, ctx.invoked_subcommand or "")
        for option in command.params if command else ():
            if option.name == parameter and option.opts:
                return option.opts[0]
        return None


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rag-bench")
def cli() -> None:
    """Evaluate RAG pipelines as experiments with persisted, queryable traces."""


for command in (
    scoring.eval_command,
    scoring.judge_agreement_command,
    run.run_command,
    qrels.rescore_command,
    qrels.qrels_group,
    tiers.tiers_command,
    generate.generate_command,
    registry.variants_command,
    registry.components_command,
    registry.metrics_command,
    store.runs_command,
    store.show_command,
    store.rm_command,
    store.sql_command,
    analysis.compare_command,
    analysis.diff_command,
    analysis.gate_command,
    analysis.diagnose_command,
    analysis.robustness_command,
    analysis.noise_command,
    analysis.report_command,
    exchange.import_command,
    exchange.export_command,
    review.pool_command,
    review.review_command,
):
    cli.add_command(command)


def main() -> None:
    """Run the command; a standard output that cannot take the result (a full disk, an I/O
    error) is one line on stderr, a closed pipe ends the command silently, as Unix tools do."""
    try:
        try:
            cli(prog_name="rag-bench")
        finally:
            _flush_output()
    except OSError as exc:
        if not _from_output(exc):
            raise
        _quiet_output()
        if exc.errno != errno.EPIPE:
            message = f"error: cannot write to standard output: {exc.strerror or exc}"
            print(message + " (fix: write to a file with room, or pipe elsewhere)", file=sys.stderr)
        sys.exit(1 if exc.errno == errno.EPIPE else 2)


def _flush_output() -> None:
    if sys.stdout is not None:
        sys.stdout.flush()


def _from_output(exc: OSError) -> bool:
    """Whether the error came from writing standard output (click's echo or the last flush)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return exc.errno in OUTPUT_ERRORS and any(f.name in ("echo", "_flush_output") for f in frames)


def _quiet_output() -> None:
    """Point standard output at the null device, so that the interpreter's last flush of what
    could not be written raises nothing more."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())


if __name__ == "__main__":
    main()
