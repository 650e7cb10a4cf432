"""The README stays true: every command is documented and has help; documented examples run."""

from __future__ import annotations

import re
import shutil

import click
import pytest

from conftest import EXAMPLE, ROOT
from rag_bench.cli.main import cli
from rag_bench.components.registry import registry

README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_has_help_and_is_in_the_readme(rag_bench, command):
    out = rag_bench(command, "--help")
    assert out.exit_code == 0 and "Usage:" in out.stdout
    assert f"rag-bench {command}" in README


def test_every_option_of_every_command_has_help():
    for name, command in cli.commands.items():
        for option in command.params:
            assert not isinstance(option, click.Option) or option.help, (name, option.opts)


def test_every_builtin_variant_is_documented():
    for name, spec in registry().variants.items():
        if spec.origin == "rag-bench":
            assert f"`{name}`" in README


def test_every_metric_family_is_documented():
    from rag_bench.evaluation.measures import FAMILIES

    for name in FAMILIES:
        assert re.search(rf"`{re.escape(name)}(@k)?`", README), name


def test_the_two_commands_are_there():
    assert "make run" in README and "make test" in README


def python_section() -> str:
    """The first ``python`` block of the README's "The Python API"."""
    section = README.split("## The Python API", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow
def test_the_python_section_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAG_BENCH_RUNS_DIR", raising=False)
    shutil.copy(EXAMPLE / "qrels.txt", "qrels.txt")  # the files the section scores
    shutil.copy(EXAMPLE / "run.txt", "run.trec")
    exec(compile(python_section(), "README.md", "exec"), {})
    assert (tmp_path / "report.html").stat().st_size > 0
    assert "kestrel-kb" in capsys.readouterr().out  # the error names the shipped datasets
